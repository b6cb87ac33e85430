"""The ``KeyStore`` protocol, backend by backend: API keys live beside the memories, hashed."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from memstrata import IdConflict, KeyRole
from memstrata.storage.base import ApiKey, KeyStore, TierStore
from tests.schema import undo_key_roles

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _keys(store: TierStore) -> KeyStore:
    assert hasattr(store, "add_api_key"), "every backend holds the REST server's API keys"
    return cast(KeyStore, store)


def test_keys_are_added_found_by_hash_listed_and_revoked(store: TierStore) -> None:
    keys = _keys(store)
    first = ApiKey(id="k1", tenant="acme", name="ci", created_at=T0)
    second = ApiKey(id="k2", tenant="acme", name="laptop", created_at=T0 + timedelta(seconds=1))
    other = ApiKey(id="k3", tenant="globex", name="prod", created_at=T0 - timedelta(days=1))
    keys.add_api_key(first, "hash-1")
    keys.add_api_key(second, "hash-2")
    keys.add_api_key(other, "hash-3")
    assert keys.key_for_hash("hash-2") == second
    assert keys.key_for_hash("nope") is None
    assert keys.api_keys() == [other, first, second]
    assert keys.api_keys("acme") == [first, second] and keys.api_keys("initech") == []
    assert keys.revoke_api_key("k1", T0 + timedelta(days=1))
    assert not keys.revoke_api_key("missing", T0)
    assert keys.revoke_api_key("k1", T0 + timedelta(days=9))  # the first revocation's time stays
    revoked = keys.key_for_hash("hash-1")  # revoked keys are still found, so callers can answer 403
    assert revoked is not None and not revoked.is_active and revoked.revoked_at == T0 + timedelta(days=1)
    assert [key.is_active for key in keys.api_keys("acme")] == [False, True]


@pytest.mark.parametrize(("key_id", "secret_hash"), [("k1", "fresh-hash"), ("fresh-id", "hash-1")])
def test_a_reused_id_or_hash_conflicts_and_writes_nothing(store: TierStore, key_id: str, secret_hash: str) -> None:
    keys = _keys(store)
    keys.add_api_key(ApiKey(id="k1", tenant="acme", name="ci", created_at=T0), "hash-1")
    with pytest.raises(IdConflict):
        keys.add_api_key(ApiKey(id=key_id, tenant="acme", name="dup", created_at=T0), secret_hash)
    assert [key.id for key in keys.api_keys()] == ["k1"]
    assert keys.key_for_hash("fresh-hash") is None


def test_each_key_keeps_its_role(store: TierStore) -> None:
    keys = _keys(store)
    for number, role in enumerate(KeyRole):
        keys.add_api_key(ApiKey(id=f"k{number}", tenant="acme", name=role, created_at=T0, role=role), f"hash-{role}")
    assert [key.role for key in keys.api_keys("acme")] == [KeyRole.READ, KeyRole.WRITE, KeyRole.ADMIN]
    for role in KeyRole:
        found = keys.key_for_hash(f"hash-{role}")
        assert found is not None and found.role is role


def test_keys_made_before_roles_become_admin(storage_url: str, open_tier_store: Callable[[], TierStore]) -> None:
    _keys(open_tier_store()).add_api_key(ApiKey(id="old", tenant="acme", name="ci", created_at=T0), "hash-old")
    _as_before_roles(storage_url)
    upgraded = _keys(open_tier_store())  # opening migrates
    found = upgraded.key_for_hash("hash-old")
    assert found is not None and found.role is KeyRole.ADMIN  # what it could do before: everything
    upgraded.add_api_key(ApiKey(id="new", tenant="acme", name="bot", created_at=T0, role=KeyRole.READ), "hash-new")
    assert [(key.id, key.role) for key in upgraded.api_keys()] == [("new", KeyRole.READ), ("old", KeyRole.ADMIN)]


def _as_before_roles(storage_url: str) -> None:
    """Take the store back to the schema before key roles (SQLite 16, PostgreSQL 19)."""
    if storage_url.startswith("sqlite:///"):
        with closing(sqlite3.connect(storage_url.removeprefix("sqlite:///"))) as connection, connection:
            undo_key_roles(connection)
            connection.execute("DELETE FROM schema_migrations WHERE version >= 17")
        return
    import psycopg

    with psycopg.connect(storage_url) as connection:
        connection.execute("ALTER TABLE api_keys DROP COLUMN role")
        connection.execute("DELETE FROM schema_migrations WHERE version >= 20")
