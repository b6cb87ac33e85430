"""Shared fixtures: a Memory on a temporary data dir with the deterministic hash embedder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.embeddings.hashing import HashEmbedder
from tests.llm_server import LLMServer
from tests.postgres_server import (  # noqa: F401  (fixtures shared by every test dir)
    migrated_postgres_url,
    postgres_server,
    postgres_template,
    postgres_url,
)
from tests.redis_server import redis_server, redis_url  # noqa: F401  (fixtures shared by every test dir)

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


@pytest.fixture
def llm_server() -> Iterator[LLMServer]:
    """A real OpenAI- and Anthropic-compatible HTTP server on 127.0.0.1 with scripted replies (tests/llm_server.py)."""
    with LLMServer() as server:
        yield server
