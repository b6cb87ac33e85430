"""SQL for the REST server's API keys; only a one-way hash of each secret is stored."""

from __future__ import annotations

import sqlite3
from datetime import datetime

from memstrata.errors import IdConflict
from memstrata.models import format_time
from memstrata.storage.base import ApiKey
from memstrata.storage.sql_keys import KeyStatements
from memstrata.storage.sqlite.shared import SQLiteRunner


class KeysMixin(SQLiteRunner, KeyStatements[sqlite3.Connection]):
    """The KeyStore methods; mixed into SQLiteStore, which provides ``_read`` and ``_write``."""

    def add_api_key(self, key: ApiKey, secret_hash: str) -> None:
        """Store a new key; IdConflict if its id or hash is taken."""

        def work(connection: sqlite3.Connection) -> None:
            taken = connection.execute(
                "SELECT 1 FROM api_keys WHERE id = ? OR secret_hash = ?", (key.id, secret_hash)
            ).fetchone()
            if taken is not None:
                raise IdConflict(f"an API key with id {key.id!r} or the same secret exists already; make a new key")
            connection.execute(
                "INSERT INTO api_keys (id, tenant, name, secret_hash, created_at, revoked_at, agent_id, role)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key.id,
                    key.tenant,
                    key.name,
                    secret_hash,
                    format_time(key.created_at),
                    key.revoked_at and format_time(key.revoked_at),
                    key.agent_id,
                    key.role.value,
                ),
            )

        self._write(work)

    def revoke_api_key(self, key_id: str, when: datetime) -> bool:
        """Mark a key revoked (keeping the first revocation time); False if there is no such key."""

        def work(connection: sqlite3.Connection) -> bool:
            if connection.execute("SELECT 1 FROM api_keys WHERE id = ?", (key_id,)).fetchone() is None:
                return False
            connection.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (format_time(when), key_id)
            )
            return True

        return bool(self._write(work))
