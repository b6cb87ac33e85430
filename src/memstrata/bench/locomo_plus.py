"""LoCoMo-Plus implicit recall, run through the public Memory API only.

Each trigger is asked through ``Memory.search`` and ``Memory.context``, beside plain BM25,
plain dense and their fusion; even items tune, odd ones are held out.
See docs/benchmarks.md#implicit-recall-locomo-plus.
"""

from __future__ import annotations

import resource
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from memstrata import Memory
from memstrata.bench.baselines import PlainBM25, PlainDense
from memstrata.bench.datasets import find_locomo, load_locomo
from memstrata.bench.ingest_search import latency_summary, machine
from memstrata.bench.locomo_plus_data import Placement, load_locomo_plus, load_speakers, parse_time_gap, place
from memstrata.bench.metrics import hit_at, recall_at
from memstrata.bench.replay import ingest_dialogue, replay_memory, time_embedder, turn_id
from memstrata.errors import InvalidInput

BUDGETS = (500, 1000, 2000)
CUTOFF = 10  # hit, recall and MRR all look at the first ten ranks
SYSTEMS = ("memstrata", "bm25", "dense", "bm25+dense")
RRF_K = 60
# How deep each baseline ranks before fusion, and how deep a cue is looked for to say where it ranked.
DEPTH = 100
SPLITS = {"all": None, "tuning": 0, "held out": 1}  # by item index: even = tuning, odd = held out


@dataclass(kw_only=True, frozen=True, slots=True)
class LocomoPlusOptions:
    """What to run; ``None`` means the Memory's own setting (or, for ``locomo``, the shared file)."""

    data: Path
    locomo: Path | None = None
    embedder: str | None = None
    threads: int | None = None
    home: Path | None = None
    limit: int | None = None
    budgets: tuple[int, ...] = BUDGETS


def reciprocal_rank(ranked: Sequence[str], relevant: Sequence[str], k: int = CUTOFF) -> float:
    """1 / the rank of the first relevant id within the first ``k``; 0.0 if none is there."""
    wanted = set(relevant)
    return next((1.0 / rank for rank, item in enumerate(ranked[:k], start=1) if item in wanted), 0.0)


def first_rank(ranked: Sequence[str], relevant: Sequence[str]) -> int | None:
    """The 1-based rank of the first relevant id, or None."""
    wanted = set(relevant)
    return next((rank for rank, item in enumerate(ranked, start=1) if item in wanted), None)


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[str]:
    """Reciprocal rank fusion: each id scores the sum of 1 / (k + rank) over the rankings, best first."""
    scores: dict[str, float] = defaultdict(float)
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] += 1.0 / (k + rank)
    return sorted(scores, key=lambda item: -scores[item])  # stable: ties keep first-seen order


def run_locomo_plus(
    options: LocomoPlusOptions, console: Console | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Stitch the cues into LoCoMo, ingest, ask every trigger, score the ranks and contexts.

    Returns the report and one record per item (its cue, trigger and each system's ranking).
    """
    console = console or Console(stderr=True)
    if options.limit is not None and options.limit < 1:
        raise InvalidInput(f"limit must be at least 1, not {options.limit}")
    items = load_locomo_plus(options.data)
    locomo_path = find_locomo(options.locomo)
    turns, _ = load_locomo(locomo_path)
    placements = place(items, turns, load_speakers(locomo_path))
    cues = [turn for placement in placements for turn in placement.cue_turns]
    order = {conversation: number for number, conversation in enumerate(dict.fromkeys(t.conversation for t in turns))}
    # Stored in time order per conversation, each cue session where its date puts it.
    stored = sorted([*turns, *cues], key=lambda turn: (order[turn.conversation], turn.timestamp))
    with replay_memory(
        options.home, "memstrata-locomo-plus-", embedder=options.embedder, threads=options.threads
    ) as memory:
        bm25 = PlainBM25()
        bm25.add([(turn_id(t), t.conversation, t.speaker, t.text) for t in stored])
        dense = PlainDense(memory.embedder)
        embed_seconds = time_embedder(memory, stored, dense)
        ingest_seconds = ingest_dialogue(memory, stored, console)
        asked = placements[: options.limit] if options.limit else placements
        records = _ask(memory, asked, options.budgets, bm25=bm25, dense=dense, console=console)
        report = _report(
            memory,
            records,
            turn_count=len(turns),
            cue_count=len(cues),
            ingest_seconds=ingest_seconds,
            embed_seconds=embed_seconds,
        )
        return report, records


def _ask(
    memory: Memory,
    placements: list[Placement],
    budgets: tuple[int, ...],
    *,
    bm25: PlainBM25,
    dense: PlainDense,
    console: Console,
) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("asking the triggers", total=len(placements))
        for placement in placements:
            records.append(_ask_one(memory, placement, budgets, bm25, dense))
            progress.update(task, advance=1)
    return records


def _turn_ranking(memory: Memory, query: str, user_id: str, limit: int) -> list[str]:
    """Turn ids best first; a derived hit (cell, summary) stands for its turns at its own rank."""
    hits = memory.search(query, user_id=user_id, limit=limit)
    return list(dict.fromkeys(turn for hit in hits for turn in hit.source_turn_ids))[:limit]


def _ask_one(
    memory: Memory, placement: Placement, budgets: tuple[int, ...], bm25: PlainBM25, dense: PlainDense
) -> dict[str, Any]:
    item, conversation, evidence = placement.item, placement.conversation, placement.evidence
    query = item.trigger
    record: dict[str, Any] = {
        "index": item.index,
        "half": "tuning" if item.index % 2 == 0 else "held out",
        "relation": item.relation,
        "conversation": conversation,
        "time_gap": item.time_gap,
        "gap_days": parse_time_gap(item.time_gap),
        "cue_time": placement.cue_time.isoformat(),
        "query_time": placement.query_time.isoformat(),
        "speaker": placement.speaker,
        "trigger": query,
        "cue": [f"{turn.speaker}: {turn.text}" for turn in placement.cue_turns],
        "evidence": evidence,
    }
    started = time.perf_counter()
    ranked = _turn_ranking(memory, query, conversation, CUTOFF)
    elapsed = (time.perf_counter() - started) * 1000
    # Diagnostic only (untimed, unscored): where a search for 100 puts the cue. It fuses deeper
    # candidate lists than a search for 10, so its first ten can differ from ``ranked``.
    record["memstrata"] = {
        "ranked": ranked,
        "ms": elapsed,
        "cue_rank_in_100": first_rank(_turn_ranking(memory, query, conversation, DEPTH), evidence),
    }
    deep = {"bm25": bm25.search(query, conversation, DEPTH), "dense": dense.search(query, conversation, DEPTH)}
    deep["bm25+dense"] = rrf([deep["bm25"], deep["dense"]])
    for name, ranking in deep.items():
        record[name] = {"ranked": ranking[:CUTOFF], "cue_rank_in_100": first_rank(ranking[:DEPTH], evidence)}
    record["context"] = {}
    for budget in budgets:
        started = time.perf_counter()
        context = memory.context(query, user_id=conversation, token_budget=budget)
        elapsed = (time.perf_counter() - started) * 1000
        record["context"][str(budget)] = {
            "ms": elapsed,
            "tokens": context.tokens,
            "items": len(context.items),
            "cue_in_context": any(entry.id in evidence for entry in context.items),
        }
    return record


def _scores(records: Sequence[dict[str, Any]], system: str) -> dict[str, float]:
    return {
        "items": float(len(records)),
        "hit@10": statistics.fmean(hit_at(r[system]["ranked"], r["evidence"], CUTOFF) for r in records),
        "recall@10": statistics.fmean(recall_at(r[system]["ranked"], r["evidence"], CUTOFF) for r in records),
        "mrr@10": statistics.fmean(reciprocal_rank(r[system]["ranked"], r["evidence"]) for r in records),
    }


def _context_scores(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    budgets = sorted({budget for r in records for budget in r["context"]}, key=int)
    return {
        budget: {
            "cue_in_context": statistics.fmean(float(r["context"][budget]["cue_in_context"]) for r in records),
            "tokens_mean": statistics.fmean(r["context"][budget]["tokens"] for r in records),
        }
        for budget in budgets
    }


def _group(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "items": len(records),
        "retrieval": {system: _scores(records, system) for system in SYSTEMS},
        "context": _context_scores(records),
    }


def _report(
    memory: Memory,
    records: list[dict[str, Any]],
    *,
    turn_count: int,
    cue_count: int,
    ingest_seconds: float,
    embed_seconds: float,
) -> dict[str, Any]:
    splits = {
        name: [r for r in records if remainder is None or r["index"] % 2 == remainder]
        for name, remainder in SPLITS.items()
    }
    relations = sorted({r["relation"] for r in records})
    latencies = {"search": [r["memstrata"]["ms"] for r in records]}
    for budget in sorted({budget for r in records for budget in r["context"]}, key=int):
        latencies[f"context@{budget}"] = [r["context"][budget]["ms"] for r in records]
    return {
        "benchmark": "locomo-plus",
        "measured_at": datetime.now(UTC).isoformat(),
        "machine": machine(),
        "embedder": memory.embedder.model_id,
        "settings": memory.settings.model_dump(mode="json", exclude={"home", "storage_url"}),
        "protocol": {
            "cutoff": CUTOFF,
            "mrr": f"reciprocal rank of the first cue turn within the top {CUTOFF}, else 0",
            "rrf_k": RRF_K,
            "fusion_depth": DEPTH,
            "halves": "tuning = even item index, held out = odd item index",
            "time_gap": "week 7 days, month 30, year 365; 'several'/'a few' = 3, 'a couple of' = 2",
        },
        "items": len(records),
        "locomo_turns": turn_count,
        "cue_turns": cue_count,
        "ingest_seconds": ingest_seconds,
        "embedder_only_seconds": embed_seconds,
        "latency_ms": {name: latency_summary(values) for name, values in latencies.items() if values},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "splits": {name: _group(subset) for name, subset in splits.items() if subset},
        "relations": {relation: _group([r for r in records if r["relation"] == relation]) for relation in relations},
    }
