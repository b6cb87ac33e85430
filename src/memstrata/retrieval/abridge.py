"""Abridged excerpts: what someone said, less the words a reader can do without.

``context()`` quotes its best-ranked excerpts word for word and abridges the ones after
them, so more of the memory fits the same budget (a LoCoMo turn keeps about three quarters
of its tokens). Pure and deterministic::

    >>> abridge("Wow, I just signed up for a pottery class yesterday! It is like therapy.")
    'just signed up for pottery class yesterday! like therapy.'

What goes: articles; the forms of "be" (but "been") and "do"; "I", "me" and "my", since
an excerpt line names its speaker; interjections ("oh", "wow", "yeah"); the intensifiers
"really", "very", "totally" and "so"; and "it", "that", "this", "there", "and", "to", "of".

What stays: every other word, in its order and with its punctuation, so negations
("not", "didn't", "never"), numbers, names, verbs and modal verbs stay; a word between two
capitalised ones ("Lord of the Rings", "Caroline and Melanie"); text in double quotes; a
word opening with a bracket or quote; and notes in square brackets that say what a
relative time phrase means (``[yesterday = 7 July 2023]``, from
:func:`memstrata.extraction.time_expressions.annotate`). A word that goes hands on its
closing punctuation (".", "!", "?", a bracket or quote) to the word before it. A text
that would lose every word is returned as it was.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from memstrata.extraction.gazetteers import word_set

#: Words an abridged excerpt leaves out (compared case-folded, with "'m", "'re", "'ve",
#: "'ll" and "'d" after them too: "I'm", "I've").
LEFT_OUT = word_set(
    """
    a an the
    am is are was were be do does did
    i me my
    oh wow yeah yep hey hi hello um uh hmm ah aw omg lol haha ok okay
    really very totally so
    it that this there and to of
    """
)
_CONTRACTIONS = ("'s", "'m", "'re", "'ve", "'ll", "'d")
# A time note as annotate() writes it, a double-quoted span, or any other run of non-spaces.
_PIECE = re.compile(r"\[[^\[\]]*? = [^\[\]]*\]|[\"“][^\"“”\n]*[\"”]|\S+")
_WORD = re.compile(r"^([^\w']*)(.*?)([^\w']*)$")
# Punctuation a left-out word hands on to the word before it: what ends a sentence or closes a span.
_HANDED_ON = frozenset(".!?)]}\"”'’")
_CLAUSE_MARKS = frozenset(".!?,;:")
CACHED_TEXT_CHARS = 2_000


def abridge(text: str) -> str:
    """``text`` without the words :data:`LEFT_OUT` names, as the module docstring describes."""
    if len(text) <= CACHED_TEXT_CHARS:
        return _abridged_cached(text)
    return _abridged(text)


@functools.lru_cache(maxsize=16_384)
def _abridged_cached(text: str) -> str:
    # Context assembly abridges the same candidate turns for query after query.
    return _abridged(text)


def _abridged(text: str) -> str:
    pieces = [_Piece.of(found) for found in _PIECE.findall(text)]
    dropped = [piece.is_left_out for piece in pieces]
    kept: list[str] = []
    for index, piece in enumerate(pieces):
        if not dropped[index] or _inside_a_name(pieces, dropped, index):
            kept.append(piece.text)
            continue
        closing = "".join(mark for mark in piece.trail if mark in _HANDED_ON)
        if closing and kept and not kept[-1].endswith(closing):
            kept[-1] += closing
    return " ".join(kept) if kept else text


class _Piece(NamedTuple):
    """A run of non-spaces as (leading marks, word, trailing marks); a note or quoted span is ``whole``."""

    text: str
    lead: str
    core: str
    trail: str
    whole: bool

    @classmethod
    def of(cls, text: str) -> _Piece:
        if text[0] in '["“' and len(text) > 1 and text[-1] in ']"”':
            return cls(text, text[0], text[1:-1], text[-1], whole=True)
        match = _WORD.match(text)
        assert match is not None  # every string matches: each group may be empty
        lead, core, trail = match.groups()
        return cls(text, lead, core, trail, whole=False)

    @property
    def is_left_out(self) -> bool:
        """Whether the word is one :data:`LEFT_OUT` names; "(the" or "[a" stays, so brackets stay paired."""
        if self.whole or self.lead or not self.core:
            return False
        folded = self.core.casefold().replace("’", "'")
        if folded in LEFT_OUT:
            return True
        return any(folded.endswith(ending) and folded[: -len(ending)] in LEFT_OUT for ending in _CONTRACTIONS)

    @property
    def is_capitalised(self) -> bool:
        return self.core[:1].isupper()

    @property
    def ends_a_clause(self) -> bool:
        return not _CLAUSE_MARKS.isdisjoint(self.trail)


def _inside_a_name(pieces: list[_Piece], dropped: list[bool], index: int) -> bool:
    """Whether the word at ``index`` joins two capitalised words of one clause ("Bank of America")."""
    if pieces[index].ends_a_clause:
        return False
    before = next((pieces[i] for i in range(index - 1, -1, -1) if not dropped[i]), None)
    after = next((pieces[i] for i in range(index + 1, len(pieces)) if not dropped[i]), None)
    if before is None or after is None:
        return False
    return before.is_capitalised and after.is_capitalised and not before.ends_a_clause
