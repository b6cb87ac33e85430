"""How a cell reads when stored for search and shown in context(): whose, what about, its value, its sentence."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memstrata.models import Cell
from memstrata.storage.text import cell_text


def _cell(attribute: str, value: str, content: str, *, subject: str = "Caroline", kind: str = "plan") -> Cell:
    return Cell(
        id="c",
        user_id="u",
        kind=kind,
        subject=subject,
        attribute=attribute,
        value=value,
        content=content,
        salience=0.5,
        valid_from=datetime(2024, 1, 1, tzinfo=UTC),
        source_turn_id="t",
    )


@pytest.mark.parametrize(
    ("attribute", "value", "content", "expected"),
    [
        # A key after the colon that only repeats the value's words is left out.
        (
            "plan:show my paintings",
            "show my paintings",
            "I'm gonna show my paintings.",
            "Caroline · plan: show my paintings — I'm gonna show my paintings.",
        ),
        ("likes:mozart", "Mozart", "I'm a fan of Mozart.", "Caroline · likes: Mozart — I'm a fan of Mozart."),
        (
            "plan:transgender conference",
            "a transgender conference this month",
            "I'm going.",
            "Caroline · plan: a transgender conference this month — I'm going.",
        ),
        # A key that says something the value does not is kept, as words.
        (
            "favourite:color",
            "green",
            "My favourite colour is green.",
            "Caroline · favourite color: green — My favourite colour is green.",
        ),
        ("home_town", "Porto", "I grew up in Porto.", "Caroline · home town: Porto — I grew up in Porto."),
        # Keys of several parts keep what the value does not say.
        ("pet:dog:max", "Max", "Our dog Max is two.", "Caroline · pet dog: Max — Our dog Max is two."),
        (
            "event:may 7:trip to paris",
            "trip to Paris",
            "We leave on May 7.",
            "Caroline · event may 7: trip to Paris — We leave on May 7.",
        ),
        (
            "relationship:friend:marta",
            "Marta",
            "Marta is my friend.",
            "Caroline · relationship friend: Marta — Marta is my friend.",
        ),
        # A sentence that is empty or only the value is not repeated.
        ("origin", "Sweden", "  ", "Caroline · origin: Sweden"),
        ("origin", "Sweden", "Sweden", "Caroline · origin: Sweden"),
        # No attribute at all: the cell's kind labels it.
        ("", "call mom", "I must call mom.", "Caroline · plan: call mom — I must call mom."),
    ],
)
def test_cell_text(attribute: str, value: str, content: str, expected: str) -> None:
    assert cell_text(_cell(attribute, value, content)) == expected


def test_the_subject_leads_even_when_it_is_the_default() -> None:
    cell = _cell("location", "Lisbon", "I live in Lisbon.", subject="user", kind="fact")
    assert cell_text(cell) == "user · location: Lisbon — I live in Lisbon."
