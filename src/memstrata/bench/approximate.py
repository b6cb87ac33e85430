"""The approximate vector path against the exact one, on real embeddings of real conversations.

A user's memory is searched through coded scans from ``vector_approximate_from`` rows
(``retrieval/approximate.py``). Real chats large enough to reach that size are not at hand,
so this puts every turn of the given sources in one memory, rescores the same *share* of it
that a large memory rescores (4,000 rows a scan: 2% of 200,000, 0.4% of 1,000,000), and
counts how much of the exact top 10 the approximate path keeps. Queries are split in two halves, the
second never looked at while choosing the path's parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from memstrata.bench.datasets import find_locomo, load_locomo
from memstrata.bench.ingest_search import machine
from memstrata.config import Settings
from memstrata.embeddings import load_embedder
from memstrata.embeddings.base import Embedder, Vectors
from memstrata.errors import InvalidInput
from memstrata.retrieval.vectors import VectorIndex

TOP = 10
EMBED_BATCH = 64


@dataclass(kw_only=True, frozen=True)
class ApproximateOptions:
    """What ``memstrata bench approximate`` runs on."""

    data: Path | None = None
    texts: tuple[Path, ...] = ()
    embedder: str | None = None
    shares: tuple[float, ...] = (0.004, 0.02)
    queries: int = 300

    def check(self) -> None:
        """Raises: InvalidInput: a share outside (0, 1], or a text file that is missing."""
        if not self.shares or any(not 0 < share <= 1 for share in self.shares):
            raise InvalidInput(f"--shares are fractions of the memory in (0, 1], e.g. 0.004,0.02; got {self.shares}")
        for path in self.texts:
            if not path.is_file():
                raise InvalidInput(f"--texts {path}: no such file (one message per line)")


def _sources(options: ApproximateOptions) -> list[tuple[str, list[str], list[str]]]:
    """(name, texts in conversation order, queries) for LoCoMo and each text file."""
    turns, questions = load_locomo(find_locomo(options.data))
    step = max(1, len(questions) // options.queries)
    found = [("locomo", [f"{turn.speaker}: {turn.text}" for turn in turns], [q.question for q in questions][::step])]
    for path in options.texts:
        lines = list(dict.fromkeys(line.strip() for line in path.read_text(encoding="utf-8").splitlines()))
        lines = [line for line in lines if line]
        if len(lines) < 4:
            raise InvalidInput(f"--texts {path}: needs at least 4 distinct lines, has {len(lines)}")
        # Every step-th line becomes a query and leaves the memory, so no query finds itself.
        step = max(2, len(lines) // options.queries)
        held = set(lines[::step])
        found.append((path.stem, [line for line in lines if line not in held], lines[::step]))
    return [(name, texts, queries[: options.queries]) for name, texts, queries in found]


def _embed(embedder: Embedder, texts: list[str], console: Console, name: str) -> Vectors:
    with console.status(f"embedding {len(texts):,} {name} texts") as status:
        parts = []
        for start in range(0, len(texts), EMBED_BATCH):
            parts.append(embedder.embed_documents(texts[start : start + EMBED_BATCH]))
            status.update(f"embedding {name}: {start + EMBED_BATCH:,} / {len(texts):,}")
    return np.concatenate(parts).astype(np.float32)


def run_approximate(options: ApproximateOptions, console: Console) -> dict[str, Any]:
    """Recall@10 of the approximate path against the exact one, per source, half, share and mode."""
    options.check()
    settings = Settings()
    embedder = load_embedder(options.embedder or settings.embedder, threads=settings.embedding_threads)
    sources = _sources(options)
    memory = np.concatenate([_embed(embedder, texts, console, name) for name, texts, _ in sources])
    seqs = np.arange(1, len(memory) + 1, dtype=np.int64)
    weights = settings.neighbour_weights
    exact = VectorIndex(embedder.dimension, neighbour_weights=weights)
    exact.extend("memory", seqs, memory, len(memory))
    results = []
    asked = {name: [embedder.embed_query(query) for query in queries] for name, _, queries in sources}
    for share in options.shares:
        rescored = max(1, round(share * len(memory)))
        index = VectorIndex(
            embedder.dimension,
            neighbour_weights=weights,
            approximate_from=1,
            rescored_rows=rescored,
            rescored_per_result=0,
        )
        index.extend("memory", seqs, memory, len(memory))
        for name, vectors in asked.items():
            for half in (0, 1):
                for own_only in (False, True):
                    kept = [
                        len(
                            {seq for seq, _ in index.search("memory", vector, TOP, own_only=own_only)}
                            & {seq for seq, _ in exact.search("memory", vector, TOP, own_only=own_only)}
                        )
                        / TOP
                        for vector in vectors[half::2]
                    ]
                    results.append(
                        {
                            "source": name,
                            "half": "first (parameters chosen on it)" if half == 0 else "second (held out)",
                            "share": share,
                            "rescored_rows": rescored,
                            "mode": "own vector" if own_only else "own or blend",
                            "queries": len(kept),
                            f"recall_at_{TOP}": float(np.mean(kept)) if kept else None,
                        }
                    )
    return {
        "benchmark": "approximate",
        "machine": machine(),
        "embedder": embedder.model_id,
        "memory_rows": len(memory),
        "sources": {name: {"texts": len(texts), "queries": len(queries)} for name, texts, queries in sources},
        "results": results,
    }
