"""ULID ids: 26 Crockford base32 characters, strictly increasing, unique across threads."""

from __future__ import annotations

import itertools
import re
import threading
from types import SimpleNamespace

import pytest

from memstrata import ids
from memstrata.ids import IdGenerator

CROCKFORD = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _decode(identifier: str) -> int:
    value = 0
    for char in identifier:
        value = value * 32 + ALPHABET.index(char)
    return value


def test_format() -> None:
    generator = IdGenerator()
    for _ in range(1000):
        identifier = generator.new()
        assert len(identifier) == 26
        assert CROCKFORD.match(identifier), identifier
        assert not set(identifier) & set("ILOU")


def test_timestamp_part_is_current_milliseconds() -> None:
    import time

    before = time.time_ns() // 1_000_000
    identifier = IdGenerator().new()
    after = time.time_ns() // 1_000_000
    assert before <= _decode(identifier) >> 80 <= after


def test_strictly_increasing_over_10k_calls() -> None:
    generator = IdGenerator()
    made = [generator.new() for _ in range(10_000)]
    assert all(a < b for a, b in itertools.pairwise(made))
    assert [_decode(x) for x in made] == sorted(_decode(x) for x in made)
    assert len(set(made)) == len(made)


def test_unique_across_threads() -> None:
    generator = IdGenerator()
    per_thread: list[list[str]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def work(out: list[str]) -> None:
        start.wait()
        for _ in range(2000):
            out.append(generator.new())

    threads = [threading.Thread(target=work, args=(out,)) for out in per_thread]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [identifier for out in per_thread for identifier in out]
    assert len(everything) == 16_000
    assert len(set(everything)) == 16_000
    for out in per_thread:
        assert all(a < b for a, b in itertools.pairwise(out))


def test_separate_generators_do_not_collide() -> None:
    made = {IdGenerator().new() for _ in range(2000)}
    assert len(made) == 2000


def test_never_goes_backwards_when_the_clock_does(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = iter([5_000_000_000_000, 4_000_000_000_000, 4_000_000_000_000, 6_000_000_000_000])
    monkeypatch.setattr(ids, "time", SimpleNamespace(time_ns=lambda: next(readings)))
    generator = IdGenerator()
    made = [generator.new() for _ in range(4)]
    assert made == sorted(made)
    assert len(set(made)) == 4
    assert [_decode(x) >> 80 for x in made] == [5_000_000, 5_000_000, 5_000_000, 6_000_000]
