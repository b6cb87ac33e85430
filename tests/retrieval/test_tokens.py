"""The offline token counter against real BPE vocabularies (o200k_base, cl100k_base)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.retrieval.tokens import count_joined, count_tokens, truncate_to_tokens
from tests.conftest import LOCOMO

quicktok = pytest.importorskip("quicktok", reason="the reference BPE tokenizer ships in the test extra")
DOCS = Path(__file__).resolve().parents[2] / "docs"


def _blocks() -> list[str]:
    samples = json.loads(LOCOMO.read_text(encoding="utf-8"))
    lines = [
        f"{turn['speaker']}: {turn['text']}"
        for sample in samples
        for key, session in sample["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
    ]
    rng = random.Random(7)
    return ["\n".join(rng.sample(lines, 30)) for _ in range(100)]


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_dialogue_counts_are_within_six_percent_of_bpe(encoding: str) -> None:
    reference = quicktok.get_encoding(encoding)
    blocks = _blocks()
    estimated = sum(count_tokens(block) for block in blocks)
    actual = sum(len(reference.encode(block)) for block in blocks)
    assert abs(estimated - actual) / actual < 0.06


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_prose_counts_are_within_six_percent_of_bpe(encoding: str) -> None:
    reference = quicktok.get_encoding(encoding)
    text = "\n".join(path.read_text(encoding="utf-8") for path in sorted(DOCS.glob("*.md")))
    estimated, actual = count_tokens(text), len(reference.encode(text))
    assert abs(estimated - actual) / actual < 0.06


def test_edge_cases() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello") == 1
    assert count_tokens("1234567") == 3
    assert count_tokens("東京都") >= 2


def test_truncation_fits_and_keeps_a_prefix() -> None:
    text = "one two three four five six seven eight nine ten"
    cut = truncate_to_tokens(text, 4)
    assert text.startswith(cut) and count_tokens(cut) <= 4 and cut
    assert truncate_to_tokens(text, 100) == text
    assert truncate_to_tokens(text, 0) == ""


def test_underscores_count() -> None:
    assert count_tokens("_" * 80) >= 20
    assert count_tokens("__init__") >= 3


_LINE_CHARACTERS = st.characters(whitelist_categories=("L", "N", "P", "S", "Zs"), whitelist_characters="\n\t'_")


@given(st.lists(st.text(_LINE_CHARACTERS, max_size=40), max_size=8))
def test_a_joined_block_costs_exactly_what_counting_it_whole_costs(lines: list[str]) -> None:
    assert count_joined(lines) == count_tokens("\n".join(lines))
    trimmed = [line.strip() for line in lines if line.strip()]  # the shortcut's case: lines summed
    assert count_joined(trimmed) == count_tokens("\n".join(trimmed))
