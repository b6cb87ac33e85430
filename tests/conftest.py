"""Shared fixtures: a Memory on a temporary data dir with the deterministic hash embedder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.embeddings.hashing import HashEmbedder

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
LOCOMO = SHARED / "datasets" / "locomo" / "locomo10.json"


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads the developer's own settings or data dir."""
    for name in list(__import__("os").environ):
        if name.startswith("MEMSTRATA_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MEMSTRATA_HOME", str(tmp_path / "default-home"))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh data directory."""
    return tmp_path / "home"


@pytest.fixture
def memory(home: Path) -> Iterator[Memory]:
    """A Memory with the fast deterministic embedder; tier work runs only on flush()."""
    with Memory(home, embedder=HashEmbedder(), background=False) as opened:
        yield opened
