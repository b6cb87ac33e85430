"""memstrata's own search and context() time, with the hash embedder: compare two versions of the code.

    PYTHONPATH=/path/to/old/src python scripts/facade_overhead.py
    python scripts/facade_overhead.py

5,000 synthetic turns in one user's memory (ten sessions of 500), then 300 searches and 100
contexts of six-word queries; prints p50/p95 in ms. Run the two versions in turns, several
times, both orders: on two cores the second of a pair often comes out slower.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable

from memstrata import Memory
from memstrata.bench.datasets import synthetic_texts
from memstrata.embeddings.hashing import HashEmbedder

TURNS = 5_000
BATCH = 500


def main() -> None:
    texts = list(synthetic_texts(TURNS))
    with (
        tempfile.TemporaryDirectory() as home,
        Memory(home, embedder=HashEmbedder(), background=False, record_visits=False) as memory,
    ):
        for start in range(0, TURNS, BATCH):
            batch = [{"role": "user", "content": text} for text in texts[start : start + BATCH]]
            memory.add(batch, user_id="u", session_id=f"s{start // BATCH}")
        chooser = random.Random(1)
        queries = [" ".join(chooser.choice(texts).split()[:6]) for _ in range(300)]
        for query in queries[:20]:  # warm-up: the vector index loads on the first search
            memory.search(query, user_id="u")
        searches = [_timed(lambda q=query: memory.search(q, user_id="u")) for query in queries]
        contexts = [_timed(lambda q=query: memory.context(q, user_id="u")) for query in queries[:100]]
    print(
        f"search p50 {statistics.median(searches):.2f} p95 {_p95(searches):.2f}  "
        f"context p50 {statistics.median(contexts):.2f} p95 {_p95(contexts):.2f}"
    )


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def _p95(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.95)]


if __name__ == "__main__":
    main()
