"""Abridged excerpts: what someone said, less the words a reader can do without.

Pure, deterministic and linear in the text's length::

    >>> abridge("Wow, I just signed up for a pottery class yesterday! It is like therapy.")
    'just signed up for pottery class yesterday! like therapy.'

The words of :data:`LEFT_OUT` go; names, numbers, negations, quoted text, date notes and
sentences without :data:`ENGLISH_MARKERS` stay. See docs/retrieval.md#abridged-excerpts.
"""

from __future__ import annotations

import functools
import itertools
import re
from typing import NamedTuple

from memstrata.extraction.gazetteers import word_set

#: Words an abridged excerpt leaves out (compared case-folded, and with "'s", "'m", "'re" or
#: "'ve" after them: "I'm", "it's").
LEFT_OUT = word_set(
    """
    a an the
    am is are was were be
    i me my
    oh wow yeah yep hey hi hello um uh hmm ah aw omg lol haha
    really very totally so
    it that this there and to of
    """
)
_CONTRACTIONS = ("'s", "'m", "'re", "'ve")
_JOINING = frozenset({"and", "to", "of"})
_BEING = word_set("am is are was were be")
_SPEAKER = frozenset({"i", "me"})
# Words that end a clause as a verb's object or complement ("I get it.", "I'd love to.", "been there").
_OBJECTS = frozenset({"it", "this", "that", "there", "to"})
# A sentence left with one of these alone says nothing ("How?" from "How was it?"): it is kept whole.
_HOLLOW = word_set(
    """
    what where when who why how which
    do does did am is are was were can could will would should have has had
    """
)
_PAIRING = frozenset({"and", "or"})
#: English function words rarely spelled alike in other languages that use the Latin script
#: ("a", "no", "me", "in", "on", "do", "so", "to", "is", "was", "will", "had", "of", "for",
#: "at" and a lower-case "i" are words in Spanish, Portuguese, Italian, German, Dutch,
#: Danish or Polish too; "I" counts as written). A sentence with none of them is not read
#: as English, and the abridger, whose rules are English, leaves it whole.
ENGLISH_MARKERS = word_set(
    """
    the and are were been it that this you your we our they their my
    with have has be what just not but would can from there here about
    these those how who why when where which some if than because
    yeah yep really very totally
    """
)
# A time note as annotate() writes it or a double-quoted span (each with the marks after it), or
# any other run of non-spaces.
_PIECE = re.compile(
    r"(?P<note>\[[^\[\]]*? = [^\[\]]*\][^\s\w\[\"“]*)"
    r"|(?P<quote>[\"“][^\"“”\n]*[\"”][^\s\w\[\"“]*)"
    r"|(?P<word>\S+)"
)
_WORD = re.compile(r"^([^\w']*)(.*?)([^\w']*)$")
_SENTENCE_ENDS = frozenset(".!?")
_CLOSERS = frozenset(")]}\"”'’")
_CLAUSE_MARKS = frozenset(".!?,;:")
CACHED_TEXT_CHARS = 2_000
#: Longer texts are returned whole: over about 10,000 tokens, an excerpt outgrows the budgets
#: abridging is for, and each call would cost milliseconds per thousand words again.
LONGEST_ABRIDGED_CHARS = 40_000


def abridge(text: str) -> str:
    """``text`` less the words a reader can do without, as the module docstring describes."""
    if len(text) <= CACHED_TEXT_CHARS:
        return _abridged_cached(text)
    return _abridged(text) if len(text) <= LONGEST_ABRIDGED_CHARS else text


@functools.lru_cache(maxsize=16_384)
def _abridged_cached(text: str) -> str:
    # Context assembly abridges the same candidate turns for query after query.
    return _abridged(text)


class _Piece(NamedTuple):
    """A run of non-spaces as (leading marks, word, trailing marks); a note or quoted span is ``whole``."""

    text: str
    lead: str
    core: str
    folded: str
    trail: str
    whole: bool

    @classmethod
    def of(cls, match: re.Match[str]) -> _Piece:
        text = match.group(0)
        if match.lastgroup != "word":
            closed = max(text.rfind("]"), text.rfind('"'), text.rfind("”")) + 1
            return cls(text, "", text, "", text[closed:], whole=True)
        parts = _WORD.match(text)
        assert parts is not None  # every string matches: each group may be empty
        lead, core, trail = parts.groups()
        return cls(text, lead, core, core.casefold().replace("’", "'"), trail, whole=False)

    @property
    def base(self) -> str:
        """The word without a contraction of :data:`LEFT_OUT` after it ("i'm" → "i")."""
        for ending in _CONTRACTIONS:
            if self.folded.endswith(ending) and self.folded[: -len(ending)] in LEFT_OUT:
                return self.folded[: -len(ending)]
        return self.folded

    @property
    def is_capitalised(self) -> bool:
        return self.core[:1].isupper()

    @property
    def ends_a_clause(self) -> bool:
        return not _CLAUSE_MARKS.isdisjoint(self.trail)

    @property
    def ends_a_sentence(self) -> bool:
        return not _SENTENCE_ENDS.isdisjoint(self.trail)


def _abridged(text: str) -> str:
    pieces = [_Piece.of(match) for match in _PIECE.finditer(text)]
    if not pieces:
        return text
    listed = [_listed(piece, index == 0 or pieces[index - 1].ends_a_sentence) for index, piece in enumerate(pieces)]
    before = _nearest_kept(listed, range(len(pieces)))
    after = _nearest_kept(listed, range(len(pieces) - 1, -1, -1))
    clauses = list(itertools.accumulate((piece.ends_a_clause for piece in pieces[:-1]), initial=0))
    dropped = [
        listed[index] and not _stays(pieces, index, before[index], after[index], clauses)
        for index in range(len(pieces))
    ]
    _keep_whole_sentences(pieces, dropped)
    _keep_unread_sentences(pieces, dropped)
    kept: list[str] = []
    for piece, drop in zip(pieces, dropped, strict=True):
        if not drop:
            kept.append(piece.text)
        elif kept:
            kept[-1] = _handed_on(kept[-1], piece.trail)
        elif not _CLOSERS.isdisjoint(piece.trail):
            kept.append(piece.text)  # nothing before to take its bracket or quote: it stays
    return " ".join(kept)


def _listed(piece: _Piece, opens_a_sentence: bool) -> bool:
    """Whether the piece is a word of :data:`LEFT_OUT`, written as such a word is.

    Capitalised, it must be "I" (or "I'm", "I've") or open a sentence ("The", "It's"):
    "an A" and "work in IT" keep their letters. "(the" or "[a" stays, so brackets stay paired.
    """
    if piece.whole or piece.lead or not piece.core or piece.base not in LEFT_OUT:
        return False
    rest = piece.core[1:]
    if piece.base == "i":
        return rest[:1] in ("", "'", "’")
    return not piece.is_capitalised or (opens_a_sentence and rest == rest.lower())


def _nearest_kept(listed: list[bool], order: range) -> list[int | None]:
    """For each index, the nearest index in ``order`` before it that is not listed (None if none)."""
    nearest: list[int | None] = [None] * len(listed)
    last: int | None = None
    for index in order:
        nearest[index] = last
        if not listed[index]:
            last = index
    return nearest


def _stays(pieces: list[_Piece], index: int, before: int | None, after: int | None, clauses: list[int]) -> bool:
    """Whether a listed word stays for one of the module's reasons: a name, a number, a pair, a clause end.

    ``clauses[i]`` counts the pieces before ``i`` that end a clause, so two pieces with the same
    count are in one clause.
    """
    piece = pieces[index]
    word = piece.base
    if word in _BEING and piece.folded == word and (piece.ends_a_clause or index == len(pieces) - 1):
        return True  # "who I am.": the verb a clause ends on
    if piece.folded in _SPEAKER and index > 0 and pieces[index - 1].folded in _PAIRING:
        return True  # "my mom and I"
    if word in _OBJECTS and piece.folded == word and piece.ends_a_clause and before == index - 1:
        return True  # "I get it.": the object a clause ends on, right after the word that takes it
    if word in _JOINING and any(
        near is not None and any(character.isdigit() for character in pieces[near].core) for near in (before, after)
    ):
        return True  # "9 to 5"
    if piece.ends_a_clause or before is None or after is None:
        return False
    first, last = pieces[before], pieces[after]
    # "Bank of America", but not "How was it? Where": the two names must be in one clause.
    return first.is_capitalised and last.is_capitalised and clauses[before] == clauses[after]


def _keep_whole_sentences(pieces: list[_Piece], dropped: list[bool]) -> None:
    """Keep every word of a sentence that would otherwise lose them all ("Is it? No." stays) or keep
    only a question word or an auxiliary ("How was it?", not "How?"; "It really is.", not "is.")."""
    start = 0
    for index, piece in enumerate(pieces):
        if piece.ends_a_sentence or index == len(pieces) - 1:
            left = [pieces[at] for at in range(start, index + 1) if not dropped[at]]
            if not left or (len(left) == 1 and left[0].folded in _HOLLOW and index > start):
                dropped[start : index + 1] = [False] * (index + 1 - start)
            start = index + 1
    # "and I": the pairing word stays with the pronoun it introduces.
    for index in range(1, len(pieces)):
        if not dropped[index] and pieces[index].folded in _SPEAKER and pieces[index - 1].folded in _PAIRING:
            dropped[index - 1] = False


def _keep_unread_sentences(pieces: list[_Piece], dropped: list[bool]) -> None:
    """Keep every word of a sentence with none of :data:`ENGLISH_MARKERS`: in another language,
    "a" or "me" is a word the sentence needs ("soy alérgica a los cacahuetes")."""
    start = 0
    english = False
    for index, piece in enumerate(pieces):
        english = english or piece.folded.partition("'")[0] in ENGLISH_MARKERS or piece.core.partition("'")[0] == "I"
        if piece.ends_a_sentence or index == len(pieces) - 1:
            if not english:
                dropped[start : index + 1] = [False] * (index + 1 - start)
            start, english = index + 1, False


def _handed_on(previous: str, trail: str) -> str:
    """``previous`` with the closing marks of the word after it that went: brackets, quotes, a sentence's end."""
    for mark in trail:
        if mark in _CLOSERS:
            previous += mark
        elif mark in _SENTENCE_ENDS and previous[-1:] not in _SENTENCE_ENDS:
            previous = previous.rstrip(",;:") + mark
    return previous
