"""A user's vectors are loaded from the store a chunk at a time, into room reserved once."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.retrieval import pipeline

TEXTS = [f"turn {index}: we talked about {topic}" for index, topic in enumerate(["sailing", "tea", "chess"] * 40)]


def _search_all(home: Path, reads: list[int] | None = None) -> list[list[str]]:
    with Memory(home, background=False, embedder="hash") as memory:
        if reads is not None:
            store = memory.parts.store
            read = store.vectors_after

            def counted(*args: object) -> object:
                batch = read(*args)  # type: ignore[arg-type]
                reads.append(len(batch.seqs))
                return batch

            store.vectors_after = counted  # type: ignore[method-assign]
        found = [[hit.content for hit in memory.search(topic, user_id="ana")] for topic in ("sailing", "chess")]
        assert memory.parts.index.rows() == len(TEXTS)  # reserved for the count, never grown past it
        return found


def test_a_load_in_chunks_finds_what_a_load_at_once_finds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Memory(tmp_path, background=False, embedder="hash") as memory:
        memory.add([{"role": "user", "content": text} for text in TEXTS], user_id="ana", session_id="s")
    at_once = _search_all(tmp_path)
    monkeypatch.setattr(pipeline, "LOAD_CHUNK_ROWS", 7)
    reads: list[int] = []
    assert _search_all(tmp_path, reads) == at_once
    assert reads[:18] == [7] * 17 + [1]  # 120 vectors: seventeen chunks of seven and the last one
    assert at_once[0] and at_once[1]
