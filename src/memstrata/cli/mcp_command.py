"""The ``mcp`` command: serve the memory to MCP clients (Claude, Cursor, VS Code ...) over stdio or HTTP."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from types import FrameType
from typing import TYPE_CHECKING, Annotated, cast

import typer

from memstrata.cli.common import HomeOption, check_can_listen, error_console, open_memory

if TYPE_CHECKING:
    from memstrata.mcp.app import LogLevel as ServerLogLevel

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class Transport(StrEnum):
    """How MCP clients reach the server."""

    STDIO = "stdio"
    HTTP = "http"


class LogLevel(StrEnum):
    """What the server logs on stderr."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def register(app: typer.Typer) -> None:
    """Attach this module's command to the root app."""
    app.command("mcp")(mcp)


def mcp(
    transport: Annotated[
        Transport, typer.Option(help="stdio: the client starts this command; http: streamable HTTP on --host/--port.")
    ] = Transport.STDIO,
    user: Annotated[
        str | None,
        typer.Option("--user", "-u", help="Serve only this user's memory; without it every tool call names a user."),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent", help="Act as this agent: tools read and write its memories, and shared spaces by its grants."
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on (http only).")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65_535, help="Port to listen on (http only); the endpoint is /mcp.")
    ] = 8421,
    log_level: Annotated[LogLevel, typer.Option(help="What to log on stderr.")] = LogLevel.WARNING,
    home: HomeOption = None,
) -> None:
    """Run an MCP server over the memory: tools to add, search, get context, forget and inspect.

    With stdio (the default) an MCP client starts this command and talks to it over
    stdin/stdout; `--transport http` serves streamable HTTP at http://HOST:PORT/mcp instead.

    Example: memstrata mcp --user ana
    """
    from memstrata.mcp import require_mcp_dependencies

    require_mcp_dependencies()
    from memstrata.mcp.app import create_server

    if transport is Transport.HTTP:
        # One line and the "bad setting" exit code, before the store opens, as `serve` does.
        check_can_listen(host, port, port_setting="")
    if transport is Transport.HTTP and host not in LOOPBACK_HOSTS:
        error_console.print(
            f"[yellow]warning:[/] the MCP HTTP transport has no authentication, and {host} is not a loopback "
            "address: anyone who can reach it can read and delete the memory",
            highlight=False,
        )
    # Opened here rather than in the server's lifespan, so a bad setting or store exits with its
    # one-line message and exit code before any transport starts; closed when the server stops.
    with open_memory(home) as memory:
        level = cast("ServerLogLevel", log_level.value.upper())
        server = create_server(memory, user_id=user, agent_id=agent, log_level=level)
        try:
            with _terminate_as_interrupt():
                if transport is Transport.HTTP:
                    server.run("streamable-http", host=host, port=port)
                else:
                    server.run("stdio")
        except KeyboardInterrupt:
            pass


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM (how clients and service managers stop a server) like Ctrl-C, so the Memory is closed."""

    def interrupt(signal_number: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
