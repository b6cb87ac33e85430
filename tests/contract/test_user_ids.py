"""``Store.user_ids`` and ``Memory.users``, backend by backend: the users whose id starts with a prefix."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memstrata import InvalidInput, Memory, Role, Scope, Turn
from memstrata.storage.base import TierStore

MODEL = "contract-model"
# Neighbours of "acme/" in every order a collation might use: case, punctuation, a shorter
# or longer tenant name, LIKE wildcards, and ids past "/" in code point order.
USERS = [
    "acme/ana",
    "acme/bea",
    "acme/Zed",
    "acme/é",
    "acme/\U0010ffff",
    "acme",
    "acme-corp/ana",
    "acme./ana",
    "acmf/ana",
    "ACME/ana",
    "acm/ana",
    "acme0/ana",
    "ac%/ana",
    "ac_e/ana",
    "globex/ana",
]


def _add(store: TierStore, user_ids: list[str], turns_each: int = 2) -> None:
    store.insert_turns(
        [
            Turn(id=f"{user}#{n}", user_id=user, role=Role.USER, content=f"note {n}", created_at=datetime.now(UTC))
            for user in user_ids
            for n in range(turns_each)
        ],
        None,
        MODEL,
    )


def test_an_empty_store_has_no_users(store: TierStore) -> None:
    assert store.user_ids("") == []
    assert store.user_ids("acme/") == []


def test_the_prefix_selects_exactly_its_users_once_each_in_code_point_order(store: TierStore) -> None:
    _add(store, USERS)
    assert store.user_ids("acme/") == ["acme/Zed", "acme/ana", "acme/bea", "acme/é", "acme/\U0010ffff"]
    assert store.user_ids("") == sorted(USERS)
    assert store.user_ids("acme") == sorted(user for user in USERS if user.startswith("acme"))
    assert store.user_ids("acme/ana") == ["acme/ana"]
    assert store.user_ids("acme/anabel") == []
    assert store.user_ids("zzz/") == []


def test_like_wildcards_and_escapes_in_the_prefix_match_only_themselves(store: TierStore) -> None:
    _add(store, [*USERS, "a\\b/x", "a\\\\b/x"])
    assert store.user_ids("ac%") == ["ac%/ana"]
    assert store.user_ids("ac_") == ["ac_e/ana"]
    assert store.user_ids("%") == []
    assert store.user_ids("_") == []
    assert store.user_ids("a\\") == ["a\\\\b/x", "a\\b/x"]


def test_users_whose_turns_are_all_gone_are_not_listed(store: TierStore) -> None:
    _add(store, ["acme/ana", "acme/bea"])
    store.forget(Scope("acme/ana"))
    store.delete("acme/bea#0", "acme/bea")
    assert store.user_ids("acme/") == ["acme/bea"]
    store.delete("acme/bea#1", "acme/bea")
    assert store.user_ids("acme/") == []


def test_memory_users_lists_by_prefix(memory: Memory) -> None:
    for user in ("acme/ana", "acme/bea", "globex/ana"):
        memory.add("I moved to Lisbon", user_id=user)
    assert memory.users() == ["acme/ana", "acme/bea", "globex/ana"]
    assert memory.users("acme/") == ["acme/ana", "acme/bea"]
    assert memory.users(prefix=" ") == []


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        (None, "must be a string"),
        (b"acme/", "must be a string"),
        ("x" * 257, "at most 256"),
        ("acme\x00", "NUL"),
        ("acme\ud800", "lone surrogate"),
    ],
)
def test_memory_users_refuses_a_bad_prefix(memory: Memory, prefix: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        memory.users(prefix)  # type: ignore[arg-type]
