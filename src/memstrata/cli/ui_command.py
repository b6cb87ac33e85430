"""``memstrata ui``: the memory inspector over the data directory, on 127.0.0.1, for its owner."""

from __future__ import annotations

import html
import os
import socket
import sys
import tempfile
import threading
import webbrowser
from pathlib import Path
from typing import Annotated

import typer

from memstrata.cli.common import HomeOption, console
from memstrata.config import load_settings
from memstrata.errors import ConfigError, InvalidInput
from memstrata.memory import Memory

HOST = "127.0.0.1"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


def register(app: typer.Typer) -> None:
    """Attach ``ui`` to the root app."""
    app.command()(ui)


def ui(
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (0: any free one).")] = 0,
    no_open: Annotated[bool, typer.Option("--no-open", help="Print the address; do not open a browser.")] = False,
    log_level: Annotated[str, typer.Option(help="uvicorn log level: critical … debug.")] = "warning",
    home: HomeOption = None,
) -> None:
    """Open the memory inspector (users, timeline, tiers, entity graph, search) over the data directory.

    It listens on 127.0.0.1 only and makes a secret for this run, never stored, that sees every user
    as the other commands do; the address it prints carries it after '#', which browsers never send.
    API keys from `memstrata keys create` work too, each seeing its tenant only.

    Example: memstrata ui --home ./demo-memory
    """
    from memstrata.server import require_server_dependencies

    if log_level.lower() not in LOG_LEVELS:
        raise InvalidInput(f"--log-level must be one of {', '.join(LOG_LEVELS)}, not {log_level!r}")
    require_server_dependencies()
    import uvicorn

    from memstrata.server.app import create_app
    from memstrata.server.keys import new_secret

    # Keyless requests are never taken here, whatever the settings say: the secret is the way in.
    settings = load_settings(home=home, server_host=HOST, server_allow_anonymous=False)
    listener = _listen(port)
    memory: Memory | None = None
    try:
        memory = Memory.from_settings(settings)
        secret = new_secret()
        app = create_app(memory, settings=settings, close_memory=True, owner_secret=secret)
        address = f"http://{HOST}:{listener.getsockname()[1]}/ui#key={secret}"
        console.print(f"memstrata inspector over {settings.data_dir}", highlight=False, markup=False)
        console.print(address, highlight=False, markup=False, soft_wrap=True)
        console.print("The address holds this run's secret: share it with no one. Ctrl+C stops.", highlight=False)
        sys.stdout.flush()
        if not no_open:
            # The socket already listens, so the browser's request waits for the server rather than failing.
            _open_privately(address)
        server = uvicorn.Server(uvicorn.Config(app, log_level=log_level.lower(), lifespan="on"))
        server.run(sockets=[listener])
    finally:
        if memory is not None:
            memory.close()  # the app closes it on shutdown too; a failed start must not leave it open
        listener.close()


def _open_privately(address: str) -> None:
    """Open ``address`` in a browser without putting its secret on a command line other users can read.

    The browser is given a file only this user can read that sends it on to the address; the
    file is removed a minute later, once the browser has read it.
    """
    descriptor, name = tempfile.mkstemp(prefix="memstrata-ui-", suffix=".html")  # mode 0600
    with os.fdopen(descriptor, "w", encoding="utf-8") as page:
        page.write(f'<!doctype html><meta http-equiv="refresh" content="0; url={html.escape(address)}">')
    timer = threading.Timer(60.0, lambda: Path(name).unlink(missing_ok=True))
    timer.daemon = True
    timer.start()
    webbrowser.open(Path(name).as_uri())


def _listen(port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:``port``; ConfigError naming --port when it cannot."""
    try:
        return socket.create_server((HOST, port))
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {HOST}:{port}: {exc.strerror or exc}; choose another with --port (0: any free one)"
        ) from exc
