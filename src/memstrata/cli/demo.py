"""``memstrata demo``: remember facts in one session, recall them after a restart."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.panel import Panel
from rich.table import Table

from memstrata.cli.common import console
from memstrata.cli.demo_agents import run_agents
from memstrata.memory import Memory

USER = "ana"
SESSIONS: list[tuple[str, datetime, list[tuple[str, str]]]] = [
    (
        "monday",
        datetime(2026, 3, 2, 9, 0, tzinfo=UTC),
        [
            ("user", "Hi! I'm Ana. I just moved to Lisbon for a job at a robotics startup called Tern."),
            ("assistant", "Welcome to Lisbon, Ana! A robotics startup sounds exciting."),
            ("user", "I'm allergic to peanuts, so keep that in mind whenever you suggest recipes."),
            ("assistant", "Noted: no peanuts in any recipe I suggest."),
            ("user", "My sister Marta is coming to visit on April 12th."),
            ("assistant", "Lovely, I hope you two have a great time."),
            ("user", "Please give me short answers with bullet points; long paragraphs lose me."),
            ("assistant", "Understood: short and bulleted from now on."),
        ],
    ),
    (
        "thursday",
        datetime(2026, 3, 5, 18, 30, tzinfo=UTC),
        [
            ("user", "My Python script crashes with KeyError: 'timestamp' when a log line is empty."),
            ("assistant", "Skip empty lines before parsing, or use record.get('timestamp')."),
            ("user", "That fixed it. Also, what's a good name for a cat?"),
            ("assistant", "Miso, Pixel, or Biscuit are popular choices."),
        ],
    ),
]
# (question a later session asks, the words of the fact that should come back)
PROBES: list[tuple[str, str]] = [
    ("Suggest a dessert recipe for Ana", "allergic to peanuts"),
    ("Which city does Ana live in?", "moved to Lisbon"),
    ("When will her sister visit?", "April 12th"),
    ("How should I format my answers?", "bullet points"),
    ("Where does Ana work?", "robotics startup"),
]


def register(app: typer.Typer) -> None:
    """Attach ``demo`` to the root app."""
    app.command()(demo)


def demo(
    home: Annotated[
        Path | None, typer.Option("--home", help="Keep the demo's memory here (default: a temporary directory).")
    ] = None,
    agents: Annotated[
        bool,
        typer.Option("--agents", help="Instead: three agents sharing a space, with a denied read, a revoke and trust."),
    ] = False,
) -> None:
    """Store facts in two sessions, close the memory, reopen it and recall the facts.

    With --agents: a planner, a coder and a reviewer share one space beside their own notes.

    Example: memstrata demo --home ./demo-memory
    """
    run = (lambda directory, kept: run_agents(directory)) if agents else _run
    if home is not None:
        run(home, kept=True)
        return
    with tempfile.TemporaryDirectory(prefix="memstrata-demo-") as directory:
        run(Path(directory), kept=False)


def _run(home: Path, *, kept: bool) -> None:
    console.print(Panel.fit(f"memstrata demo — data directory: {home}", style="bold"))
    with Memory(home) as memory:
        console.print(f"embedder: [cyan]{memory.embedder.model_id}[/] (offline, no API key)")
        for session_id, started, messages in SESSIONS:
            memory.add(
                [{"role": role, "content": content} for role, content in messages],
                user_id=USER,
                session_id=session_id,
                timestamp=started,
            )
            console.print(f"session [bold]{session_id}[/]: stored {len(messages)} messages")
    console.print("memory closed. Reopening it as a new instance, as a new conversation would …\n")

    recalled = 0
    with Memory(home) as memory:
        for question, expected in PROBES:
            hits = memory.search(question, user_id=USER, limit=3)
            found = any(expected in hit.content for hit in hits)
            recalled += found
            table = Table(
                title=f"[bold]{question}[/]  {'[green]✓ recalled' if found else '[red]✗ missed'}",
                title_justify="left",
                show_header=True,
            )
            table.add_column("#", width=2)
            table.add_column("score", width=7)
            table.add_column("session", width=9)
            table.add_column("memory")
            for rank, hit in enumerate(hits, start=1):
                session = hit.turn.session_id if hit.turn else ""
                style = "green" if expected in hit.content else ""
                table.add_row(
                    str(rank), f"{hit.score:.4f}", session or "", f"[{style}]{hit.content}" if style else hit.content
                )
            console.print(table)
    console.print(
        f"\n[bold]{recalled}/{len(PROBES)}[/] facts from earlier sessions recalled in the top 3 after reopening."
    )
    if kept:
        console.print(f"Search it yourself: memstrata search 'peanuts' --user {USER} --home {home}")
