"""Fixtures for the agent tests: a Memory answering through a scripted LLM."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.embeddings.hashing import HashEmbedder
from tests.fakes import FakeLLM


@pytest.fixture
def fake_llm() -> FakeLLM:
    """A scripted LLM with one queue per purpose; tests queue the ``chat`` replies they need."""
    return FakeLLM({"chat": []})


@pytest.fixture
def chatty(home: Path, fake_llm: FakeLLM) -> Iterator[Memory]:
    """A Memory whose LLM is ``fake_llm``; tier work runs only on flush()."""
    with Memory(home, embedder=HashEmbedder(), background=False, llm=fake_llm) as opened:
        yield opened
