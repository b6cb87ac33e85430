"""Commands over one Memory: add, search, context, history, forget, export, import, info, reindex, vacuum.

Those over one memory name it with ``--user`` or ``--space`` (a shared space, used as an ``--agent``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress
from rich.table import Table
from rich.text import Text

from memstrata.cli.common import (
    AgentOption,
    HomeOption,
    JsonOption,
    SessionOption,
    SpaceOption,
    SpacesOption,
    UserOption,
    check_before_opening,
    console,
    error_console,
    hit_source,
    open_memory,
    parse_spaces,
    print_json,
    print_turns,
    shown,
    to_jsonable,
    whose,
)
from memstrata.errors import StorageError
from memstrata.terminal import visible
from memstrata.transfer import read_export_file
from memstrata.validation import check_budget, check_text

#: How long ``context`` waits for queued background work before it gives up.
FLUSH_SECONDS = 60.0


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the root app."""
    for command in (add, search, context, history, forget, export, info, reindex, vacuum):
        app.command()(command)
    app.command("import")(import_)


def add(
    text: Annotated[str, typer.Argument(help="The message to remember.")],
    user: UserOption = None,
    space: SpaceOption = None,
    session: SessionOption = None,
    agent: AgentOption = None,
    role: Annotated[str, typer.Option(help="user, assistant, system or tool.")] = "user",
    name: Annotated[str | None, typer.Option(help="Speaker name.")] = None,
    message_id: Annotated[
        str | None, typer.Option("--id", help="Your id for the message (makes retries safe).")
    ] = None,
    timestamp: Annotated[str | None, typer.Option(help="ISO 8601 time with offset, for past messages.")] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Store one message in a user's memory, or in a shared space as the writing --agent.

    Example: memstrata add "I moved to Lisbon in May" --user ana --session s1
    """
    message: dict[str, str] = {"role": role, "content": text}
    if name is not None:
        message["name"] = name
    if message_id is not None:
        message["id"] = message_id
    target = whose(user, space)
    check_before_opening(text=(text, "text"), session=session, agent=agent, message=message, timestamp=timestamp)
    with open_memory(home, run_jobs=False) as memory:
        turns = memory.add(
            [message],
            user_id=target.user,
            space=target.space,
            session_id=session,
            agent_id=agent,
            timestamp=timestamp,
        )
        try:
            # This memory's queued work (the facts, entities and summaries of what was just stored),
            # so the next command finds it done. The message is stored whatever happens here.
            memory.flush(timeout=FLUSH_SECONDS, user_id=target.user, space=target.space)
        except StorageError:
            error_console.print(
                f"note: stored; its background work (facts, summaries) did not finish within {FLUSH_SECONDS:.0f} s"
                " and stays queued for the next command that runs it",
                highlight=False,
                markup=False,
            )
    if as_json:
        print_json(turns)
    else:
        for turn in turns:
            where = f" for {turn.user_id}" if turn.space is None else f" in space {turn.space}"
            writer = f" by {turn.agent_id}" if turn.space is not None and turn.agent_id else ""
            console.print(Text.assemble("stored ", (visible(turn.id), "bold"), visible(where + writer)))


def search(
    query: Annotated[str, typer.Argument(help="What to look for (plain text).")],
    user: UserOption = None,
    space: SpaceOption = None,
    spaces: SpacesOption = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many results.")] = 10,
    session: SessionOption = None,
    agent: AgentOption = None,
    diversity: Annotated[
        float, typer.Option(help="0 ranks by relevance; up to 1 favours results unlike each other (MMR).")
    ] = 0.0,
    tiers: Annotated[
        str,
        typer.Option(
            help="Derived tiers to search too, comma-separated: longterm, scene, midterm, consolidation"
            " (default none: the messages only)."
        ),
    ] = "",
    timezone: Annotated[
        str | None,
        typer.Option(help='IANA time zone dates are read in: "yesterday" in the query, notes on facts.'),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Find the memories most relevant to a query; with --spaces, in shared spaces too, ranked together.

    Example: memstrata search "where does she live?" --user ana --tiers longterm --json
    """
    wanted = tuple(tier.strip() for tier in tiers.split(",") if tier.strip())
    target, shared = whose(user, space), parse_spaces(spaces)
    check_before_opening(
        text=(query, "query"),
        session=session,
        agent=agent,
        timezone=timezone,
        limit=(limit, 1000),
        diversity=diversity,
        tiers=wanted,
    )
    with open_memory(home, run_jobs=False) as memory:
        hits = memory.search(
            query,
            user_id=target.user,
            space=target.space,
            spaces=shared,
            limit=limit,
            session_id=session,
            agent_id=agent,
            diversity=diversity,
            tiers=wanted,
            timezone=timezone,
        )
    if as_json:
        print_json(hits)
        return
    # Hits from a shared space say which, and who wrote them, as a federated context does.
    from_spaces = any(hit.space is not None for hit in hits)
    table = Table("#", "score", "when", "who", "memory", "found by", *(("from",) if from_spaces else ()))
    for rank, hit in enumerate(hits, start=1):
        turn = hit.turn
        when = turn.created_at.strftime("%Y-%m-%d %H:%M") if turn else ""
        who = (turn.name or turn.role.value) if turn else hit.tier
        found_by = ", ".join(f"{name} #{position}" for name, position in hit.ranks.items())
        source = (hit_source(hit),) if from_spaces else ()
        table.add_row(str(rank), f"{hit.score:.4f}", when, shown(who), shown(hit.content), found_by, *source)
    console.print(table if hits else "no memories matched")


def context(
    query: Annotated[str, typer.Argument(help="What the agent is about to answer (plain text).")],
    user: UserOption = None,
    space: SpaceOption = None,
    spaces: SpacesOption = None,
    budget: Annotated[int, typer.Option("--budget", "-b", help="At most this many tokens.")] = 1000,
    session: Annotated[
        str | None, typer.Option("--session", "-s", help="The current session: its recent exchanges come last.")
    ] = None,
    agent: AgentOption = None,
    include_superseded: Annotated[
        bool, typer.Option("--include-superseded", help="Also the facts that newer ones replaced, with their end date.")
    ] = False,
    timezone: Annotated[
        str | None, typer.Option(help="IANA time zone the dates are read in (default: the timezone setting).")
    ] = None,
    verbatim: Annotated[
        bool | None,
        typer.Option(
            "--verbatim/--abridged",
            help="Quote every excerpt whole, or abridge those after the best one when the budget is short"
            " (default: abridge_excerpts).",
            show_default=False,
        ),
    ] = None,
    home: HomeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the block and every item as JSON.")] = False,
) -> None:
    """Print the memory block an agent would put in its prompt for a query: the block on stdout, its size on stderr.

    Example: memstrata context "where does she live?" --user ana --budget 500
    """
    check_budget(budget, "--budget")
    target, shared = whose(user, space), parse_spaces(spaces)
    check_before_opening(text=(query, "query"), session=session, agent=agent, timezone=timezone)
    with open_memory(home, run_jobs=False) as memory:
        # Bad arguments fail before the wait below.
        check_text(query, "query", max_bytes=memory.settings.max_text_bytes)
        try:
            # That memory's queued work only, so what was added last has its facts in the block.
            memory.flush(timeout=FLUSH_SECONDS, user_id=target.user, space=target.space)
        except StorageError as exc:
            raise StorageError(
                f"the queued background work (facts, summaries) did not finish within {FLUSH_SECONDS:.0f} s;"
                " run the command again, or later"
            ) from exc
        built = memory.context(
            query,
            user_id=target.user,
            space=target.space,
            spaces=shared,
            token_budget=budget,
            session_id=session,
            agent_id=agent,
            include_superseded=include_superseded,
            timezone=timezone,
            verbatim=verbatim,
        )
    if as_json:
        print_json({**to_jsonable(built), "turn_ids": list(built.turn_ids)})
        return
    if built.text:
        # Piped, the block goes out as assembled (for a prompt); on a terminal, its control characters are written out.
        typer.echo(visible(built.text) if sys.stdout.isatty() else built.text)
    if not built.items and not built.omitted:
        error_console.print("nothing in memory for this query", highlight=False)
        return
    summary = f"{built.tokens} of {built.token_budget} tokens, {len(built.items)} items"
    summary += f" ({built.omitted} more did not fit)" if built.omitted else ""
    error_console.print(summary, highlight=False)


def history(
    user: UserOption = None,
    space: SpaceOption = None,
    session: SessionOption = None,
    agent: AgentOption = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="How many turns.")] = 50,
    offset: Annotated[int, typer.Option(help="Skip this many turns first.")] = 0,
    newest_first: Annotated[bool, typer.Option("--newest-first", help="Newest turns first.")] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show what was said (in a user's memory or a shared space), in time order.

    Example: memstrata history --user ana --session s1
    """
    target = whose(user, space)
    check_before_opening(session=session, agent=agent, limit=(limit, 10_000), offset=offset)
    with open_memory(home, run_jobs=False) as memory:
        turns = memory.history(
            user_id=target.user,
            space=target.space,
            session_id=session,
            agent_id=agent,
            limit=limit,
            offset=offset,
            newest_first=newest_first,
        )
    if as_json:
        print_json(turns)
    else:
        print_turns(turns)


def forget(
    user: UserOption = None,
    space: SpaceOption = None,
    session: SessionOption = None,
    agent: AgentOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Permanently delete a user's memories (or one session's, or a space's), indexes included.

    Example: memstrata forget --user ana --yes
    """
    target = whose(user, space)
    check_before_opening(session=session, agent=agent)
    # In a space --agent is who deletes (it needs admin), not whose memories go.
    narrowed = f" agent {agent!r}" if agent and target.space is None else ""
    what = str(target) + (f" session {session!r}" if session else "") + narrowed
    if not yes and not typer.confirm(f"Permanently delete every memory of {what}?"):
        raise typer.Exit(1)
    with open_memory(home, run_jobs=False) as memory:
        deletion = memory.forget(user_id=target.user, space=target.space, session_id=session, agent_id=agent)
    if as_json:
        print_json(deletion)
    else:
        console.print(f"deleted {deletion.turns} turns of {what}", highlight=False, markup=False)


def export(
    path: Annotated[Path, typer.Argument(help="JSONL file to write.")],
    user: Annotated[str | None, typer.Option("--user", "-u", help="Only this user (default: everyone).")] = None,
    space: Annotated[str | None, typer.Option("--space", help="Only this shared space (not with --user).")] = None,
    agent: AgentOption = None,
    embeddings: Annotated[bool, typer.Option("--embeddings", help="Include vectors (larger file).")] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write memories to a JSONL file that `memstrata import` reads back losslessly.

    Example: memstrata export backup.jsonl --user ana
    """
    target = whose(user, space, required=False)
    check_before_opening(agent=agent)
    with open_memory(home, run_jobs=False, existing=True) as memory:
        report = memory.export(path, user_id=target.user, space=target.space, agent_id=agent, embeddings=embeddings)
    if as_json:
        print_json(report)
    else:
        exported = f"exported {report.turns} turns ({report.embeddings} vectors) to {report.path}"
        console.print(exported, highlight=False, markup=False)


def import_(
    path: Annotated[Path, typer.Argument(help="JSONL file made by `memstrata export`.")],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Load memories from an export; all of the file or, on any bad line, nothing.

    Example: memstrata import backup.jsonl
    """
    # The whole file is checked before the store is opened: a failed import creates no home and
    # embeds nothing (sizes are checked on import, against the store's max_text_bytes).
    read_export_file(path, max_bytes=sys.maxsize)
    with open_memory(home, run_jobs=False) as memory:
        report = memory.import_(path)
    if as_json:
        print_json(report)
    else:
        console.print(
            f"imported {report.turns} turns ({report.skipped} already present) from {report.path}",
            highlight=False,
            markup=False,
        )


def info(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Show the data directory, storage and its size on disk, embedding model, counts and versions.

    Example: memstrata info --json
    """
    with open_memory(home, run_jobs=False) as memory:
        details = memory.info()
    if as_json:
        print_json(details)
        return
    table = Table("setting", "value", show_header=False)
    for key, value in details.items():
        if isinstance(value, dict):
            for inner, count in value.items():
                table.add_row(f"{key}.{inner}", shown(count))
        else:
            table.add_row(key, shown(value))
    console.print(table)


def reindex(
    fulltext: Annotated[
        bool, typer.Option("--fulltext", help="Also rebuild the full-text indexes (re-deriving cells' search text).")
    ] = False,
    home: HomeOption = None,
) -> None:
    """Rebuild derived indexes from the store: missing vectors of turns and facts, and optionally full-text.

    Example: memstrata reindex --fulltext
    """
    with open_memory(home, run_jobs=False) as memory, Progress(console=console, transient=True) as progress:
        task = progress.add_task("embedding", total=None)
        done = memory.reindex(
            lambda finished, total: progress.update(task, completed=finished, total=total),
            fulltext=fulltext,
            facts=True,
        )
    console.print(
        f"embedded {done} missing vector{'' if done == 1 else 's'} (turns and facts)"
        + (" and rebuilt the full-text indexes" if fulltext else "")
    )


def vacuum(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Rewrite the store so deleted memories leave its files (SQLite VACUUM, PostgreSQL VACUUM FULL).

    Run it after `forget` where erasure must reach the disk's bytes, or to give back the
    space deleted memories took. Other writers wait while it runs.

    Example: memstrata vacuum
    """
    with open_memory(home, run_jobs=False, existing=True) as memory:
        report = memory.vacuum()
    if as_json:
        print_json(report)
        return
    console.print(
        f"rewrote the store: {_megabytes(report.bytes_before)} → {_megabytes(report.bytes_after)}"
        f" in {report.seconds:.1f} s",
        highlight=False,
    )
    if not report.complete:
        error_console.print(
            "another process was reading or writing the store, so the rewritten pages wait in its write-ahead log"
            " (counted in the size after) and the old file keeps its remains until the next full checkpoint"
            " (after later writes, or when the last connection closes); run it again when the store is quiet"
        )


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"
