"""Speakers' names in a query: the one it asks about, and the query without them for the embedder."""

from __future__ import annotations

import re
from collections.abc import Sequence

from memstrata.extraction.gazetteers import CAPITALISED_STOPWORDS
from memstrata.models import Role

#: Names that are also ordinary words ("Will", "May", "user") stay in a query: the word may be meant.
COMMON_WORDS = CAPITALISED_STOPWORDS | frozenset(role.value for role in Role)


def mentioned_speaker(query: str, speakers: Sequence[str], *, by_alias: bool = False) -> str | None:
    """The one speaker whose name the query contains as a word; ``None`` if none or several.

    A name that is also a common word ("Will", "May") counts only as written, capitalised,
    and not as the query's first word: "what will happen?" names no one. With ``by_alias``,
    a query naming no speaker may name one by another form of the name (:func:`aliases`).
    """
    found = {name for name in set(speakers) if re.search(r"\w", name) and _names(query, name.strip())}
    if not found and by_alias:
        found = set(aliases(query, speakers).values())
    return found.pop() if len(found) == 1 else None


#: A stored name this short may be a clipped form of the name a query uses ("Mel" for
#: "Melanie", "Caro" for "Caroline"), and a query's name this short a clip of a stored one.
CLIPPED_NAME_LETTERS = range(3, 6)
_QUERY_WORD = re.compile(r"(?<![\w'’-])[^\W\d_][\w'’.-]*(?<![.'’-])")


def aliases(query: str, speakers: Sequence[str]) -> dict[str, str]:
    """The query's words that name one speaker by another form of the name, each with that speaker.

    A guess ("Melbourne" may be taken for "Mel"): use an alias only to add candidates and lift
    a speaker's turns, never to leave anything out. See docs/retrieval.md#1-candidates.
    """
    names = {name.strip().casefold(): name for name in speakers if _is_distinctive(name.strip())}
    if not names:
        return {}
    any_case = query == query.lower()
    found: dict[str, str] = {}
    for match in _QUERY_WORD.finditer(query):
        if not query[: match.start()].strip():
            continue  # the first word is capitalised anyway
        word = re.sub(r"['’]s$", "", match.group(0))
        folded = word.casefold()
        if folded in names or not _is_distinctive(word) or len(word) < CLIPPED_NAME_LETTERS.start:
            continue
        if not (any_case or word[:1].isupper()):
            continue
        fits = {name for key, name in names.items() if _other_form(folded, key.split())}
        if len(fits) == 1:
            found[word] = fits.pop()
    return found


def _other_form(word: str, parts: list[str]) -> bool:
    """Whether ``word`` (case-folded) names the speaker whose case-folded name has ``parts``."""
    if len(parts) > 1:
        return word in parts
    name = parts[0]
    if word.startswith(name):
        return len(name) in CLIPPED_NAME_LETTERS and len(word) > len(name)
    return name.startswith(word) and len(word) in CLIPPED_NAME_LETTERS


def _names(query: str, name: str) -> bool:
    if _is_distinctive(name):
        return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", query, re.IGNORECASE) is not None
    if len(name) < 2 or not name[:1].isupper():
        return False
    return any(match.start() > 0 for match in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", query.lstrip()))


def without_speakers(query: str, speakers: Sequence[str]) -> str:
    """``query`` with the names of ``speakers`` (and a possessive "'s") taken out: what the dense retriever reads.

    Names of one character and common words ("Will", "May") stay; a query in which nothing
    matches, or of nothing but names, is returned unchanged. See docs/retrieval.md#1-candidates.
    """
    names = sorted({name.strip() for name in speakers if _is_distinctive(name.strip())}, key=len, reverse=True)
    if not names:
        return query
    pattern = (
        rf"(?<![\w-])(?:{'|'.join(map(re.escape, names))})"  # the name as a whole word
        r"(?:['\u2019]s|(?<=[sS])['\u2019])?(?![\w-])"  # with its possessive: "Ana's", "James'"
    )
    stripped, count = re.subn(pattern, " ", query, flags=0 if query != query.lower() else re.IGNORECASE)
    if not count:
        return query
    stripped = " ".join(stripped.split())
    return stripped if re.search(r"\w", stripped) else query


def _is_distinctive(name: str) -> bool:
    return len(name) > 1 and re.search(r"\w", name) is not None and name.casefold() not in COMMON_WORDS
