"""Storage backends, chosen by the scheme of a storage URL through ``memstrata.registry``, imported only when chosen."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import SecretStr

from memstrata.errors import ConfigError
from memstrata.registry import STORE, WORKING_SET, built_in, load, scheme_of, targets

if TYPE_CHECKING:
    from memstrata.storage.base import TierStore, WorkingSet

#: URL scheme → "module:factory" of the built-in backends; the factory takes (url, busy_timeout_seconds=).
BACKENDS: Mapping[str, str] = targets(STORE)

#: URL scheme → "module:factory" of a working set kept outside the store; the factory takes (url).
WORKING_BACKENDS: Mapping[str, str] = targets(WORKING_SET)


def open_store(url: str, *, busy_timeout_seconds: float = 30.0, encryption_key: SecretStr | None = None) -> TierStore:
    """Open the backend named by ``url``'s scheme (``sqlite:///path/to/file.db``): every role of ``storage/base.py``.

    ``encryption_key`` encrypts the embedded SQLite store; any other backend refuses it (ConfigError).
    """
    if encryption_key is None:
        store: TierStore = load(STORE, url, busy_timeout_seconds=busy_timeout_seconds)
        return store
    if scheme_of(url) != "sqlite":
        raise ConfigError(
            "MEMSTRATA_ENCRYPTION_KEY encrypts the embedded SQLite store only; for PostgreSQL, encrypt at the"
            " server (disk or tablespace encryption, or a managed service's encryption at rest) and unset the key"
        )
    # Only the built-in SQLite factory takes a key: called directly, so no plugin is ever offered one.
    encrypted: TierStore = built_in(STORE)["sqlite"].factory()(
        url, busy_timeout_seconds=busy_timeout_seconds, encryption_key=encryption_key
    )
    return encrypted


def open_working_set(url: str) -> WorkingSet:
    """Open the working set named by ``url``'s scheme (``redis://127.0.0.1:6379/0``)."""
    working: WorkingSet = load(WORKING_SET, url)
    return working
