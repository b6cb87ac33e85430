"""The API-key store of a data directory, opened without a Memory (no embedder, no worker)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from memstrata.config import Settings
from memstrata.errors import ConfigError
from memstrata.storage import open_store
from memstrata.storage.base import KeyStore


@runtime_checkable
class ClosableKeyStore(KeyStore, Protocol):
    """A key store opened by :func:`open_key_store`; the opener closes it."""

    def close(self) -> None:
        """Release connections."""


def open_key_store(storage_url: str, settings: Settings) -> ClosableKeyStore:
    """Open the store at ``storage_url`` as a key store; ConfigError if its backend holds no keys."""
    store = open_store(
        storage_url, busy_timeout_seconds=settings.busy_timeout_seconds, encryption_key=settings.encryption_key
    )
    if not isinstance(store, ClosableKeyStore):  # every method of the protocol, checked by name
        store.close()
        raise ConfigError(f"the storage backend of {storage_url!r} cannot hold API keys; use sqlite:// or postgres://")
    return store
