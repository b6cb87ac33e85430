"""Benchmark data: LoCoMo loaded from the shared file, and the synthetic turn generator."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memstrata.bench.datasets import (
    DialogTurn,
    Question,
    find_locomo,
    load_locomo,
    parse_session_date,
    synthetic_texts,
)
from memstrata.errors import InvalidInput
from tests.conftest import LOCOMO


@pytest.fixture(scope="module")
def locomo() -> tuple[list[DialogTurn], list[Question]]:
    """The real LoCoMo file, parsed once for the module."""
    assert LOCOMO.is_file(), f"the shared dataset is missing: {LOCOMO}"
    return load_locomo(LOCOMO)


def test_locomo_sizes(locomo: tuple[list[DialogTurn], list[Question]]) -> None:
    turns, questions = locomo
    assert len(turns) == 5882
    assert len(questions) == 1986
    assert len({turn.conversation for turn in turns}) == 10
    assert len({(turn.conversation, turn.dia_id) for turn in turns}) == len(turns)


def test_locomo_session_dates_are_aware_utc(locomo: tuple[list[DialogTurn], list[Question]]) -> None:
    turns, _ = locomo
    for turn in turns:
        assert turn.timestamp.tzinfo is not None
        assert turn.timestamp.utcoffset() == timedelta(0)
    assert parse_session_date("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_session_date(" 12:05 am on 1 January, 2024 ") == datetime(2024, 1, 1, 0, 5, tzinfo=UTC)
    with pytest.raises(InvalidInput):
        parse_session_date("yesterday at noon")


def test_locomo_turns_follow_the_file(locomo: tuple[list[DialogTurn], list[Question]]) -> None:
    turns, _ = locomo
    raw = json.loads(LOCOMO.read_text(encoding="utf-8"))
    first = raw[0]
    conversation = first["conversation"]
    session = conversation["session_1"]
    loaded = [turn for turn in turns if turn.conversation == str(first["sample_id"]) and turn.session == "session_1"]
    assert [turn.dia_id for turn in loaded] == [item["dia_id"] for item in session]
    assert [turn.speaker for turn in loaded] == [item["speaker"] for item in session]
    assert {turn.timestamp for turn in loaded} == {parse_session_date(conversation["session_1_date_time"])}


def test_locomo_image_captions_are_appended(locomo: tuple[list[DialogTurn], list[Question]]) -> None:
    turns, _ = locomo
    raw = json.loads(LOCOMO.read_text(encoding="utf-8"))
    by_key = {(turn.conversation, turn.dia_id): turn for turn in turns}
    captioned = 0
    for sample in raw:
        for key, session in sample["conversation"].items():
            if not key.startswith("session_") or not isinstance(session, list):
                continue
            for item in session:
                text = by_key[(str(sample["sample_id"]), item["dia_id"])].text
                if item.get("blip_caption"):
                    captioned += 1
                    assert text == f"{item['text']} [shared an image: {item['blip_caption']}]"
                else:
                    assert text == item["text"]
    assert captioned > 0


def test_locomo_category_counts(locomo: tuple[list[DialogTurn], list[Question]]) -> None:
    _, questions = locomo
    assert Counter(question.category for question in questions) == {1: 282, 2: 321, 3: 96, 4: 841, 5: 446}
    assert all(question.answer for question in questions if question.category != 5)
    assert sum(1 for question in questions if question.evidence) > 1900


def test_find_locomo_with_a_bad_path(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput):
        find_locomo(tmp_path / "missing.json")
    with pytest.raises(InvalidInput):
        find_locomo(tmp_path)  # a directory is not the file
    assert find_locomo(LOCOMO) == LOCOMO


def test_synthetic_texts_are_deterministic_and_distinct() -> None:
    texts = list(synthetic_texts(500))
    assert len(texts) == 500
    assert len(set(texts)) == 500
    assert list(synthetic_texts(500)) == texts
    assert list(synthetic_texts(50)) == texts[:50]
    assert list(synthetic_texts(50, seed=8)) != texts[:50]
    assert all(text.strip() and text.endswith("euros.") for text in texts)
    assert list(synthetic_texts(0)) == []
