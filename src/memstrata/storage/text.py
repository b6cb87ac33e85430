"""How derived items read as text: profile keys and cells as a reader (and full-text search) sees them."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any

from memstrata.models import Cell

_WORD = re.compile(r"\w+")


def readable_key(key: str) -> str:
    """A profile key or attribute as a reader would write it: "favourite:color" → "favourite color"."""
    return " ".join(key.replace(":", " ").replace("_", " ").split())


def cell_text(cell: Cell) -> str:
    """A cell as stored for search and shown in ``context()``: whose it is, what about, its value, its sentence.

    "Caroline · plan: show my paintings — I'm putting together an LGBTQ art show…". The
    subject names whose fact it is. The label is the attribute's parts as words
    ("favourite:color" → "favourite color"), less the trailing parts that only repeat the
    value's words ("likes" of "likes:jazz", "pet dog" of "pet:dog:max" for "Max"); the cell's
    kind when nothing is left. The sentence is left out when it is empty or only the value.
    """
    return _cell_text(cell.kind, cell.subject, cell.attribute, cell.value, cell.content)


def cell_gist(cell: Cell, speakers: Collection[str] = ()) -> str:
    """What a cell's vector is made from: its subject, label and value as ``cell_text`` reads them; no sentence.

    "allergy: peanuts", "Sara · instrument: violin". The subject is left out when it is the
    user or one of ``speakers`` (the names the user's turns were said under): a query is
    embedded without those names too, as they say whose turns, not what about. The sentence
    is left out: it says the rest of its turn as well ("I moved to Lisbon in May and I'm
    allergic to peanuts"), which that turn's own vector stands for.
    """
    head = f"{_label(cell.kind, cell.attribute, cell.value)}: {cell.value}"
    subject = cell.subject.strip()
    people = {"", "user", *(speaker.strip().casefold() for speaker in speakers)}
    return head if subject.casefold() in people else f"{subject} · {head}"


def cell_text_of(kind: str, subject: str, attribute: str, value: str, sentence: str) -> str:
    """``cell_text`` of a cell given by its columns (a store rewriting one in SQL has no ``Cell``)."""
    return _cell_text(kind, subject, attribute, value, sentence)


#: What ``stale_cell_texts`` reads, from ``cells c JOIN derived d ON d.id = c.id``.
CELL_TEXT_COLUMNS = "c.id, c.kind, c.subject, c.attribute, c.value, c.content, d.content"


#: Which stored cells a profile trait is read from, as ``extraction.cells.profile_updates`` picks them
#: (an SQL condition on ``cells``, the same in both dialects).
PROFILE_CELLS = "single_valued AND kind IN ('fact', 'preference')"


def supersession(old_id: str, new_id: str | None) -> dict[str, str | None]:
    """The audit detail of a supersession: the two cells' ids, never what they say."""
    return {"old": old_id, "new": new_id}


def late_supersession(cell: Cell) -> dict[str, str | None]:
    """The audit detail of a cell stored already superseded (its turn was processed after a newer one's)."""
    return supersession(cell.id, cell.superseded_by)


def stale_cell_texts(rows: Sequence[Sequence[Any]]) -> list[tuple[str, str]]:
    """(text, cell id) for each row of ``CELL_TEXT_COLUMNS`` whose stored text is not what ``cell_text`` makes now.

    Cells stored by an older version keep the text it wrote until ``rebuild_fulltext``
    rewrites them with these.
    """
    found = []
    for cell_id, kind, subject, attribute, value, content, stored in rows:
        text = _cell_text(str(kind), str(subject), str(attribute), str(value), str(content))
        if text != stored:
            found.append((text, str(cell_id)))
    return found


def _cell_text(kind: str, subject: str, attribute: str, value: str, sentence: str) -> str:
    said = f" — {sentence}" if sentence.strip() and sentence.strip() != value.strip() else ""
    return f"{subject} · {_label(kind, attribute, value)}: {value}{said}"


def _label(kind: str, attribute: str, value: str) -> str:
    """The attribute's parts as words, less the trailing ones that only repeat the value's; the kind if none is left."""
    parts = [readable_key(part) for part in attribute.split(":")]
    value_words = set(_WORD.findall(value.casefold()))
    while len(parts) > 1 and set(_WORD.findall(parts[-1].casefold())) <= value_words:
        parts.pop()
    return " ".join(part for part in parts if part) or kind
