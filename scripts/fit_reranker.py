"""Fit the reranker's weights on LoCoMo conversations 1-5 and check them on 6-10.

    python scripts/fit_reranker.py [--home DIR] [--data PATH]

``--home`` keeps the ingested memory between runs (ingesting all ten conversations
with the bundled model takes several minutes). The script prints the fitted
``RerankPolicy`` and evidence recall@10 of the shipped policy and the fitted one, per
half and per category. It reads the same candidates ``Memory.search`` reads, through
the retrieval pipeline (``Memory.parts.pipeline``), so the features are exactly those production computes.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
from collections import defaultdict
from dataclasses import fields, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from rich.console import Console

from memstrata import Memory
from memstrata.bench.datasets import find_locomo, load_locomo
from memstrata.bench.metrics import recall_at
from memstrata.bench.replay import ingest_dialogue, turn_id
from memstrata.retrieval.fusion import fuse_scored
from memstrata.retrieval.query import Query, asked_periods, joined, today_in
from memstrata.retrieval.rerank import FEATURES, RerankPolicy, TurnSignals, rerank, rerank_features
from memstrata.retrieval.speakers import mentioned_speaker

TRAINING = range(1, 6)  # conversations the weights are chosen on; 6-10 are held out
L2 = 10.0
DIALOG_ID = re.compile(r"D\d+:\d+")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, help="memory directory to reuse (ingested on first use)")
    parser.add_argument("--data", type=Path, help="locomo10.json (default: found as the bench finds it)")
    args = parser.parse_args()
    turns, questions = load_locomo(find_locomo(args.data))
    order = list(dict.fromkeys(turn.conversation for turn in turns))
    known = {turn_id(turn) for turn in turns}
    with tempfile.TemporaryDirectory() as scratch, Memory(args.home or Path(scratch)) as memory:
        missing = set(order) - set(memory.users())
        if missing:
            ingest_dialogue(memory, [turn for turn in turns if turn.conversation in missing], Console(stderr=True))
        rows = []
        for question in questions:
            evidence = {f"{question.conversation}:{d}" for e in question.evidence for d in DIALOG_ID.findall(e)}
            if question.category not in (1, 2, 3, 4) or not evidence & known:
                continue
            rows.append(candidates(memory, question.question, question.conversation, evidence & known))
            rows[-1].update(conversation=order.index(question.conversation) + 1, category=question.category)
    fitted = fit([row for row in rows if row["conversation"] in TRAINING])
    print(fitted)
    for name, policy in (("shipped", RerankPolicy()), ("fitted", fitted)):
        print(name, evaluate(rows, policy))


def candidates(memory: Memory, query: str, user: str, evidence: set[str]) -> dict:  # type: ignore[type-arg]
    """The fused candidates of one question with their features, labels and what ``rerank`` needs."""
    depth = memory.settings.search_candidates
    zone = memory.settings.zone
    asked = Query(text=query, user_id=user, depth=depth, today=today_in(zone), zone=zone)
    rankings = joined(memory.parts.pipeline.rankings(asked).rankings)
    fused = fuse_scored(rankings, k=memory.settings.rrf_k)
    turns = memory.parts.pipeline.turns(user, [seq for _, seq in (item.key for item in fused)])
    signals = {
        ("turn", seq): TurnSignals.of(turn.name, turn.content, turn.session_id, turn.created_at)
        for seq, turn in turns.items()
    }
    scores = {name: dict(ranking) for name, ranking in rankings.items()}
    speaker = mentioned_speaker(query, [s.speaker for s in signals.values() if s.speaker])
    kept = [item for item in fused if item.key in signals]
    k = memory.settings.rrf_k
    features = rerank_features(
        kept, scores, signals, speaker, k=k, periods=asked_periods(query, datetime.now(UTC).date())
    )
    return {
        "query": query,
        "fused": kept,
        "scores": scores,
        "signals": signals,
        "ids": {item.key: turns[item.key[1]].id for item in kept},
        "evidence": evidence,
        "k": k,
        "X": np.array([features[item.key] for item in kept], np.float64),
        "y": np.array([turns[item.key[1]].id in evidence for item in kept], np.float64),
    }


def fit(rows: list[dict]) -> RerankPolicy:  # type: ignore[type-arg]
    """Pairwise logistic regression: each evidence turn against each other candidate of its question.

    Each question's difference vectors are divided by sqrt(its pairs), which flattens the
    loss of questions with many pairs (the shipped weights were fitted this way); features
    are scaled by their spread and the weights mapped back to raw units.
    """
    differences = []
    for row in rows:
        positive, negative = row["X"][row["y"] == 1], row["X"][row["y"] == 0]
        if len(positive) and len(negative):
            pairs = (positive[:, None, :] - negative[None, :, :]).reshape(-1, row["X"].shape[1])
            differences.append(pairs / np.sqrt(len(pairs)))
    if not differences:
        raise SystemExit("no question has both evidence and other candidates; nothing to fit")
    stacked = np.vstack(differences)
    spread = stacked.std(0) + 1e-9
    standard = stacked / spread
    weights = np.zeros(standard.shape[1])
    for _ in range(2000):
        agreement = 1 / (1 + np.exp(-(standard @ weights)))
        weights -= 0.5 * (-(standard.T @ (1 - agreement)) + L2 * weights) / len(standard)
    raw = weights / spread
    if raw[:2].mean() <= 0:
        raise SystemExit("the fit gave the rank features no positive weight; check the candidates and labels")
    raw /= raw[:2].mean()  # reciprocal-rank units: the two rank weights average 1
    return replace(RerankPolicy(), **{name: round(float(w), 4) for name, w in zip(FEATURES, raw, strict=True)})


def evaluate(rows: list[dict], policy: RerankPolicy) -> dict[str, float]:  # type: ignore[type-arg]
    """Evidence recall@10 of the policy's order: all, each half (A = 1-5, B = 6-10), each category."""
    found: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        ranked = rerank(row["query"], row["fused"], row["scores"], row["signals"], policy, k=row["k"])
        value = recall_at([row["ids"][item.key] for item in ranked], row["evidence"], 10)
        half = "A" if row["conversation"] in TRAINING else "B"
        for key in ("all", half, f"{half}{row['category']}", f"cat{row['category']}"):
            found[key].append(value)
    return {key: round(statistics.fmean(values), 4) for key, values in sorted(found.items())}


if __name__ == "__main__":
    assert [f.name for f in fields(RerankPolicy)][: len(FEATURES)] == list(FEATURES)
    main()
