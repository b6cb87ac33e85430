"""What every command shares: options, opening the Memory, printing, exit codes."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, is_dataclass
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from memstrata.config import DATABASE_FILE_NAME, load_settings
from memstrata.errors import (
    AccessDenied,
    ConfigError,
    EmbeddingError,
    InvalidInput,
    MemstrataError,
    NotFound,
    ProviderError,
    StorageError,
)
from memstrata.memory import Memory
from memstrata.models import Hit, Turn, space_of
from memstrata.terminal import visible
from memstrata.validation import (
    check_fraction,
    check_identifier,
    check_limit,
    check_offset,
    check_stored_time,
    check_text,
    check_tiers,
    check_timezone,
    parse_messages,
)

#: Most specific first; anything else that is a MemstrataError exits 1.
EXIT_CODES: tuple[tuple[type[MemstrataError], int], ...] = (
    (InvalidInput, 2),
    (NotFound, 3),
    (ConfigError, 4),
    (StorageError, 5),
    (EmbeddingError, 6),
    (ProviderError, 7),
    (AccessDenied, 8),
)

HomeOption = Annotated[
    Path | None,
    typer.Option("--home", help="Data directory (default: $MEMSTRATA_HOME or the platform's user data dir)."),
]
UserOption = Annotated[
    str | None, typer.Option("--user", "-u", help="Whose memory (user_id); exactly one of --user and --space.")
]
SpaceOption = Annotated[
    str | None,
    typer.Option("--space", help="A shared space's memory instead of a user's (see `memstrata space`)."),
]
SpacesOption = Annotated[
    str | None,
    typer.Option(
        "--spaces",
        help="Shared spaces to rank together with it: names, comma-separated, or 'all' (every space --agent may read).",
    ),
]
SessionOption = Annotated[str | None, typer.Option("--session", "-s", help="Session id.")]
AgentOption = Annotated[
    str | None,
    typer.Option("--agent", help="Agent id; in a space, the agent acting (checked against its grant)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

# No emoji codes: stored text such as ":thumbs_up:" prints as typed.
console = Console(emoji=False)
error_console = Console(stderr=True, emoji=False)


def shown(value: object) -> Text:
    """Stored data (a message, an id, a name) as Rich text that is never read as markup: "[/b]" prints as typed.

    Control characters are written out (``\\x1b``), so a stored escape sequence prints as text.
    """
    return Text(visible(str(value)))


def console_error(message: str) -> None:
    """Print one error line to stderr."""
    # escape: a message such as "pip install 'memstrata[server]'" is text, not rich markup.
    error_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


@contextmanager
def open_memory(home: Path | None, *, run_jobs: bool = True, existing: bool = False) -> Iterator[Memory]:
    """Open the Memory for a command and close it afterwards.

    ``run_jobs=False`` starts no background worker: queued tier work is left to ``serve``,
    ``chat`` or a later ``add``, except what the command runs itself (``flush(user_id=…)``
    runs that user's jobs only), instead of picking up any user's job and waiting for it on exit.
    ``existing=True`` raises NotFound, creating nothing, when the home holds no store yet (a
    mistyped ``--home`` would otherwise export an empty store over a good backup).
    """
    if existing:
        settings = load_settings(home=home)
        database = settings.data_dir / DATABASE_FILE_NAME
        if settings.storage_url is None and not database.is_file():
            raise NotFound(
                f"no memstrata store at {settings.data_dir} (no {DATABASE_FILE_NAME} there); check --home or"
                " MEMSTRATA_HOME"
            )
    memory = Memory(home) if run_jobs else Memory(home, background=False)
    try:
        yield memory
    finally:
        memory.close()


@dataclass(frozen=True, slots=True)
class Whose:
    """The memory a command names: a user's (``--user``) or a shared space's (``--space``)."""

    user: str | None = None
    space: str | None = None

    def __str__(self) -> str:
        return f"space {self.space!r}" if self.space is not None else f"user {self.user!r}"


def whose(user: str | None, space: str | None, *, required: bool = True) -> Whose:
    """Exactly one of ``--user`` and ``--space`` (at most one unless ``required``), checked before opening."""
    if user is not None and space is not None:
        raise InvalidInput("name either --user or --space, not both: a command reaches one memory")
    if required and user is None and space is None:
        raise InvalidInput(
            "--user or --space is required: a user's memory (--user ID) or a shared space (--space NAME)"
        )
    check_identifier(user, "user_id", required=False)
    check_identifier(space, "space", required=False)
    return Whose(user, space)


def parse_spaces(value: str | None) -> list[str] | str | None:
    """``--spaces``: "all", or comma-separated names (each checked); None when not given."""
    if value is None:
        return None
    if value.strip() == "all":
        return "all"
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise InvalidInput("--spaces needs space names, comma-separated, or 'all'")
    return [str(check_identifier(name, "spaces")) for name in names]


def to_jsonable(value: Any) -> Any:
    """Dataclasses, enums and datetimes as plain JSON values.

    A shared space's memory is stored under an internal scope id; it shows as ``"space"``
    (its name) with ``"user_id": null``, and every turn says its ``space``.
    """
    if is_dataclass(value) and not isinstance(value, type):  # less fields marked internal (``Hit.seq``)
        plain = {f.name: to_jsonable(getattr(value, f.name)) for f in fields(value) if not f.metadata.get("internal")}
        if isinstance(value, Turn):
            plain["space"] = value.space
        scope = plain.get("user_id")
        if isinstance(scope, str) and (space := space_of(scope)) is not None:
            plain.update(user_id=None, space=space)
        return plain
    if isinstance(value, dict):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(item) for item in value]
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    return value


def print_json(value: Any) -> None:
    """Print ``value`` as JSON on stdout (machine-readable, no colour)."""
    typer.echo(json.dumps(to_jsonable(value), ensure_ascii=False, indent=2))


def print_turns(turns: list[Turn], *, title: Text | None = None) -> None:
    """Print turns as a table: when, session, who, message, id; and the space and writer of a space's turns."""
    in_space = any(turn.space is not None for turn in turns)
    table = Table("when", "session", "who", "message", "id", *(("space", "by") if in_space else ()), title=title)
    for turn in turns:
        table.add_row(
            turn.created_at.strftime("%Y-%m-%d %H:%M"),
            shown(turn.session_id or ""),
            shown(turn.name or turn.role.value),
            shown(turn.content),
            shown(turn.id),
            *((shown(turn.space or ""), shown(turn.agent_id or "")) if in_space else ()),
        )
    console.print(table if turns else "no turns")


def hit_source(hit: Hit) -> Text:
    """Where a hit comes from, as a federated context names it: ``[apollo, by planner]``; empty for the user's own."""
    if hit.space is None:
        return Text("")
    return shown(f"[{hit.space}, by {hit.written_by}]" if hit.written_by else f"[{hit.space}]")


def check_can_listen(host: str, port: int, *, port_setting: str = " (or the server_port setting)") -> None:
    """Raise ConfigError if nothing can listen on ``host``:``port`` (in use, or not this machine's address).

    Every address the name resolves to is tried, as the server binds them all ("localhost"
    may be 127.0.0.1 and ::1).
    """
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with contextlib.ExitStack() as held:
            for family, address in dict.fromkeys((info[0], info[4]) for info in found):
                held.enter_context(socket.create_server(address, family=family))
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; stop what uses that port or choose"
            f" another with --port{port_setting}, and check --host is an address of this machine"
        ) from exc


def check_before_opening(
    *,
    text: tuple[str, str] | None = None,
    user: str | None = None,
    session: str | None = None,
    agent: str | None = None,
    timezone: str | None = None,
    message: dict[str, str] | None = None,
    timestamp: str | None = None,
    limit: tuple[int, int] | None = None,
    offset: int | None = None,
    diversity: float | None = None,
    tiers: tuple[str, ...] = (),
) -> None:
    """Refuse arguments that are wrong whatever the settings, before a store is opened.

    Opening creates a new ``--home`` and its database, and embeds every stored turn again
    when the embedder changed: a command refused for its input must do neither. ``text``
    is (value, name); ``limit`` is (value, most allowed). Sizes are checked later, against
    the store's ``max_text_bytes``.
    """
    if text is not None:
        check_text(text[0], text[1], max_bytes=sys.maxsize)
    if message is not None:
        parse_messages([message], max_bytes=sys.maxsize)
    check_identifier(user, "user_id", required=user is not None)
    check_identifier(session, "session_id", required=False)
    check_identifier(agent, "agent_id", required=False)
    check_timezone(timezone)
    check_stored_time(timestamp)
    if limit is not None:
        check_limit(limit[0], maximum=limit[1])
    if offset is not None:
        check_offset(offset)
    if diversity is not None:
        check_fraction(diversity, "diversity")
    check_tiers(tiers)
