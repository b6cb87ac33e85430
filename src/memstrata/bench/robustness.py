"""LoCoMo under realistic chat perturbations (bench/perturb.py), each scored beside the clean run.

Each variant is ingested into a fresh Memory and scored by recall@10 and answer-in-context
at 1,000 tokens, with the change from the clean run.
See docs/benchmarks.md#robustness-locomo-under-real-chat-perturbations.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from memstrata import Embedder, Memory
from memstrata.bench.context_metrics import answer_in_context
from memstrata.bench.datasets import DialogTurn
from memstrata.bench.ingest_search import machine
from memstrata.bench.perturb import DEFAULT_SEED, PERTURBATIONS, Perturbed, check_perturbations, unchanged
from memstrata.bench.replay import (
    CATEGORIES,
    TUNING_CONVERSATIONS,
    ingest_dialogue,
    load_dialogue,
    question_records,
    replay_settings,
)
from memstrata.extraction.time_expressions import annotate
from memstrata.retrieval.assembly import one_line

CLEAN = "clean"
HITS = 10  # recall over the first 10 hits a search returns
CONTEXT_BUDGET = 1000
METRICS = ("recall@10", "answer_in_context@1000", "answer_in_conversation")
# Short enough for an 80-column terminal; ROW_CAPTION says what they mean.
ROW_HEADINGS = ("variant", "R@10", "1-5", "6-10", "Δ R@10", "answer", "Δ answer", "ceiling")
ROW_CAPTION = (
    "R@10: evidence recall of the top 10 hits, all questions, then conversations 1-5 and 6-10; "
    "answer: its words in context() at 1,000 tokens; ceiling: in the whole perturbed conversation"
)
SPLITS: dict[str, Callable[[int], bool]] = {
    "all": lambda number: True,
    "conversations 1-5": lambda number: number <= TUNING_CONVERSATIONS,
    "conversations 6-10": lambda number: number > TUNING_CONVERSATIONS,
}


@dataclass(kw_only=True, frozen=True, slots=True)
class RobustnessOptions:
    """What to run; ``None`` means the Memory's own setting."""

    data: Path | None = None
    perturbations: tuple[str, ...] = tuple(PERTURBATIONS)
    conversations: tuple[int, ...] = ()
    limit: int | None = None
    seed: int = DEFAULT_SEED
    embedder: str | None = None
    threads: int | None = None


def run_robustness(
    options: RobustnessOptions, console: Console | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run the clean data and each perturbation; return the report and one record per question.

    Each record holds the question, its evidence and, per variant, the hits' stored ids, the
    LoCoMo turns they stand for, recall@10, and whether the answer is in the context and in
    the whole (perturbed) conversation.
    """
    console = console or Console(stderr=True)
    perturbations = check_perturbations(options.perturbations)
    dialogue = load_dialogue(options.data, options.conversations, options.limit)
    turns = dialogue.turns
    records = question_records(dialogue, options.limit)
    started = time.perf_counter()
    variants: dict[str, dict[str, Any]] = {}
    embedder: Embedder | None = None
    settings: dict[str, Any] = {}
    for name in (CLEAN, *perturbations):
        perturbed = unchanged(turns) if name == CLEAN else PERTURBATIONS[name](turns, options.seed)
        variants[name], embedder, settings = _run_variant(
            name, perturbed, records, options=options, embedder=embedder, console=console
        )
    for name, variant in variants.items():
        if name != CLEAN:
            variant["delta_vs_clean"] = _delta(variant["scores"], variants[CLEAN]["scores"])
    report = {
        "benchmark": "locomo-robustness",
        "measured_at": datetime.now(UTC).isoformat(),
        "machine": machine(),
        "embedder": embedder.model_id if embedder is not None else None,
        "settings": settings,
        "seed": options.seed,
        "search": {"mode": "hybrid", "hits": HITS},
        "context_budget": CONTEXT_BUDGET,
        "conversations": [dialogue.number_of[c] for c in dialogue.chosen],
        "turns": len(turns),
        "questions": len(records),
        "seconds": time.perf_counter() - started,
        "variants": variants,
    }
    return report, records


def _run_variant(
    name: str,
    perturbed: Perturbed,
    records: list[dict[str, Any]],
    *,
    options: RobustnessOptions,
    embedder: Embedder | None,
    console: Console,
) -> tuple[dict[str, Any], Embedder, dict[str, Any]]:
    """Ingest one variant into a fresh Memory, ask every question, add its answers to ``records``.

    Returns the variant's scores and timings, its embedder and its settings.

    The embedder loaded for the first variant is handed to the next (each still has its own
    home and store), so the model is loaded and verified once.
    """
    overrides = replay_settings(embedder=None, threads=options.threads)  # the embedder is passed on below
    whole = _whole_conversations(perturbed.turns)
    with (
        tempfile.TemporaryDirectory(prefix=f"memstrata-robustness-{name}-") as scratch,
        Memory(Path(scratch), embedder=embedder or options.embedder, **overrides) as memory,
    ):
        console.print(f"[dim]{name}: {len(perturbed.turns)} turns[/dim]")
        ingest_seconds = ingest_dialogue(memory, list(perturbed.turns), console)
        started = time.perf_counter()
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task(f"asking ({name})", total=len(records))
            for record in records:
                record[name] = _ask(memory, record, perturbed, whole[record["conversation"]])
                progress.update(task, advance=1)
        result = {
            "turns": len(perturbed.turns),
            "ingest_seconds": ingest_seconds,
            "ask_seconds": time.perf_counter() - started,
            "scores": _scores(records, name),
        }
        return result, memory.embedder, memory.settings.model_dump(mode="json", exclude={"home", "storage_url"})


def _ask(memory: Memory, record: dict[str, Any], perturbed: Perturbed, whole: str) -> dict[str, Any]:
    """One question in one variant: the top hits mapped to LoCoMo's turns, and the answer tests."""
    user = record["conversation"]
    hits = memory.search(record["question"], user_id=user, limit=HITS)
    stored = [source for hit in hits for source in hit.source_turn_ids]
    ranked = list(dict.fromkeys(perturbed.origin.get(source, source) for source in stored))
    context = memory.context(record["question"], user_id=user, token_budget=CONTEXT_BUDGET)
    return {
        "hits": list(dict.fromkeys(stored)),
        "ranked": ranked,
        "recall@10": len(set(ranked) & set(record["evidence"])) / len(record["evidence"]),
        "answer_in_context@1000": answer_in_context(record["answer"], context.text),
        "answer_in_conversation": answer_in_context(record["answer"], whole),
    }


def _whole_conversations(turns: Sequence[DialogTurn]) -> dict[str, str]:
    """Each conversation as context() renders excerpts (dated, speaker first, relative dates resolved).

    The ceiling of answer-in-context: an answer whose words the perturbation changed
    (lower case, typos) may be in no block at all.
    """
    lines: dict[str, list[str]] = defaultdict(list)
    for turn in turns:
        excerpt = one_line(f"{turn.speaker}: {annotate(turn.text, turn.timestamp)}")
        lines[turn.conversation].append(f"[{turn.timestamp.day} {turn.timestamp:%B %Y}] {excerpt}")
    return {conversation: "\n".join(text) for conversation, text in lines.items()}


def _scores(records: Sequence[dict[str, Any]], name: str) -> dict[str, dict[str, dict[str, float]]]:
    """Mean of each metric per half ("all", conversations 1-5, 6-10) and per category; empty groups left out."""
    result: dict[str, dict[str, dict[str, float]]] = {}
    for split, belongs in SPLITS.items():
        subset = [r for r in records if belongs(r["conversation_number"])]
        if not subset:
            continue
        groups = {"overall": subset} | {
            f"category {c} ({label})": [r for r in subset if r["category"] == c] for c, label in CATEGORIES.items()
        }
        result[split] = {
            group: {
                "questions": float(len(members)),
                **{metric: statistics.fmean(float(r[name][metric]) for r in members) for metric in METRICS},
            }
            for group, members in groups.items()
            if members
        }
    return result


def _delta(
    scores: dict[str, dict[str, dict[str, float]]], clean: dict[str, dict[str, dict[str, float]]]
) -> dict[str, dict[str, dict[str, float]]]:
    """Each metric minus the clean run's, group by group."""
    return {
        split: {
            group: {metric: values[metric] - clean[split][group][metric] for metric in METRICS}
            for group, values in groups.items()
        }
        for split, groups in scores.items()
    }


def summary_rows(report: dict[str, Any]) -> list[tuple[str, ...]]:
    """The report as table rows under ``ROW_HEADINGS``: one per variant, clean first; "—" for a half not run."""

    def overall(scores: dict[str, Any], split: str, metric: str, signed: bool = False) -> str:
        value = scores.get(split, {}).get("overall", {}).get(metric)
        return "—" if value is None else f"{value:+.3f}" if signed else f"{value:.3f}"

    rows: list[tuple[str, ...]] = []
    for name, variant in report["variants"].items():
        scores, delta = variant["scores"], variant.get("delta_vs_clean")
        rows.append(
            (
                name,
                *(overall(scores, split, "recall@10") for split in SPLITS),
                overall(delta, "all", "recall@10", signed=True) if delta is not None else "",
                overall(scores, "all", "answer_in_context@1000"),
                overall(delta, "all", "answer_in_context@1000", signed=True) if delta is not None else "",
                overall(scores, "all", "answer_in_conversation"),
            )
        )
    return rows
