"""Re-encrypting a store: ``memstrata.rekey`` and ``memstrata rekey``."""

from __future__ import annotations

import os

from pydantic import SecretStr

from memstrata.config import Settings, load_settings
from memstrata.errors import ConfigError
from memstrata.registry import scheme_of


def rekey(home: str | os.PathLike[str] | None = None, *, new_key: str | None, settings: Settings | None = None) -> None:
    """Re-encrypt the embedded store under ``new_key`` (None: store it unencrypted), opened with the current key.

    The current key is the ``encryption_key`` setting (MEMSTRATA_ENCRYPTION_KEY); unset, the store
    is read as unencrypted. Stop every process using the store first. Example::

        memstrata.rekey("./agent-memory", new_key="a long passphrase")

    Raises EncryptionKeyError when the current key does not open the store, ConfigError for a
    PostgreSQL store or an unusable new key, StorageError when the copy fails (the store is then unchanged).
    """
    chosen = settings or load_settings(home=home)
    url = chosen.resolved_storage_url
    if scheme_of(url) != "sqlite":
        raise ConfigError("rekey applies to the embedded SQLite store; PostgreSQL is encrypted by its server")
    # Imported here: SQLCipher and the SQLite backend load only when a store is re-encrypted.
    from memstrata.storage.sqlite.cipher import rekey as rekey_file
    from memstrata.storage.sqlite.store import sqlite_path

    path = sqlite_path(url)
    if path is None:
        raise ConfigError("an in-memory store has nothing to re-encrypt")
    rekey_file(path, chosen.encryption_key, SecretStr(new_key) if new_key is not None else None)
