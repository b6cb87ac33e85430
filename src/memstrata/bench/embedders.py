"""The bare embedders' speed, each configuration in a fresh process (thread pools start once)."""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

from memstrata.bench.datasets import synthetic_texts
from memstrata.bench.ingest_search import machine


def _measure(name: str, threads: int, count: int) -> dict[str, Any]:
    from memstrata.embeddings import load_embedder

    texts = list(synthetic_texts(count))
    started = time.perf_counter()
    embedder = load_embedder(name, threads=threads)
    load_seconds = time.perf_counter() - started
    embedder.embed_documents(texts[:8])  # warm-up
    started = time.perf_counter()
    for start in range(0, len(texts), 32):
        embedder.embed_documents(texts[start : start + 32])
    batched = len(texts) / (time.perf_counter() - started)
    singles = texts[: min(50, len(texts))]
    started = time.perf_counter()
    for text in singles:
        embedder.embed_documents([text])
    one_at_a_time = len(singles) / (time.perf_counter() - started)
    query_ms = []
    for text in singles:
        started = time.perf_counter()
        embedder.embed_query(text)
        query_ms.append((time.perf_counter() - started) * 1000)
    return {
        "embedder": name,
        "model_id": embedder.model_id,
        "threads": threads,
        "texts": len(texts),
        "load_seconds": load_seconds,
        "batched_texts_per_s": batched,
        "single_texts_per_s": one_at_a_time,
        "query_p50_ms": statistics.median(query_ms),
    }


def run_embedders(names: list[str], threads: list[int], count: int) -> dict[str, Any]:
    """Time every (embedder, threads) pair on ``count`` synthetic chat sentences."""
    results = []
    for name in names:
        for thread_count in threads:
            with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
                results.append(pool.submit(_measure, name, thread_count, count).result())
    return {"benchmark": "embedders", "machine": machine(), "results": results}
