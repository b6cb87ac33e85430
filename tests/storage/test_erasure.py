"""The salted hash that stands for a forgotten user id."""

from __future__ import annotations

import secrets

from memstrata.storage.erasure import PSEUDONYM_PREFIX, pseudonym


def test_the_hash_is_stable_for_one_salt_and_differs_between_salts() -> None:
    salt, other = secrets.token_hex(32), secrets.token_hex(32)
    first = pseudonym(salt, "ana.pereira@example.com")
    assert first == pseudonym(salt, "ana.pereira@example.com")
    assert first != pseudonym(other, "ana.pereira@example.com")
    assert first != pseudonym(salt, "ana.pereira@example.org")
    assert first.startswith(PSEUDONYM_PREFIX) and "ana" not in first
    assert pseudonym(salt, "\udcff") != first  # a lone surrogate from a header still hashes
