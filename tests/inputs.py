"""Awkward inputs the bad-input and backend-limit tests share."""

from __future__ import annotations

import random
import string


def nested(levels: int) -> dict[str, object]:
    """A mapping ``levels`` deep: ``{"a": {"a": … {}}}``."""
    value: dict[str, object] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


def distinct_words(count: int, seed: int) -> str:
    """``count`` random ten-letter words: text whose full-text index grows with every word."""
    generator = random.Random(seed)
    return " ".join("".join(generator.choices(string.ascii_lowercase, k=10)) for _ in range(count))
