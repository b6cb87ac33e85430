"""The LoCoMo retrieval benchmark, run through the public Memory API only."""

from __future__ import annotations

import random
import resource
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.progress import Progress

from memstrata import Memory
from memstrata.bench.baselines import PlainBM25, PlainDense
from memstrata.bench.context_metrics import (
    answer_in_context,
    answer_string_in_context,
    context_relevance,
    evidence_first,
    evidence_in_context,
    random_context,
)
from memstrata.bench.datasets import DialogTurn
from memstrata.bench.ingest_search import latency_summary, machine
from memstrata.bench.metrics import hit_at, ndcg_at, recall_at
from memstrata.bench.replay import (
    CATEGORIES,
    TUNING_CONVERSATIONS,
    ReplayOptions,
    ingest_dialogue,
    load_dialogue,
    question_records,
    replay_memory,
    time_embedder,
    turn_id,
)
from memstrata.extraction.time_expressions import annotate
from memstrata.retrieval.assembly import one_line

MODES = ("hybrid", "fulltext", "vector")
# Plain retrieval without memstrata's neighbours, blending, fusion or rerank (bench/baselines.py).
BASELINES = ("bm25_baseline", "dense_baseline")
CUTOFFS = (5, 10, 20)
BUDGETS = (500, 1000, 2000)
CRS_BUDGET = 1000
# CRS embeds two long texts per question; every fifth question keeps the run short.
CRS_EVERY = 5


@dataclass(kw_only=True, frozen=True, slots=True)
class LocomoOptions(ReplayOptions):
    """What to run; ``None`` means the Memory's own setting."""

    embedder_baseline: bool = True
    tiers: tuple[str, ...] = ()
    budgets: tuple[int, ...] = BUDGETS
    crs_every: int = CRS_EVERY


def run_locomo(options: LocomoOptions, console: Console | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Ingest the chosen conversations, ask their questions in every mode, score the ranks.

    Returns the report and one record per question (its evidence and each mode's ranking).
    """
    console = console or Console(stderr=True)
    dialogue = load_dialogue(options.data, options.conversations, options.limit)
    turns = dialogue.turns
    with replay_memory(options.home, "memstrata-locomo-", embedder=options.embedder, threads=options.threads) as memory:
        bm25 = PlainBM25()
        bm25.add([(turn_id(t), t.conversation, t.speaker, t.text) for t in turns])
        dense = PlainDense(memory.embedder) if options.embedder_baseline else None
        embed_seconds = time_embedder(memory, turns, dense) if dense is not None else None
        ingest_seconds = ingest_dialogue(memory, turns, console)
        records = _ask(
            memory,
            question_records(dialogue, options.limit),
            turns,
            options=options,
            console=console,
            baselines={"bm25_baseline": bm25, "dense_baseline": dense},
        )
        report = _report(
            memory,
            options.tiers,
            records,
            turn_count=len(turns),
            ingest_seconds=ingest_seconds,
            embed_seconds=embed_seconds,
            conversations=[dialogue.number_of[c] for c in dialogue.chosen],
        )
        report["consolidation"] = _consolidation_scores(memory, dialogue.chosen)
        return report, records


def _ask(
    memory: Memory,
    questions: list[dict[str, Any]],
    turns: list[DialogTurn],
    *,
    options: LocomoOptions,
    console: Console,
    baselines: dict[str, PlainBM25 | PlainDense | None],
) -> list[dict[str, Any]]:
    text_of = {turn_id(turn): one_line(turn.text) for turn in turns}  # as the block shows it: on one line
    texts_by_conversation: dict[str, list[str]] = defaultdict(list)
    dated: dict[str, list[str]] = defaultdict(list)
    dated_line: dict[str, str] = {}
    excerpt_line: dict[str, str] = {}
    for turn in turns:
        texts_by_conversation[turn.conversation].append(f"{turn.speaker}: {turn.text}")
        # Rendered as context() renders excerpts: date line, speaker, relative dates resolved.
        excerpt_line[turn_id(turn)] = one_line(f"{turn.speaker}: {annotate(turn.text, turn.timestamp)}")
        dated_line[turn_id(turn)] = f"[{turn.timestamp.day} {turn.timestamp:%B %Y}] {excerpt_line[turn_id(turn)]}"
        dated[turn.conversation].append(dated_line[turn_id(turn)])
    sessions_in: dict[str, int] = defaultdict(int)
    for turn in turns:
        sessions_in[turn.conversation] = max(sessions_in[turn.conversation], _session_number(turn.dia_id))
    # The ceiling for answer-in-context: is the answer in the whole conversation at all?
    whole = {conversation: "\n".join(lines) for conversation, lines in dated.items()}
    rng = random.Random(20240501)
    records: list[dict[str, Any]] = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("asking", total=len(questions))
        for number, question in enumerate(questions):
            conversation, query = question["conversation"], question["question"]
            answer, evidence = question["answer"], question["evidence"]
            record: dict[str, Any] = {
                **question,
                "answer_in_conversation": answer_in_context(answer, whole[conversation]),
                # The same ceiling for the strict test (the whole normalised answer string).
                "answer_string_in_conversation": answer_string_in_context(answer, whole[conversation]),
                # A perfect retriever's context: the gold evidence turns alone, dated.
                "answer_in_evidence": answer_in_context(answer, "\n".join(dated_line[e] for e in evidence)),
                # How old the evidence is: 1 = the first (oldest) session, 0 = the latest one.
                "evidence_age": 1.0
                - statistics.fmean(_session_number(e.split(":", 1)[1]) - 1 for e in evidence)
                / max(1, sessions_in[conversation] - 1),
            }
            for mode in MODES:
                started = time.perf_counter()
                hits = memory.search(query, user_id=conversation, limit=max(CUTOFFS), mode=mode, tiers=options.tiers)
                elapsed = (time.perf_counter() - started) * 1000
                # A derived hit (cell, summary) stands for the turns it links to, at its own rank.
                ranked = list(dict.fromkeys(turn_id for hit in hits for turn_id in hit.source_turn_ids))
                ranked = ranked[: max(CUTOFFS)]
                record[mode] = {"ranked": ranked, "ms": elapsed}
            for name, plain in baselines.items():
                if plain is not None:
                    started = time.perf_counter()
                    ranked = plain.search(query, conversation, max(CUTOFFS))
                    record[name] = {"ranked": ranked, "ms": (time.perf_counter() - started) * 1000}
            record["context"] = {}
            for budget in options.budgets:
                started = time.perf_counter()
                context = memory.context(query, user_id=conversation, token_budget=budget)
                elapsed = (time.perf_counter() - started) * 1000
                # The evidence turns as this block shows them: quoted whole, or abridged.
                shown = [one_line(i.text) for i in context.items if i.kind == "episode" and i.id in evidence]
                entry: dict[str, Any] = {
                    "ms": elapsed,
                    "tokens": context.tokens,
                    "evidence_in_context": evidence_in_context([text_of[e] for e in evidence], context.text),
                    "evidence_shown": len({item.id for item in context.items if item.id in evidence}) / len(evidence),
                    "answer_in_context": answer_in_context(answer, context.text),
                    "answer_string_in_context": answer_string_in_context(answer, context.text),
                    # A perfect ranking's block: the same block with the gold evidence moved to its front.
                    "answer_with_evidence_first": answer_in_context(
                        answer,
                        evidence_first(
                            [dated_line[e] for e in evidence],
                            [*(excerpt_line[e] for e in evidence), *shown],
                            context.text,
                            budget,
                        ),
                    ),
                    "items": len(context.items),
                }
                if budget == CRS_BUDGET and options.crs_every and number % options.crs_every == 0:
                    baseline = random_context(texts_by_conversation[conversation], context.tokens, rng)
                    entry["crs"] = context_relevance(memory.embedder, query, context.text, baseline)
                record["context"][str(budget)] = entry
            records.append(record)
            progress.update(task, advance=1)
    return records


def _session_number(dia_id: str) -> int:
    """'D3:14' → 3."""
    return int(dia_id.split(":", 1)[0].lstrip("D") or 0)


def _by_age(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Hybrid recall@10 by how old the evidence is: time must never hide old memories."""
    buckets = {"oldest third": (2 / 3, 1.01), "middle third": (1 / 3, 2 / 3), "newest third": (-0.01, 1 / 3)}
    result: dict[str, dict[str, float]] = {}
    for name, (low, high) in buckets.items():
        subset = [r for r in records if low < r["evidence_age"] <= high]
        if subset:
            result[name] = {
                "questions": float(len(subset)),
                **{
                    f"{mode} recall@10": statistics.fmean(
                        recall_at(r[mode]["ranked"], r["evidence"], 10) for r in subset
                    )
                    for mode in _modes(records)
                },
            }
    return result


def _modes(records: Sequence[dict[str, Any]]) -> list[str]:
    """memstrata's modes, then the baselines this run computed."""
    return [mode for mode in (*MODES, *BASELINES) if records and mode in records[0]]


def _consolidation_scores(memory: Memory, conversations: Sequence[str]) -> dict[str, Any]:
    """TES of every consolidation the ingest triggered (the mission's token-efficiency metric)."""
    made = [item for c in conversations for item in memory.consolidations(user_id=c, limit=100_000)]
    if not made:
        return {"count": 0}
    return {
        "count": len(made),
        "turns_covered": sum(len(item.source_turn_ids) for item in made),
        "tes_mean": statistics.fmean(item.tes for item in made),
        "compression_ratio_mean": statistics.fmean(item.compression_ratio for item in made),
        "entity_preservation_mean": statistics.fmean(item.entity_preservation for item in made),
        "per_consolidation": [
            {
                "id": item.id,
                "turns": len(item.source_turn_ids),
                "tes": item.tes,
                "compression_ratio": item.compression_ratio,
                "entity_preservation": item.entity_preservation,
            }
            for item in made
        ],
    }


def _scores(records: Sequence[dict[str, Any]], mode: str) -> dict[str, float]:
    if not records:
        return {}
    result: dict[str, float] = {"questions": float(len(records))}
    for k in CUTOFFS:
        result[f"recall@{k}"] = statistics.fmean(recall_at(r[mode]["ranked"], r["evidence"], k) for r in records)
    result["hit@10"] = statistics.fmean(hit_at(r[mode]["ranked"], r["evidence"], 10) for r in records)
    result["ndcg@10"] = statistics.fmean(ndcg_at(r[mode]["ranked"], r["evidence"], 10) for r in records)
    return result


def _report(
    memory: Memory,
    tiers: tuple[str, ...],
    records: list[dict[str, Any]],
    *,
    turn_count: int,
    ingest_seconds: float,
    embed_seconds: float | None,
    conversations: list[int],
) -> dict[str, Any]:
    splits = {
        "all": records,
        "conversations 1-5": [r for r in records if r["conversation_number"] <= TUNING_CONVERSATIONS],
        "conversations 6-10": [r for r in records if r["conversation_number"] > TUNING_CONVERSATIONS],
    }
    retrieval: dict[str, Any] = {}
    for split, subset in splits.items():
        if not subset:
            continue
        retrieval[split] = {
            mode: {
                "overall": _scores(subset, mode),
                **{
                    f"category {c} ({name})": _scores([r for r in subset if r["category"] == c], mode)
                    for c, name in CATEGORIES.items()
                    if any(r["category"] == c for r in subset)
                },
            }
            for mode in _modes(subset)
        }
    latencies = {mode: [r[mode]["ms"] for r in records] for mode in _modes(records)}
    for budget in {budget for r in records for budget in r.get("context", {})}:
        latencies[f"context@{budget}"] = [r["context"][budget]["ms"] for r in records]
    context = {split: _context_scores(subset) for split, subset in splits.items() if subset}
    return {
        "benchmark": "locomo-retrieval",
        "measured_at": datetime.now(UTC).isoformat(),
        "machine": machine(),
        "embedder": memory.embedder.model_id,
        "settings": memory.settings.model_dump(mode="json", exclude={"home", "storage_url"}),
        "search_tiers": list(tiers),
        "conversations": conversations,
        "turns": turn_count,
        "questions": len(records),
        "ingest_seconds": ingest_seconds,
        "embedder_only_seconds": embed_seconds,
        "ingest_vs_embedder": ingest_seconds / embed_seconds if embed_seconds else None,
        "latency_ms": {mode: latency_summary(values) for mode, values in latencies.items() if values},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "retrieval": retrieval,
        "retrieval_by_evidence_age": _by_age(records),
        "context": context,
    }


def _context_scores(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per budget: evidence and answers in the context, tokens used, CRS; overall and per category."""
    budgets = sorted({budget for r in records for budget in r.get("context", {})}, key=int)
    result: dict[str, Any] = {}
    for budget in budgets:
        groups = {"overall": list(records)} | {
            f"category {c} ({name})": [r for r in records if r["category"] == c] for c, name in CATEGORIES.items()
        }
        result[budget] = {}
        for group, subset in groups.items():
            if not subset:
                continue
            entries = [r["context"][budget] for r in subset]
            ceiling = statistics.fmean(float(r["answer_in_conversation"]) for r in subset)
            strict_ceiling = statistics.fmean(float(r["answer_string_in_conversation"]) for r in subset)
            oracle = statistics.fmean(float(r["answer_in_evidence"]) for r in subset)
            scores: dict[str, float] = {
                "questions": float(len(entries)),
                "evidence_in_context": statistics.fmean(e["evidence_in_context"] for e in entries),
                "evidence_shown": statistics.fmean(e["evidence_shown"] for e in entries),
                "answer_in_context": statistics.fmean(float(e["answer_in_context"]) for e in entries),
                "answer_string_in_context": statistics.fmean(float(e["answer_string_in_context"]) for e in entries),
                "answer_with_evidence_first": statistics.fmean(float(e["answer_with_evidence_first"]) for e in entries),
                "tokens_mean": statistics.fmean(e["tokens"] for e in entries),
                "answer_in_whole_conversation": ceiling,
                "answer_string_in_whole_conversation": strict_ceiling,
                "answer_in_evidence_only": oracle,
            }
            pairs = [e["crs"] for e in entries if "crs" in e]
            if pairs:
                context_cosine = statistics.fmean(p[0] for p in pairs)
                random_cosine = statistics.fmean(p[1] for p in pairs)
                scores |= {
                    "crs_questions": float(len(pairs)),
                    "cosine_context": context_cosine,
                    "cosine_random": random_cosine,
                    "crs": context_cosine / random_cosine if random_cosine else float("nan"),
                }
            result[budget][group] = scores
    return result
