"""The ``memstrata`` command line: a Typer root plus one module per command group."""

from __future__ import annotations

import sys

import typer

from memstrata.cli import (
    bench,
    chat,
    cost_commands,
    demo,
    mcp_command,
    memory_commands,
    rekey_command,
    server_commands,
    space_commands,
    tier_commands,
    ui_command,
)
from memstrata.cli.common import EXIT_CODES, console_error
from memstrata.errors import MemstrataError

app = typer.Typer(
    name="memstrata",
    help="Local-first persistent memory for LLM agents.\n\nExample: memstrata add 'I live in Lisbon' --user ana",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
memory_commands.register(app)
rekey_command.register(app)
tier_commands.register(app)
space_commands.register(app)
cost_commands.register(app)
demo.register(app)
chat.register(app)
server_commands.register(app)
ui_command.register(app)
mcp_command.register(app)
app.add_typer(bench.app, name="bench")


def main() -> None:
    """Run the CLI; map memstrata errors to a one-line message and an exit code."""
    try:
        app()
    except MemstrataError as exc:
        console_error(str(exc))
        code = next((code for kind, code in EXIT_CODES if isinstance(exc, kind)), 1)
        sys.exit(code)
