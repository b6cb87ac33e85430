"""API keys: secrets, hashes, creation, lookup and revocation (on the SQLite key store)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstrata import InvalidInput, NotFound
from memstrata.config import load_settings
from memstrata.server.keys import (
    ClosableKeyStore,
    create_key,
    find_key,
    hash_secret,
    list_keys,
    new_secret,
    open_key_store,
    revoke_key,
)


@pytest.fixture
def store(home: Path) -> Iterator[ClosableKeyStore]:
    settings = load_settings(home=home)
    opened = open_key_store(settings.resolved_storage_url, settings)
    yield opened
    opened.close()


def test_secrets_are_prefixed_random_and_urlsafe() -> None:
    secrets = {new_secret() for _ in range(100)}
    assert len(secrets) == 100
    assert all(re.fullmatch(r"msk_[A-Za-z0-9_-]{43}", secret) for secret in secrets)


def test_the_hash_is_sha256_hex() -> None:
    assert hash_secret("msk_abc") == hashlib.sha256(b"msk_abc").hexdigest()


def test_create_then_find_then_revoke(store: ClosableKeyStore) -> None:
    key, secret = create_key(store, tenant="acme", name="bot")
    assert (key.tenant, key.name, key.is_active) == ("acme", "bot", True)
    assert find_key(store, secret) == key
    assert find_key(store, secret + "x") is None
    assert find_key(store, "") is None
    assert find_key(store, "x" * 10_000) is None
    revoke_key(store, key.id)
    found = find_key(store, secret)
    assert found is not None and not found.is_active


def test_revoking_twice_keeps_the_first_time(store: ClosableKeyStore) -> None:
    key, _ = create_key(store, tenant="acme")
    revoke_key(store, key.id, now=datetime(2025, 1, 1, tzinfo=UTC))
    revoke_key(store, key.id, now=datetime(2026, 1, 1, tzinfo=UTC))
    [listed] = list_keys(store)
    assert listed.revoked_at == datetime(2025, 1, 1, tzinfo=UTC)


def test_revoking_an_unknown_key_is_not_found(store: ClosableKeyStore) -> None:
    with pytest.raises(NotFound, match="keys list"):
        revoke_key(store, "no-such-key")


def test_list_by_tenant_oldest_first(store: ClosableKeyStore) -> None:
    first, _ = create_key(store, tenant="acme", now=datetime(2025, 1, 1, tzinfo=UTC))
    other, _ = create_key(store, tenant="globex", now=datetime(2025, 1, 2, tzinfo=UTC))
    second, _ = create_key(store, tenant="acme", now=datetime(2025, 1, 3, tzinfo=UTC))
    assert list_keys(store, "acme") == [first, second]
    assert list_keys(store) == [first, other, second]
    assert list_keys(store, "nobody") == []


@pytest.mark.parametrize("tenant", ["", "a/b", "with space", "x" * 65])
def test_bad_tenants_are_refused(store: ClosableKeyStore, tenant: str) -> None:
    with pytest.raises(InvalidInput, match="tenant"):
        create_key(store, tenant=tenant)
    assert list_keys(store) == []


@pytest.mark.parametrize("name", ["", "  ", "a\x00b"])
def test_bad_names_are_refused(store: ClosableKeyStore, name: str) -> None:
    with pytest.raises(InvalidInput, match="name"):
        create_key(store, tenant="acme", name=name)


def test_a_key_may_name_the_agent_it_acts_as(store: ClosableKeyStore) -> None:
    key, secret = create_key(store, tenant="acme", name="ops", agent_id="deploy-bot")
    assert key.agent_id == "deploy-bot"
    found = find_key(store, secret)
    assert found == key and found.agent_id == "deploy-bot"
    assert create_key(store, tenant="acme")[0].agent_id is None


@pytest.mark.parametrize("agent_id", ["", " ", "a\x00b", "x" * 252])
def test_an_agent_the_key_could_not_act_as_is_refused(store: ClosableKeyStore, agent_id: str) -> None:
    with pytest.raises(InvalidInput, match="agent_id"):
        create_key(store, tenant="acme", agent_id=agent_id)
    assert list_keys(store) == []
