"""The API-key reads both stores share; only a one-way hash of each secret is stored."""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from typing import Any

from memstrata.models import KeyRole
from memstrata.storage.base import ApiKey
from memstrata.storage.dialect import C, Dialect, Runner

_KEY_COLUMNS = "id, tenant, name, created_at, revoked_at, agent_id, role"


def key_from_row(dialect: Dialect, row: Sequence[Any]) -> ApiKey:
    """The key a row selected with ``_KEY_COLUMNS`` holds."""
    return ApiKey(
        id=str(row[0]),
        tenant=str(row[1]),
        name=str(row[2]),
        created_at=dialect.read_time(row[3]),
        revoked_at=dialect.read_optional_time(row[4]),
        agent_id=None if row[5] is None else str(row[5]),
        role=KeyRole(row[6]),
    )


class KeyStatements(Runner[C]):
    """The ``KeyStore`` reads both stores run alike; adding and revoking keys stay apart."""

    def key_for_hash(self, secret_hash: str) -> ApiKey | None:
        """The key (revoked ones too) whose secret hashes to ``secret_hash``."""
        statement = self.dialect.sql(f"SELECT {_KEY_COLUMNS}, secret_hash FROM api_keys WHERE secret_hash = %s")
        row = self._read(lambda connection: connection.execute(statement, (secret_hash,)).fetchone())
        # The index found the row; compare again in constant time so a match never rests on
        # a comparison whose timing depends on how much of the hash agreed.
        if row is None or not hmac.compare_digest(str(row[7]).encode(), secret_hash.encode()):
            return None
        return key_from_row(self.dialect, row)

    def api_keys(self, tenant: str | None = None) -> list[ApiKey]:
        """Keys (of one tenant, or all), oldest first."""
        statement = f"SELECT {_KEY_COLUMNS} FROM api_keys"
        parameters: list[Any] = []
        if tenant is not None:
            statement += " WHERE tenant = %s"
            parameters.append(tenant)
        statement = self.dialect.sql(f"{statement} ORDER BY created_at, id{self.dialect.code_point}")
        rows = self._read(lambda connection: connection.execute(statement, parameters).fetchall())
        return [key_from_row(self.dialect, row) for row in rows]
