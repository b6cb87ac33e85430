"""``memstrata demo --agents``: three agents, their own notes and one shared space, offline.

A planner, a coder and a reviewer work for one user. Each keeps its own notes in the user's
memory (its turns, found by its ``agent_id``); what the team must know goes into the shared
space, where grants decide who reads and writes and trust decides whose word ranks first.
"""

from __future__ import annotations

from pathlib import Path

from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from memstrata.cli.common import console, hit_source, shown
from memstrata.errors import AccessDenied
from memstrata.memory import Memory
from memstrata.models import Hit

USER = "ana"
SPACE = "apollo"
PLANNER, CODER, REVIEWER = "planner", "coder", "reviewer"
#: Each agent's own note in the user's memory (agent, id, text).
NOTES: list[tuple[str, str, str]] = [
    (PLANNER, "demo-note-planner", "Ana wants a short status summary every Friday afternoon."),
    (CODER, "demo-note-coder", "Ana prefers tabs over spaces in her Python code."),
    (REVIEWER, "demo-note-reviewer", "Ana asked for pull requests of at most 300 lines."),
]
PLANNED = "Ana confirmed in the kickoff call that Apollo ships on March 3rd."
GUESSED = "The Apollo release is due on April 10th."
#: What the coder asks in its own notes and the spaces; what the reviewer asks in the space.
SHIP_DATE = "When does Apollo ship?"
QUESTION = "When is the Apollo release due?"


def run_agents(home: Path) -> None:
    """Play the scenario on a Memory in ``home``, printing each beat and whether it held."""
    console.print(Panel.fit(f"memstrata demo --agents — data directory: {home}", style="bold"))
    with Memory(home) as memory:
        console.print(f"embedder: [cyan]{memory.embedder.model_id}[/] (offline, no API key)")
        _set_up(memory)
        _fact_reaches_the_coder(memory)
        _denied_read(memory)
        _trusted_first(memory)
        _revoked_grant(memory)


def _set_up(memory: Memory) -> None:
    # A kept --home plays the scenario over from the start.
    if any(space.name == SPACE for space in memory.spaces(prefix=SPACE)):
        memory.delete_space(SPACE)
    memory.set_trust(REVIEWER, CODER, 1.0)
    memory.create_space(SPACE, description="What the team knows about the Apollo release", agent_id=PLANNER)
    memory.grant(SPACE, CODER, "write", by=PLANNER)
    for agent, note_id, text in NOTES:
        memory.add(text, user_id=USER, agent_id=agent, id=note_id)
    console.print(
        f"The {PLANNER} created space [bold]{SPACE}[/] (admin) and gave the {CODER} write access; "
        f"each agent keeps its own notes in {USER}'s memory.\n"
    )


def _fact_reaches_the_coder(memory: Memory) -> None:
    console.rule("1. a fact the planner learns reaches the coder through the space")
    memory.add(PLANNED, space=SPACE, agent_id=PLANNER)
    console.print(f'{PLANNER} → space {SPACE}: "{PLANNED}"')
    hits = memory.search(SHIP_DATE, user_id=USER, agent_id=CODER, spaces="all", limit=3)
    _print_hits(f"{CODER} asks: {SHIP_DATE}  (its own notes + every space it may read)", hits)
    top = hits[0] if hits else None
    reached = top is not None and top.content == PLANNED and top.space == SPACE and top.written_by == PLANNER
    _verdict(reached, f"the {CODER}'s best hit is the {PLANNER}'s fact, from [{SPACE}, by {PLANNER}]")


def _denied_read(memory: Memory) -> None:
    console.rule("2. an agent without a grant cannot read the space")
    try:
        memory.search(QUESTION, space=SPACE, agent_id=REVIEWER)
        _verdict(False, f"the {REVIEWER} read the space without a grant")
    except AccessDenied as exc:
        console.print(shown(f"{REVIEWER} searches space {SPACE}: AccessDenied: {exc}"))
        _verdict(True, f"read denied: the {REVIEWER} has no grant")
    memory.grant(SPACE, REVIEWER, "read", by=PLANNER)
    console.print(f"The {PLANNER} grants the {REVIEWER} read access.")


def _trusted_first(memory: Memory) -> None:
    console.rule("3. conflicting facts: the trusted writer's comes first")
    memory.add(GUESSED, space=SPACE, agent_id=CODER)
    console.print(f'{CODER} → space {SPACE}: "{GUESSED}"')
    _print_hits(f"{REVIEWER} asks: {QUESTION}  (trusting every agent alike)", _releases(memory))
    memory.set_trust(REVIEWER, CODER, 0.2)
    console.print(
        f"{REVIEWER} sets its trust in the {CODER}'s memories to 0.2: set_trust({REVIEWER!r}, {CODER!r}, 0.2)"
    )
    hits = _releases(memory)
    _print_hits(f"{REVIEWER} asks again: {QUESTION}", hits)
    trusted = bool(hits) and hits[0].content == PLANNED
    _verdict(trusted, f"trusted first: the {PLANNER}'s date ranks above the untrusted {CODER}'s")


def _revoked_grant(memory: Memory) -> None:
    console.rule("4. a revoked grant")
    memory.revoke(SPACE, REVIEWER, by=PLANNER)
    console.print(f"The {PLANNER} revokes the {REVIEWER}'s access to {SPACE}.")
    try:
        memory.search(QUESTION, space=SPACE, agent_id=REVIEWER)
        _verdict(False, f"the {REVIEWER} still reads the space")
    except AccessDenied as exc:
        console.print(shown(f"{REVIEWER} searches space {SPACE}: AccessDenied: {exc}"))
        _verdict(True, f"revoked: the {REVIEWER} can no longer read {SPACE}")
    left = ", ".join(f"{grant.agent_id} ({grant.access.value})" for grant in memory.grants(SPACE))
    console.print(shown(f"grants on {SPACE} now: {left}"))


def _releases(memory: Memory) -> list[Hit]:
    """The reviewer's search of the space for the release date (the space alone: it keeps no notes of it)."""
    return memory.search(QUESTION, space=SPACE, agent_id=REVIEWER, limit=2)


def _print_hits(title: str, hits: list[Hit]) -> None:
    table = Table("#", "score", "from", "memory", title=shown(title), title_justify="left")
    for rank, hit in enumerate(hits, start=1):
        source = hit_source(hit) if hit.space is not None else shown(f"[own notes, by {hit.written_by}]")
        table.add_row(str(rank), f"{hit.score:.4f}", source, shown(hit.content))
    console.print(table)


def _verdict(held: bool, said: str) -> None:
    console.print(Text.assemble(("✓ " if held else "✗ ", "green" if held else "red"), said), "\n")
