"""Commands over the memory hierarchy: inspect, segment, consolidate, retry-jobs."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Column, Table
from rich.text import Text

from memstrata.cli.common import (
    AgentOption,
    HomeOption,
    JsonOption,
    SpaceOption,
    UserOption,
    Whose,
    check_before_opening,
    console,
    open_memory,
    print_json,
    print_turns,
    shown,
    whose,
)
from memstrata.errors import ConfigError
from memstrata.models import Inspection
from memstrata.validation import check_identifier, check_limit


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the root app."""
    app.command()(inspect)
    app.command()(segment)
    app.command()(consolidate)
    app.command("retry-jobs")(retry_jobs)
    app.command()(retention)


def inspect(
    user: UserOption = None,
    space: SpaceOption = None,
    agent: AgentOption = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Rows per section.")] = 10,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show every tier of a user's (or a shared space's) memory: counts, working set, segments, profile, cells, log.

    Example: memstrata inspect --user ana --json
    """
    target = whose(user, space)
    check_before_opening(agent=agent)
    with open_memory(home, run_jobs=False) as memory:
        check_limit(limit)
        # Checks the user or space first, then runs that memory's queued work only.
        memory.flush(user_id=target.user, space=target.space)
        report = memory.inspect(user_id=target.user, space=target.space, agent_id=agent, limit=limit)
    if as_json:
        print_json(report)
    else:
        _print(report, target)


def _print(report: Inspection, target: Whose) -> None:
    jobs = f"{report.pending_jobs} jobs pending"
    if report.failed_jobs:
        jobs += f", {report.failed_jobs} failed"
    named = target.user if target.space is None else f"space {target.space}"
    counts = Table("tier", "items", title=shown(f"memory of {named} ({jobs})"))
    for name, count in report.counts.items():
        counts.add_row(name, str(count))
    console.print(counts)
    if report.profile:
        profile = Table("trait", "value", title="profile")
        for key, value in report.profile.items():
            profile.add_row(shown(key), shown(value))
        console.print(profile)
    if report.cells:
        cells = Table("kind", "subject", "attribute", "value", "valid", title="long-term cells")
        for cell in report.cells:
            until = cell.valid_to.strftime("%Y-%m-%d") if cell.valid_to else "now"
            cells.add_row(
                cell.kind,
                shown(cell.subject),
                shown(cell.attribute),
                shown(cell.value),
                f"{cell.valid_from:%Y-%m-%d} → {until}",
            )
        console.print(cells)
    if report.segments:
        # The id is what `memstrata segment` takes: the summary wraps first, so it stays whole to copy.
        segments = Table(
            "heat", "visits", "turns", "state", "summary", Column("id", no_wrap=True), title="mid-term segments"
        )
        for segment in report.segments:
            heat, visits, size = f"{segment.heat:.2f}", str(segment.visits), str(segment.turn_count)
            segments.add_row(heat, visits, size, segment.state, shown(segment.summary), shown(segment.id))
        console.print(segments)
    if report.patterns:
        patterns = Table("score", "count", "pattern", title="procedural patterns")
        for pattern in report.patterns:
            patterns.add_row(f"{pattern.score:.2f}", str(pattern.count), shown(pattern.description))
        console.print(patterns)
    if report.entities:
        named = ", ".join(f"{e.name} ({e.kind}, {e.mentions})" for e in report.entities)
        console.print(Text.assemble("entities: ", shown(named)))
    for consolidation in report.consolidations:
        console.print(Text.assemble(f"consolidation TES {consolidation.tes:.3f}: ", shown(consolidation.summary)))
    if report.events:
        events = Table("when", "event", "detail", title="event log")
        for event in report.events:
            events.add_row(f"{event.at:%Y-%m-%d %H:%M:%S}", event.kind, shown(dict(event.detail)))
        console.print(events)
    if report.failed_jobs:
        console.print(
            Text.assemble(
                (f"{report.failed_jobs} background jobs failed every attempt", "bold red"),
                "; their tier work (facts, entities, summaries) is missing. Fix the cause (see the log),"
                f" then run: memstrata retry-jobs {'--user' if target.space is None else '--space'} ",
                shown(target.user if target.space is None else target.space),
            )
        )


def segment(
    segment_id: Annotated[str, typer.Argument(help="The segment's id, from the id column of `memstrata inspect`.")],
    user: UserOption = None,
    space: SpaceOption = None,
    agent: AgentOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the turns filed in one of a user's (or a space's) mid-term segments, in the order they were said.

    Example: memstrata segment 01JB2Q8V6Z3N4M5K6J7H8G9F0E --user ana
    """
    target = whose(user, space)
    check_before_opening(agent=agent)
    check_identifier(segment_id, "segment_id")
    with open_memory(home, run_jobs=False) as memory:
        # That memory's queued filing only, as inspect does, so the two agree.
        memory.flush(user_id=target.user, space=target.space)
        turns = memory.segment_turns(segment_id, user_id=target.user, space=target.space, agent_id=agent)
    if as_json:
        print_json(turns)
    else:
        named = target.user if target.space is None else f"space {target.space}"
        print_turns(turns, title=shown(f"segment {segment_id} of {named} ({len(turns)} turns)"))


def consolidate(
    user: UserOption = None,
    space: SpaceOption = None,
    agent: AgentOption = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run "sleep" now: cluster unconsolidated turns and summarise each cluster, with its TES.

    Example: memstrata consolidate --user ana
    """
    target = whose(user, space)
    check_before_opening(agent=agent)
    with open_memory(home) as memory:
        made = memory.consolidate(user_id=target.user, space=target.space, agent_id=agent)
    if as_json:
        print_json(made)
        return
    for item in made:
        turns = (f"{len(item.source_turn_ids)} turns", "bold")
        console.print(Text.assemble(turns, " → ", shown(item.summary), f"  (TES {item.tes:.3f})"))
    console.print(f"{len(made)} consolidations")


def retry_jobs(
    user: Annotated[
        str | None, typer.Option("--user", "-u", help="Only this user's jobs (default: everyone's).")
    ] = None,
    space: Annotated[
        str | None, typer.Option("--space", help="Only this shared space's jobs (not with --user).")
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Queue again the background jobs that failed every attempt, then run them.

    Example: memstrata retry-jobs --user ana
    """
    target = whose(user, space, required=False)
    named = target.user is not None or target.space is not None
    with open_memory(home) as memory:
        count = memory.retry_failed_jobs(user_id=target.user, space=target.space)
        if count:
            memory.flush(user_id=target.user, space=target.space)
        left = memory.inspect(user_id=target.user, space=target.space, limit=1).failed_jobs if named else None
    if as_json:
        print_json({"requeued": count, "failed_again": left})
        return
    console.print(f"{count} failed jobs queued again and run")
    if left:
        console.print(f"{left} failed again: see the log for why", style="bold red", highlight=False)


def retention(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Apply the retention setting to every user and space now; print what each tier deleted.

    The rules come from the `retention` setting (memstrata.toml or MEMSTRATA_RETENTION); the
    background worker applies them every `retention_interval_seconds` on its own.

    Example: memstrata retention --json
    """
    with open_memory(home, run_jobs=False) as memory:
        if not memory.settings.retention:
            raise ConfigError(
                "no retention rules are set: add e.g. `[memstrata.retention]` `midterm = {max_age_days = 90}` to"
                " memstrata.toml (see docs/tiers.md#retention)"
            )
        deleted = memory.apply_retention()
    if as_json:
        print_json(deleted)
        return
    for tier, count in deleted.items():
        console.print(f"{tier}: {count} deleted", highlight=False)
