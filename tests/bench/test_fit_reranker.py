"""scripts/fit_reranker.py: the pairwise fit that chose the shipped reranker weights."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np

from memstrata.retrieval.rerank import FEATURES, RerankPolicy

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fit_reranker.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fit_reranker", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pairwise_fit_finds_the_features_that_separate_evidence() -> None:
    rng = np.random.default_rng(4)
    rows = []
    for _ in range(60):
        features = rng.normal(size=(12, len(FEATURES)))
        features[:, :2] = rng.uniform(1 / 80, 1 / 61, size=(12, 2))
        labels = np.zeros(12)
        # Evidence: the two candidates ranked best by both lists and by the speaker feature (index 4).
        labels[np.argsort(-(features[:, 4] + 200 * (features[:, 0] + features[:, 1])))[:2]] = 1
        rows.append({"X": features, "y": labels})
    policy = _script().fit(rows)
    assert isinstance(policy, RerankPolicy)
    assert abs(policy.fulltext_rank + policy.vector_rank - 2.0) < 1e-3  # reciprocal-rank units
    weights = dict(zip(FEATURES, policy.weights(), strict=True))
    assert weights["speaker"] > 0
    assert weights["fulltext_rank"] > 0 and weights["vector_rank"] > 0
    assert weights["speaker"] == max(
        abs(weights[name]) for name in FEATURES if name not in ("fulltext_rank", "vector_rank")
    )
