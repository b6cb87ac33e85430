"""The REST server's API keys in PostgreSQL: only a one-way hash of each secret is stored."""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg import errors

from memstrata.errors import IdConflict
from memstrata.storage.base import ApiKey
from memstrata.storage.postgres.connection import Connected
from memstrata.storage.postgres.rows import Connection, optional_utc, utc

_KEY_COLUMNS = "id, tenant, name, created_at, revoked_at"


class KeysMixin(Connected):
    """The ``KeyStore`` protocol."""

    def add_api_key(self, key: ApiKey, secret_hash: str) -> None:
        """Store a new key; its id and hash must both be new (else IdConflict, and nothing is written)."""

        def work(connection: Connection) -> None:
            try:
                with connection.transaction():  # a savepoint, so the conflict can be reported cleanly
                    connection.execute(
                        "INSERT INTO api_keys (id, tenant, name, secret_hash, created_at, revoked_at)"
                        " VALUES (%s, %s, %s, %s, %s, %s)",
                        (key.id, key.tenant, key.name, secret_hash, key.created_at, key.revoked_at),
                    )
            except errors.UniqueViolation as exc:
                raise IdConflict(
                    f"an API key with id {key.id!r} or the same secret exists already; create a new key"
                ) from exc

        self._write(work)

    def key_for_hash(self, secret_hash: str) -> ApiKey | None:
        """The key whose secret hashes to ``secret_hash`` (revoked ones too), if any."""
        row = self._read(
            lambda connection: connection.execute(
                f"SELECT {_KEY_COLUMNS}, secret_hash FROM api_keys WHERE secret_hash = %s", (secret_hash,)
            ).fetchone()
        )
        # The index found the row; compare again in constant time, as the SQLite store does.
        if row is None or not hmac.compare_digest(str(row[5]).encode(), secret_hash.encode()):
            return None
        return _key(row)

    def api_keys(self, tenant: str | None = None) -> list[ApiKey]:
        """Keys (of one tenant, or all), oldest first."""
        query = f"SELECT {_KEY_COLUMNS} FROM api_keys"
        parameters: list[Any] = []
        if tenant is not None:
            query += " WHERE tenant = %s"
            parameters.append(tenant)
        query += ' ORDER BY created_at, id COLLATE "C"'
        rows = self._read(lambda connection: connection.execute(query, parameters).fetchall())
        return [_key(row) for row in rows]

    def revoke_api_key(self, key_id: str, when: datetime) -> bool:
        """Mark a key revoked (the first revocation's time stays); False if there is no such key."""
        row = self._write(
            lambda connection: connection.execute(
                "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, %s) WHERE id = %s RETURNING id",
                (when, key_id),
            ).fetchone()
        )
        return row is not None


def _key(row: Sequence[Any]) -> ApiKey:
    return ApiKey(
        id=str(row[0]), tenant=str(row[1]), name=str(row[2]), created_at=utc(row[3]), revoked_at=optional_utc(row[4])
    )
