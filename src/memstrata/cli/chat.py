"""``memstrata chat``: talk with an agent that remembers; the input loop around ChatShell."""

from __future__ import annotations

from typing import Annotated

import typer

from memstrata.agent.shell import ChatShell
from memstrata.cli.common import AgentOption, HomeOption, SessionOption, SpaceOption, console, open_memory, whose
from memstrata.validation import check_budget

PROMPT = "[bold green]you>[/] "


def register(app: typer.Typer) -> None:
    """Attach ``chat`` to the root app."""
    app.command()(chat)


def chat(
    user: Annotated[
        str | None, typer.Option("--user", "-u", help="Whose memory (user_id; default: me, unless --space).")
    ] = None,
    space: SpaceOption = None,
    agent: AgentOption = None,
    session: SessionOption = None,
    budget: Annotated[int, typer.Option("--budget", help="Token budget of the memory block per reply.")] = 1000,
    show_memories: Annotated[
        bool, typer.Option("--show-memories", help="Show which memories each reply used (/memories toggles it).")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Chat with an agent that answers from memory and remembers every exchange (extractive without an LLM).

    It talks in a user's memory (--user) or, as --agent, in a shared space (--space).

    Example: memstrata chat --user ana --session trip-planning --show-memories
    """
    check_budget(budget, "--budget")  # before opening anything
    target = whose("me" if user is None and space is None else user, space)
    with open_memory(home) as memory:
        if target.space is not None:
            # An unknown space or an agent without access ends here (exit 3 or 8), not on every message.
            memory.grants(target.space, agent_id=agent)
        shell = ChatShell(
            memory,
            console,
            user_id=target.user,
            space=target.space,
            agent_id=agent,
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
