"""The REST server's API keys in PostgreSQL: only a one-way hash of each secret is stored."""

from __future__ import annotations

from datetime import datetime

from psycopg import errors

from memstrata.errors import IdConflict
from memstrata.storage.base import ApiKey
from memstrata.storage.postgres.connection import Connected
from memstrata.storage.postgres.rows import Connection
from memstrata.storage.sql_keys import KeyStatements


class KeysMixin(Connected, KeyStatements[Connection]):
    """The ``KeyStore`` protocol."""

    def add_api_key(self, key: ApiKey, secret_hash: str) -> None:
        """Store a new key; its id and hash must both be new (else IdConflict, and nothing is written)."""

        def work(connection: Connection) -> None:
            try:
                with connection.transaction():  # a savepoint, so the conflict can be reported cleanly
                    connection.execute(
                        "INSERT INTO api_keys (id, tenant, name, secret_hash, created_at, revoked_at, agent_id, role)"
                        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                        (
                            key.id,
                            key.tenant,
                            key.name,
                            secret_hash,
                            key.created_at,
                            key.revoked_at,
                            key.agent_id,
                            key.role.value,
                        ),
                    )
            except errors.UniqueViolation as exc:
                raise IdConflict(
                    f"an API key with id {key.id!r} or the same secret exists already; create a new key"
                ) from exc

        self._write(work)

    def revoke_api_key(self, key_id: str, when: datetime) -> bool:
        """Mark a key revoked (the first revocation's time stays); False if there is no such key."""
        row = self._write(
            lambda connection: connection.execute(
                "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, %s) WHERE id = %s RETURNING id",
                (when, key_id),
            ).fetchone()
        )
        return row is not None
