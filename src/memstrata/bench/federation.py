"""Multi-agent memory at volume: federated search latency, a randomized permission check, concurrent writers."""

from __future__ import annotations

import itertools
import multiprocessing
import random
import resource
import statistics
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from memstrata import Memory
from memstrata.bench.datasets import find_locomo, load_locomo, synthetic_texts
from memstrata.bench.ingest_search import machine, percentile, timed
from memstrata.errors import AccessDenied
from memstrata.models import Access


@dataclass(kw_only=True, frozen=True, slots=True)
class FederationOptions:
    """The layout and the work; ``None`` means the Memory's own setting."""

    agents: int = 10
    spaces: int = 20
    memories: int = 50_000
    users: int = 10
    #: The share of the memories held by spaces (the rest by users).
    space_share: float = 0.2
    #: Spaces ranked with the user's memory in each federated search.
    federated: int = 5
    queries: int = 100
    reads: int = 10_000
    writers: int = 4
    writes: int = 200
    batch: int = 500
    embedder: str | None = "hash"
    #: ``synthetic`` sentences, or ``locomo``'s turns cycled (a real vocabulary).
    source: str = "synthetic"
    data: Path | None = None
    storage_url: str | None = None
    home: Path | None = None
    seed: int = 7


def run_federation(options: FederationOptions, console: Console | None = None) -> dict[str, Any]:
    """Run the benchmark and return its results as a JSON-ready dict."""
    console = console or Console(stderr=True)
    overrides: dict[str, Any] = {"background": False}
    if options.embedder:
        overrides["embedder"] = options.embedder
    if options.storage_url:
        overrides["storage_url"] = options.storage_url
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-") as scratch:
        home = options.home or Path(scratch)
        with Memory(home, **overrides) as memory:
            rng = random.Random(options.seed)
            layout = _fill(memory, options, rng, console)
            latency = _latency(memory, options, layout, rng)
            leaks = _permission_check(memory, options, layout, rng, console)
            store = memory.settings.storage_url or str(home)
        writers = _concurrent_writers(home, overrides, options)
    return {
        "benchmark": "federation",
        "measured_at": datetime.now(UTC).isoformat(),
        "machine": machine(),
        "embedder": layout["embedder"],
        "store": "postgresql" if store.startswith("postgres") else "sqlite",
        "settings": {
            key: getattr(options, key)
            for key in (
                "agents",
                "spaces",
                "memories",
                "users",
                "space_share",
                "federated",
                "queries",
                "reads",
                "source",
            )
        },
        "summary": {
            **latency["summary"],
            **leaks,
            **writers,
            "ingest_seconds": layout["ingest_seconds"],
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        },
        "search_ms": latency["raw"],
    }


def _fill(memory: Memory, options: FederationOptions, rng: random.Random, console: Console) -> dict[str, Any]:
    """Users' and spaces' memories, and each agent's grants (read on at least ``federated`` spaces)."""
    agents = [f"agent-{i}" for i in range(options.agents)]
    spaces = [f"space-{i}" for i in range(options.spaces)]
    users = [f"user-{i}" for i in range(options.users)]
    in_spaces = round(options.memories * options.space_share)
    texts = _texts(options)
    owners: list[tuple[str | None, str | None]] = [(None, name) for name in spaces]
    shares = _split(in_spaces, len(spaces)) + _split(options.memories - in_spaces, len(users))
    owners += [(user, None) for user in users]
    for name in spaces:
        memory.create_space(name)
    grants: dict[str, dict[str, Access]] = {agent: {} for agent in agents}
    for agent in agents:
        for name in rng.sample(spaces, min(len(spaces), options.federated + 1)):
            access = rng.choice(list(Access))
            memory.grant(name, agent, access)
            grants[agent][name] = access
    started = time.perf_counter()
    turn_ids: dict[str, list[str]] = {name: [] for name in spaces}
    position = 0
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("ingesting", total=options.memories)
        for (user, space), count in zip(owners, shares, strict=True):
            for start in range(0, count, options.batch):
                chunk = texts[position : position + min(options.batch, count - start)]
                position += len(chunk)
                writer = rng.choice(agents)
                messages = [{"role": "user", "content": text} for text in chunk]
                stored = memory.add(messages, user_id=user, space=space, agent_id=writer if user else None)
                if space is not None:
                    turn_ids[space].extend(turn.id for turn in stored[:50])
                progress.update(task, advance=len(chunk))
    return {
        "agents": agents,
        "spaces": spaces,
        "users": users,
        "grants": grants,
        "turn_ids": turn_ids,
        "texts": texts,
        "ingest_seconds": time.perf_counter() - started,
        "embedder": memory.embedder.model_id,
    }


def _texts(options: FederationOptions) -> list[str]:
    if options.source == "synthetic":
        return list(synthetic_texts(options.memories, seed=options.seed))
    turns, _ = load_locomo(find_locomo(options.data))
    return [turn.text for turn in itertools.islice(itertools.cycle(turns), options.memories)]


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if index < total % parts else 0) for index in range(parts)]


def _latency(memory: Memory, options: FederationOptions, layout: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """A user's search alone, and with ``federated`` spaces, on the same queries; p50/p95 beyond the query embedding."""
    texts: list[str] = layout["texts"]
    queries = [" ".join(text.split()[:6]) for text in rng.sample(texts, options.queries)]
    users: list[str] = layout["users"]
    spaces: list[str] = layout["spaces"]
    plans = [(rng.choice(users), rng.sample(spaces, options.federated)) for _ in queries]
    for user, chosen in plans:  # every memory's vectors loaded once, as any first search would
        memory.search(queries[0], user_id=user, spaces=chosen)
    alone: list[float] = []
    together: list[float] = []
    for query, (user, chosen) in zip(queries, plans, strict=True):  # interleaved: both see the same machine
        alone.append(timed(partial(memory.search, query, user_id=user)))
        together.append(timed(partial(memory.search, query, user_id=user, spaces=chosen)))
    embed = [timed(partial(memory.embedder.embed_query, q)) for q in queries]
    embed_p50, embed_p95 = statistics.median(embed), percentile(embed, 0.95)
    alone_p50 = statistics.median(alone) - embed_p50
    together_p50 = statistics.median(together) - embed_p50
    return {
        "summary": {
            "query_embed_p50_ms": embed_p50,
            "user_alone_overhead_p50_ms": alone_p50,
            "user_alone_overhead_p95_ms": percentile(alone, 0.95) - embed_p95,
            "federated_overhead_p50_ms": together_p50,
            "federated_overhead_p95_ms": percentile(together, 0.95) - embed_p95,
            "federated_vs_alone_p50": together_p50 / alone_p50 if alone_p50 > 0 else float("nan"),
        },
        "raw": {"alone": alone, "federated": together, "query_embed": embed},
    }


def _permission_check(
    memory: Memory, options: FederationOptions, layout: dict[str, Any], rng: random.Random, console: Console
) -> dict[str, Any]:
    """Random reads by random agents: each is denied exactly when it should be, and returns only what it may."""
    agents: list[str] = layout["agents"]
    spaces: list[str] = layout["spaces"]
    users: list[str] = layout["users"]
    grants: dict[str, dict[str, Access]] = layout["grants"]
    turn_ids: dict[str, list[str]] = layout["turn_ids"]
    leaks = wrong = denied = 0
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("permission check", total=options.reads)
        for _ in range(options.reads):
            agent = rng.choice(agents)
            readable = set(grants[agent])
            kind = rng.choice(("federated", "all", "search", "history", "get", "cells"))
            asked = rng.sample(spaces, rng.randint(1, 3)) if kind == "federated" else [rng.choice(spaces)]
            allowed = kind == "all" or set(asked) <= readable
            try:
                seen = _read(
                    memory, kind=kind, agent=agent, asked=asked, user=rng.choice(users), turn_ids=turn_ids, rng=rng
                )
            except AccessDenied:
                denied += 1
                wrong += allowed
            else:
                wrong += not allowed
                leaks += len(seen - readable)
            progress.update(task, advance=1)
    return {"reads": options.reads, "denied": denied, "leaks": leaks, "wrong_decisions": wrong}


def _read(
    memory: Memory,
    *,
    kind: str,
    agent: str,
    asked: list[str],
    user: str,
    turn_ids: dict[str, list[str]],
    rng: random.Random,
) -> set[str]:
    """One read; the spaces what it returned came from."""
    query = "what did they say about the plan"
    if kind in ("federated", "all"):
        chosen: list[str] | str = "all" if kind == "all" else asked
        hits = memory.search(query, user_id=user, agent_id=agent, spaces=chosen, limit=5, mode="fulltext")
        return {hit.space for hit in hits if hit.space is not None}
    (space,) = asked
    if kind == "search":
        return {hit.space or "" for hit in memory.search(query, space=space, agent_id=agent, limit=5, mode="fulltext")}
    if kind == "history":
        return {turn.space or "" for turn in memory.history(space=space, agent_id=agent, limit=5)}
    if kind == "get":
        return {memory.get(rng.choice(turn_ids[space]), space=space, agent_id=agent).space or ""}
    memory.cells(space=space, agent_id=agent, limit=5)
    return {space}


def _concurrent_writers(home: Path, overrides: dict[str, Any], options: FederationOptions) -> dict[str, Any]:
    """``writers`` processes add to one space at once, each as its own agent; what the space holds afterwards."""
    settings = {**overrides, "background": False}
    with Memory(home, **settings) as memory:
        memory.create_space("shared-writes")
    context = multiprocessing.get_context("spawn")
    started = time.perf_counter()
    with context.Pool(options.writers) as pool:
        pool.starmap(_write, [(str(home), settings, f"writer-{i}", options.writes) for i in range(options.writers)])
    seconds = time.perf_counter() - started
    with Memory(home, **settings) as memory:
        turns = memory.history(space="shared-writes", limit=10_000)
    expected = options.writers * options.writes
    by_writer = {f"writer-{i}": 0 for i in range(options.writers)}
    for turn in turns:
        by_writer[turn.agent_id or ""] = by_writer.get(turn.agent_id or "", 0) + 1
    return {
        "concurrent_writes": expected,
        "concurrent_stored": len(turns),
        "concurrent_lost": expected - len({turn.content for turn in turns}),
        "concurrent_writes_per_s": expected / seconds,
        "concurrent_writers_complete": all(count == options.writes for count in by_writer.values()),
    }


def _write(home: str, settings: dict[str, Any], agent: str, count: int) -> None:
    with Memory(home, **settings) as memory:
        memory.grant("shared-writes", agent, "write")
        for index in range(count):
            memory.add(f"{agent} wrote note {index}", space="shared-writes", agent_id=agent)
