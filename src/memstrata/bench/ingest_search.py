"""Ingest throughput and search latency at a given size, beside the bare embedder's speed."""

from __future__ import annotations

import itertools
import os
import platform
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from memstrata import Memory, __version__
from memstrata.bench.datasets import find_locomo, load_locomo, synthetic_texts


@dataclass(kw_only=True, frozen=True, slots=True)
class IngestSearchOptions:
    """What to run; ``None`` means the Memory's own setting."""

    turns: int = 2000
    source: str = "locomo"
    data: Path | None = None
    embedder: str | None = None
    threads: int | None = None
    batch: int = 64
    queries: int = 100
    singles: int = 50
    home: Path | None = None
    bare_sample: int = 1000


def machine() -> dict[str, Any]:
    """Where a figure was measured."""
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or "unknown",
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "memstrata": __version__,
    }


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * (len(ordered) - 1))))]


def latency_summary(values: Sequence[float]) -> dict[str, float]:
    """p50 and p95 of some latencies (milliseconds)."""
    return {"p50": statistics.median(values), "p95": percentile(list(values), 0.95)} if values else {}


def timed(action: Callable[[], object]) -> float:
    """How long ``action()`` took, in milliseconds."""
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def _workload(options: IngestSearchOptions) -> tuple[list[str], list[str]]:
    if options.source == "synthetic":
        texts = list(synthetic_texts(options.turns))
        queries = [
            f"what did {t.split()[0].lower()} {t.split()[1]} {' '.join(t.split()[2:4])}"
            for t in texts[:: max(1, len(texts) // options.queries)]
        ]
        return texts, queries[: options.queries]
    if options.source != "locomo":
        raise ValueError("source must be 'locomo' or 'synthetic'")
    turns, questions = load_locomo(find_locomo(options.data))
    texts = [turn.text for turn in itertools.islice(itertools.cycle(turns), options.turns)]
    return texts, [question.question for question in questions[: options.queries]]


def run_ingest_search(options: IngestSearchOptions, console: Console | None = None) -> dict[str, Any]:
    """Run the benchmark and return its results as a JSON-ready dict."""
    console = console or Console(stderr=True)
    texts, queries = _workload(options)
    overrides: dict[str, Any] = {}
    if options.embedder:
        overrides["embedder"] = options.embedder
    if options.threads:
        overrides["embedding_threads"] = options.threads
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-") as scratch:
        home = options.home or Path(scratch)
        with Memory(home, **overrides) as memory:
            return _measure(memory, texts, queries, options, console)


def _measure(
    memory: Memory, texts: list[str], queries: list[str], options: IngestSearchOptions, console: Console
) -> dict[str, Any]:
    embedder = memory.embedder
    sample = texts[: options.bare_sample]
    started = time.perf_counter()
    for start in range(0, len(sample), options.batch):
        embedder.embed_documents(sample[start : start + options.batch])
    bare_rate = len(sample) / (time.perf_counter() - started)

    user = "bench-user"
    base = datetime(2024, 1, 1, tzinfo=UTC)
    started = time.perf_counter()
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("ingesting", total=len(texts))
        for start in range(0, len(texts), options.batch):
            chunk = texts[start : start + options.batch]
            memory.add(
                [{"role": "user" if i % 2 == 0 else "assistant", "content": text} for i, text in enumerate(chunk)],
                user_id=user,
                session_id=f"session-{start // 500}",
                timestamp=base + timedelta(minutes=start),
            )
            progress.update(task, advance=len(chunk))
    ingest_seconds = time.perf_counter() - started
    ingest_rate = len(texts) / ingest_seconds

    exchange = [
        {"role": "user", "content": "I adopted a grey cat named Biscuit from the shelter yesterday."},
        {"role": "assistant", "content": "Congratulations on adopting Biscuit! Grey cats are lovely."},
    ]
    add_ms = [timed(lambda: memory.add(exchange, user_id=user, session_id="single")) for _ in range(options.singles)]
    embed_pair_ms = [
        timed(lambda: embedder.embed_documents([m["content"] for m in exchange])) for _ in range(options.singles)
    ]

    memory.search(queries[0], user_id=user)  # loads this user's vectors once, as any first search would
    search_ms = [timed(partial(memory.search, query, user_id=user, limit=10)) for query in queries]
    query_embed_ms = [timed(partial(embedder.embed_query, query)) for query in queries]

    summary = {
        "turns": len(texts),
        "bare_embedder_texts_per_s": bare_rate,
        "ingest_texts_per_s": ingest_rate,
        "ingest_vs_bare": ingest_rate / bare_rate,
        "add_exchange_p50_ms": statistics.median(add_ms),
        "embed_exchange_p50_ms": statistics.median(embed_pair_ms),
        "add_overhead_p50_ms": statistics.median(add_ms) - statistics.median(embed_pair_ms),
        "search_p50_ms": statistics.median(search_ms),
        "search_p95_ms": percentile(search_ms, 0.95),
        "query_embed_p50_ms": statistics.median(query_embed_ms),
        "search_overhead_p50_ms": statistics.median(search_ms) - statistics.median(query_embed_ms),
        "search_overhead_p95_ms": percentile(search_ms, 0.95) - percentile(query_embed_ms, 0.95),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    return {
        "benchmark": "ingest-search",
        "measured_at": datetime.now(UTC).isoformat(),
        "machine": machine(),
        "embedder": embedder.model_id,
        "settings": {
            "embedding_threads": memory.settings.embedding_threads,
            "batch": options.batch,
            "source": options.source,
            "bare_sample": len(texts[: options.bare_sample]),
            "queries": len(queries),
            "singles": options.singles,
        },
        "summary": summary,
        "ingest_seconds": ingest_seconds,
        "add_ms": add_ms,
        "search_ms": search_ms,
    }
