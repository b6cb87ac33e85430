"""The SQLite KeyStore: migration 3, hashed secrets only, durable writes, revocation."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstrata import IdConflict
from memstrata.storage.base import ApiKey
from memstrata.storage.sqlite.migrations import MIGRATIONS
from memstrata.storage.sqlite.store import SQLiteStore

WHEN = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
HASH = "a" * 64


def _key(key_id: str = "k1", tenant: str = "acme") -> ApiKey:
    return ApiKey(id=key_id, tenant=tenant, name="bot", created_at=WHEN)


def test_migration_3_creates_the_api_keys_table(tmp_path: Path) -> None:
    assert [m.version for m in MIGRATIONS][:3] == [1, 2, 3]
    SQLiteStore(tmp_path / "store.db").close()
    connection = sqlite3.connect(tmp_path / "store.db")
    try:
        columns = {row[1]: (row[2], row[3]) for row in connection.execute("PRAGMA table_info(api_keys)")}
    finally:
        connection.close()
    assert columns == {
        "id": ("TEXT", 0),
        "tenant": ("TEXT", 1),
        "name": ("TEXT", 1),
        "secret_hash": ("TEXT", 1),
        "created_at": ("TEXT", 1),
        "revoked_at": ("TEXT", 0),
        "agent_id": ("TEXT", 0),  # migration 16's
        "role": ("TEXT", 1),  # migration 17's
    }


def test_a_version_2_database_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    connection = sqlite3.connect(path)
    connection.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT)"
    )
    for migration in MIGRATIONS[:2]:
        connection.executescript(migration.sql)
        connection.execute("INSERT INTO schema_migrations VALUES (?, ?, 'then')", (migration.version, migration.name))
    connection.commit()
    connection.close()
    store = SQLiteStore(path)
    store.add_api_key(_key(), HASH)
    assert store.api_keys() == [_key()]
    store.close()


def test_keys_survive_reopening_and_only_the_hash_is_stored(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SQLiteStore(path)
    store.add_api_key(_key(), HASH)
    store.close()
    reopened = SQLiteStore(path)
    assert reopened.key_for_hash(HASH) == _key()
    reopened.close()
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("SELECT secret_hash FROM api_keys").fetchall() == [(HASH,)]
    finally:
        connection.close()


def test_ids_and_hashes_must_be_new(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "store.db")
    store.add_api_key(_key("k1"), HASH)
    with pytest.raises(IdConflict):
        store.add_api_key(_key("k1"), "b" * 64)
    with pytest.raises(IdConflict):
        store.add_api_key(_key("k2"), HASH)
    assert store.api_keys() == [_key("k1")]
    store.close()


def test_lookup_and_revocation(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "store.db")
    store.add_api_key(_key("k1"), HASH)
    store.add_api_key(_key("k2", "globex"), "b" * 64)
    assert store.key_for_hash("c" * 64) is None
    assert store.key_for_hash(HASH[:-1]) is None
    assert store.revoke_api_key("k1", WHEN) is True
    assert store.revoke_api_key("missing", WHEN) is False
    revoked = store.key_for_hash(HASH)
    assert revoked is not None and revoked.revoked_at == WHEN and not revoked.is_active
    assert [key.id for key in store.api_keys("globex")] == ["k2"]
    store.close()
