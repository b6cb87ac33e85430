"""The contract suite runs every test once per storage backend: the same behaviour, whatever holds the data."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.storage import open_store
from memstrata.storage.base import TierStore

BACKENDS = ("sqlite", "postgres")


@pytest.fixture(params=BACKENDS)
def storage_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store of each backend in turn."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'contract.db'}"
    url: str = request.getfixturevalue("migrated_postgres_url")
    return url


@pytest.fixture
def open_tier_store(storage_url: str) -> Iterator[Callable[[], TierStore]]:
    """Opens (more) stores on the test's database; all are closed afterwards."""
    opened: list[Any] = []

    def opener() -> TierStore:
        store: Any = open_store(storage_url, busy_timeout_seconds=30.0)
        opened.append(store)
        return store  # type: ignore[no-any-return]

    yield opener
    for store in opened:
        store.close()


@pytest.fixture
def store(open_tier_store: Callable[[], TierStore]) -> TierStore:
    """A store of the backend under test."""
    return open_tier_store()


@pytest.fixture
def open_memory(storage_url: str, tmp_path: Path) -> Iterator[Callable[..., Memory]]:
    """Opens Memories on the test's store (hash embedder, tier work on flush()); all closed afterwards."""
    opened: list[Memory] = []

    def opener(**overrides: Any) -> Memory:
        settings: dict[str, Any] = {"background": False, "storage_url": storage_url, **overrides}
        memory = Memory(tmp_path / "home", embedder=HashEmbedder(), **settings)
        opened.append(memory)
        return memory

    yield opener
    for memory in opened:
        memory.close()


@pytest.fixture
def memory(open_memory: Callable[..., Memory]) -> Memory:
    """A Memory on the backend under test."""
    return open_memory()
