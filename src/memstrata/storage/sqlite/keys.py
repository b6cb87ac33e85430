"""SQL for the REST server's API keys; only a one-way hash of each secret is stored."""

from __future__ import annotations

import hmac
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from memstrata.errors import IdConflict
from memstrata.models import format_time
from memstrata.storage.base import ApiKey

_KEY_COLUMNS = "id, tenant, name, created_at, revoked_at"


class KeysMixin:
    """The KeyStore methods; mixed into SQLiteStore, which provides ``_read`` and ``_write``."""

    _read: Callable[[Callable[[sqlite3.Connection], Any]], Any]
    _write: Callable[[Callable[[sqlite3.Connection], Any]], Any]

    def add_api_key(self, key: ApiKey, secret_hash: str) -> None:
        """Store a new key; IdConflict if its id or hash is taken."""

        def work(connection: sqlite3.Connection) -> None:
            taken = connection.execute(
                "SELECT 1 FROM api_keys WHERE id = ? OR secret_hash = ?", (key.id, secret_hash)
            ).fetchone()
            if taken is not None:
                raise IdConflict(f"an API key with id {key.id!r} or the same secret exists already; make a new key")
            connection.execute(
                "INSERT INTO api_keys (id, tenant, name, secret_hash, created_at, revoked_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    key.id,
                    key.tenant,
                    key.name,
                    secret_hash,
                    format_time(key.created_at),
                    key.revoked_at and format_time(key.revoked_at),
                ),
            )

        self._write(work)

    def key_for_hash(self, secret_hash: str) -> ApiKey | None:
        """The key (revoked ones too) whose secret hashes to ``secret_hash``."""
        row = self._read(
            lambda connection: connection.execute(
                f"SELECT {_KEY_COLUMNS}, secret_hash FROM api_keys WHERE secret_hash = ?", (secret_hash,)
            ).fetchone()
        )
        # The index found the row; compare again in constant time so a match never rests on
        # a comparison whose timing depends on how much of the hash agreed.
        if row is None or not hmac.compare_digest(str(row[5]).encode(), secret_hash.encode()):
            return None
        return _key_from_row(row)

    def api_keys(self, tenant: str | None = None) -> list[ApiKey]:
        """Keys (of one tenant, or all), oldest first."""
        sql = f"SELECT {_KEY_COLUMNS} FROM api_keys"
        parameters: list[Any] = []
        if tenant is not None:
            sql += " WHERE tenant = ?"
            parameters.append(tenant)
        sql += " ORDER BY created_at, id"
        rows = self._read(lambda connection: connection.execute(sql, parameters).fetchall())
        return [_key_from_row(row) for row in rows]

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


def _key_from_row(row: Sequence[Any]) -> ApiKey:
    return ApiKey(
        id=str(row[0]),
        tenant=str(row[1]),
        name=str(row[2]),
        created_at=datetime.fromisoformat(row[3]),
        revoked_at=datetime.fromisoformat(row[4]) if row[4] is not None else None,
    )
