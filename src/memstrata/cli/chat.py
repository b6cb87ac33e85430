"""``memstrata chat``: talk with an agent that remembers; the input loop around ChatShell."""

from __future__ import annotations

from typing import Annotated

import typer

from memstrata.agent.shell import ChatShell
from memstrata.cli.common import HomeOption, SessionOption, console, open_memory
from memstrata.validation import check_budget

PROMPT = "[bold green]you>[/] "


def register(app: typer.Typer) -> None:
    """Attach ``chat`` to the root app."""
    app.command()(chat)


def chat(
    user: Annotated[str, typer.Option("--user", "-u", help="Whose memory (user_id).")] = "me",
    session: SessionOption = None,
    budget: Annotated[int, typer.Option("--budget", help="Token budget of the memory block per reply.")] = 1000,
    show_memories: Annotated[
        bool, typer.Option("--show-memories", help="Show which memories each reply used (/memories toggles it).")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Chat with an agent that answers from memory and remembers every exchange (extractive without an LLM).

    Example: memstrata chat --user ana --session trip-planning --show-memories
    """
    check_budget(budget, "--budget")  # before opening anything
    with open_memory(home) as memory:
        shell = ChatShell(
            memory,
            console,
            user_id=user,
            session_id=session,
            token_budget=budget,
            show_memories=show_memories,
            confirm=_confirm,
        )
        shell.greet()
        while shell.is_running:
            try:
                line = console.input(PROMPT)
            except (EOFError, KeyboardInterrupt):
                console.print()
                break
            try:
                shell.handle(line)
            except KeyboardInterrupt:
                console.print("interrupted; that message was not stored")


def _confirm(question: str) -> bool:
    try:
        return typer.confirm(question, default=False)
    except typer.Abort:  # end of input while asking
        return False
