"""Storage backends, chosen by the scheme of a storage URL through ``memstrata.registry``, imported only when chosen."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from memstrata.registry import STORE, WORKING_SET, load, targets

if TYPE_CHECKING:
    from memstrata.storage.base import TierStore, WorkingSet

#: URL scheme → "module:factory" of the built-in backends; the factory takes (url, busy_timeout_seconds=).
BACKENDS: Mapping[str, str] = targets(STORE)

#: URL scheme → "module:factory" of a working set kept outside the store; the factory takes (url).
WORKING_BACKENDS: Mapping[str, str] = targets(WORKING_SET)


def open_store(url: str, *, busy_timeout_seconds: float = 30.0) -> TierStore:
    """Open the backend named by ``url``'s scheme (``sqlite:///path/to/file.db``): every role of ``storage/base.py``."""
    store: TierStore = load(STORE, url, busy_timeout_seconds=busy_timeout_seconds)
    return store


def open_working_set(url: str) -> WorkingSet:
    """Open the working set named by ``url``'s scheme (``redis://127.0.0.1:6379/0``)."""
    working: WorkingSet = load(WORKING_SET, url)
    return working
