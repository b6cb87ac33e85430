"""The ``KeyStore`` protocol, backend by backend: API keys live beside the memories, hashed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from memstrata import IdConflict
from memstrata.storage.base import ApiKey, KeyStore, TierStore

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
