"""Named entities without a model: capitalised spans, typed by cues and small hand-written gazetteers."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import NamedTuple

from memstrata.extraction import gazetteers
from memstrata.extraction.gazetteers import word_set


class EntityKind(StrEnum):
    """What a named entity is."""

    PERSON = "person"
    PLACE = "place"
    ORGANIZATION = "organization"
    OTHER = "other"


@dataclass(kw_only=True, frozen=True, slots=True)
class Entity:
    """One named entity: its surface form (whitespace normalised), kind and character offsets."""

    name: str
    kind: EntityKind
    start: int
    end: int


class _Token(NamedTuple):
    start: int
    end: int
    text: str
    is_sentence_initial: bool


_TOKEN = re.compile(r"[^\W\d_]+(?:[-'’][^\W\d_]+)*")
_POSSESSIVE = re.compile(r"['’]s$")
_IRISH_NAME = re.compile(r"^[A-Z]['’][A-Z]")
_SENTENCE_BREAK = re.compile("[.!?…:;\n\u2600-\u27bf\U0001f300-\U0001faff]")
_QUOTED = re.compile(r"\"([^\"\n]{1,80})\"|“([^”\n]{1,80})”")
_INNER_SPACE = re.compile(r"[ \t]+")
_CONNECTORS = frozenset({"of", "de", "da", "do", "dos", "das", "di", "del", "della", "van", "von", "der", "den", "du"})
_TITLE_SMALL_WORDS = word_set("a an the of in on and to for with at by from or nor but is my your as into")
_SPAN_ABBREVIATIONS = frozenset({"st", "mt", "ft"})
_COMMON_ENDINGS = ("ing", "ed", "ly")

_TITLE_BEFORE = re.compile(r"\b(?:" + "|".join(sorted(gazetteers.PERSON_TITLES)) + r")\.?\s+$", re.IGNORECASE)
_RELATION_BEFORE = re.compile(
    r"\b(?:my|our|his|her|their|your)\s+(?:(?:little|big|older|younger|best|old|new|dear|late)\s+)?"
    r"(?:sister|brother|sis|bro|wife|husband|partner|boyfriend|girlfriend|fianc[ée]e?|friend|buddy|pal|mom|mum|"
    r"mother|dad|father|son|daughter|kid|cousin|aunt|uncle|niece|nephew|grandma|grandpa|grandmother|grandfather|"
    r"boss|manager|colleague|coworker|co-worker|neighbou?r|roommate|flatmate|teacher|mentor|therapist|doctor|"
    r"coach|classmate|bestie)s?\s*,?\s*$",
    re.IGNORECASE,
)
_PERSON_VERB_BEFORE = re.compile(
    r"\b(?:with|met|meet|meeting|(?:i|we|he|she|they)\s+(?:called|texted|told|asked|saw|hugged|married|emailed))\s+$",
    re.IGNORECASE,
)
_NAMED_BEFORE = re.compile(r"\b(?P<noun>[a-z]+)\s+(?:named|called|nicknamed)\s+$", re.IGNORECASE)
_PERSON_AFTER = re.compile(
    r"^(?:\s+(?:said|says|told|asked|replied|wrote|thinks|and\s+I\b|and\s+me\b|is\s+my\b|was\s+my\b)|"
    r"['’]s\s+(?:wife|husband|partner|mom|mum|dad|mother|father|kids|children|son|daughter|sister|brother|"
    r"birthday|boyfriend|girlfriend|family|parents|friend))",
    re.IGNORECASE,
)
_GREETING_BEFORE = re.compile(
    r"(?:^|[^\w])(?:hey|hi|hello|hiya|thanks|thank\s+you|thx|congrats|congratulations|bye|goodbye|dear|yo|"
    r"cheers|sorry|welcome\s+back|good\s+(?:morning|night|evening|luck))\s*,?\s*$",
    re.IGNORECASE,
)
_COMMA_BEFORE = re.compile(r"\b[a-z][a-z'’]*\s*,\s*$")
_VOCATIVE_AFTER = re.compile(r"^\s*(?:[!?]|\.(?!\w)|$)")
_ARTICLE_BEFORE = re.compile(r"\b(?:a|an|the)\s+$", re.IGNORECASE)
_LOWERCASE_WORD_AFTER = re.compile(r"^\s+[a-z]")
_COORDINATION = re.compile(r"^\s*(?:,|,?\s*and|,?\s*or|&)\s*$")
_ORGANIZATION_BEFORE = re.compile(
    r"\b(?:(?:work|works|worked|working|job|jobs|intern|interned|interning|internship|employed|hired|position|"
    r"role|career)\s+(?:at|for|by)|(?:joined|join|joining)|(?:started|starting)\s+at|"
    r"(?:studied|study|studying|enrolled|graduated)\s+(?:at|from))\s+$",
    re.IGNORECASE,
)
_PLACE_BEFORE = re.compile(
    r"\b(?:in|to|from|at|near|visit|visited|visiting|around|across|toward|towards|outside|inside|via|through)\s+$",
    re.IGNORECASE,
)
_ANIMAL_NOUNS = word_set(
    "dog dogs cat cats puppy pup kitten pet horse pony bird parrot fish hamster rabbit bunny turtle snake"
)
_PLACE_NOUNS = word_set("town city village place country island street neighbourhood neighborhood")
_ORGANIZATION_NOUNS = word_set(
    "company startup firm agency school restaurant cafe café shop store bar bakery club charity team band"
)
_THING_NOUNS = word_set("book song movie film show series novel album podcast game app it that this s thing one called")


#: Longer "names" (a pasted token of thousands of capitals) are not names; they would also not fit
#: a database index entry (about 2.7 KB in PostgreSQL).
MAX_NAME_CHARS = 200


def extract_entities(text: str, *, known_people: Collection[str] = ()) -> list[Entity]:
    """Named entities in ``text`` in order, never overlapping; ``known_people`` are typed as people."""
    known = _KnownPeople(known_people)
    quoted = list(_quoted_titles(text, known))
    tokens = _tokens(text)
    capitalised_later = {
        _core(token.text).casefold() for token in tokens if not token.is_sentence_initial and _is_name_token(token.text)
    }
    found: list[tuple[Entity, EntityKind | None]] = [(entity, entity.kind) for entity in quoted]
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if any(entity.start <= token.start < entity.end for entity in quoted) or not (
            _is_name_token(token.text) or _opens_a_name(text, tokens, index)
        ):
            index += 1
            continue
        last = _span_end(text, tokens, index)
        first = index
        index = last + 1
        if tokens[first].is_sentence_initial:
            first = _drop_common_opening(tokens, first, last)
            if first > last:
                continue
            is_lone_opening = first == last and tokens[first].is_sentence_initial
            if is_lone_opening and not _is_supported_alone(text, tokens[first], known, capitalised_later):
                continue
        start = tokens[first].start
        end = tokens[last].end - (2 if _POSSESSIVE.search(tokens[last].text) else 0)
        name = " ".join(text[start:end].split())
        found.append(
            (Entity(name=name, kind=EntityKind.OTHER, start=start, end=end), _classify(name, text, start, end, known))
        )
    found.sort(key=lambda pair: pair[0].start)
    return [entity for entity in _share_kinds_in_lists(text, found) if len(entity.name) <= MAX_NAME_CHARS]


def _share_kinds_in_lists(text: str, found: list[tuple[Entity, EntityKind | None]]) -> list[Entity]:
    """Give an untyped entity the place or organisation kind of a neighbour it is listed with ("Nike and Gatorade")."""
    kinds = [kind for _, kind in found]
    for order in (range(1, len(found)), range(len(found) - 2, -1, -1)):
        for index in order:
            neighbour = index - 1 if order.step == 1 else index + 1
            left, right = sorted((index, neighbour))
            neighbour_kind = kinds[neighbour]
            is_listed_with = _COORDINATION.match(text[found[left][0].end : found[right][0].start]) is not None
            if (
                kinds[index] is None
                and neighbour_kind in (EntityKind.PLACE, EntityKind.ORGANIZATION)
                and is_listed_with
            ):
                kinds[index] = neighbour_kind
    return [replace(entity, kind=kind or EntityKind.OTHER) for (entity, _), kind in zip(found, kinds, strict=True)]


def entity_names(text: str) -> set[str]:
    """The case-folded names of every entity in ``text`` (any kind)."""
    return {entity.name.casefold() for entity in extract_entities(text)}


class _KnownPeople:
    """Known names, their single words, and nicknames that are prefixes of a known first name."""

    def __init__(self, names: Collection[str]) -> None:
        self.full = {" ".join(name.split()).casefold() for name in names if name.strip()}
        self.words = {word for name in self.full for word in name.split()}
        self.first_words = {name.split()[0] for name in self.full}

    def matches(self, name: str) -> bool:
        """Whether ``name`` is a known person, one word of one, or a nickname ("Mel" for "Melanie")."""
        folded = name.casefold()
        if folded in self.full or folded in self.words:
            return True
        return (
            len(folded) >= 3
            and " " not in folded
            and any(first.startswith(folded) and first != folded for first in self.first_words)
        )

    def shares_a_word(self, name: str) -> bool:
        """Whether any word of ``name`` is a word of a known person's name."""
        return any(word in self.words for word in name.casefold().split())


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    previous_end = 0
    previous_text = ""
    for match in _TOKEN.finditer(text):
        gap = text[previous_end : match.start()]
        if not tokens:
            is_initial = True
        elif gap.strip() == "." and previous_text.casefold() in gazetteers.ABBREVIATIONS:
            is_initial = False
        else:
            is_initial = _SENTENCE_BREAK.search(gap) is not None
        tokens.append(_Token(match.start(), match.end(), match.group(), is_initial))
        previous_end, previous_text = match.end(), match.group()
    return tokens


def _core(word: str) -> str:
    return word[:-2] if _POSSESSIVE.search(word) else word


def _is_name_token(word: str) -> bool:
    if not word[0].isupper():
        return False
    core = _core(word)
    if ("'" in core or "’" in core) and not _IRISH_NAME.match(core):
        return False  # a contraction: I'm, Don't, Let's
    if len(core) < 2 or ("-" in core and len(core.split("-")[0]) == 1):
        return False
    folded = core.casefold()
    if core.isupper():
        return folded not in gazetteers.SHORTHAND
    return folded not in gazetteers.CAPITALISED_STOPWORDS


def _opens_a_name(text: str, tokens: list[_Token], index: int) -> bool:
    """A capitalised function word in mid-sentence that starts a name ("Under Armour")."""
    token = tokens[index]
    following = index + 1
    return (
        not token.is_sentence_initial
        and token.text[0].isupper()
        and not token.text.isupper()
        and token.text.casefold() in gazetteers.NAME_OPENERS
        and following < len(tokens)
        and _joins(text, token, tokens[following])
        and _is_name_token(tokens[following].text)
    )


def _span_end(text: str, tokens: list[_Token], first: int) -> int:
    """Index of the last token of the capitalised span that starts at ``first``."""
    last = first
    while not _POSSESSIVE.search(tokens[last].text):
        following = last + 1
        if following < len(tokens) and _joins(text, tokens[last], tokens[following]):
            if _is_name_token(tokens[following].text):
                last = following
                continue
            connector = following
            if tokens[connector].text in _CONNECTORS:
                after = connector + 1
                if after < len(tokens) and tokens[connector].text == "of" and tokens[after].text == "the":
                    after += 1
                if (
                    after < len(tokens)
                    and _joins(text, tokens[after - 1], tokens[after])
                    and _is_name_token(tokens[after].text)
                ):
                    last = after
                    continue
        break
    return last


def _joins(text: str, left: _Token, right: _Token) -> bool:
    gap = text[left.end : right.start]
    if gap and _INNER_SPACE.fullmatch(gap):
        return True
    return gap.rstrip() == "." and left.text.casefold() in _SPAN_ABBREVIATIONS and gap[1:2].isspace()


def _drop_common_opening(tokens: list[_Token], first: int, last: int) -> int:
    """Skip a sentence-opening word that is plainly not a name ("Visiting Lisbon was ...")."""
    word = tokens[first].text.casefold()
    if first < last and word.endswith(_COMMON_ENDINGS) and word not in gazetteers.FIRST_NAMES:
        following = first + 1
        while following <= last and not tokens[following].text[0].isupper():
            following += 1
        return following
    return first


def _is_supported_alone(text: str, token: _Token, known: _KnownPeople, capitalised_later: set[str]) -> bool:
    """Whether a lone capitalised word opening a sentence is a name rather than an ordinary word."""
    core = _core(token.text)
    folded = core.casefold()
    if known.matches(core) or folded in capitalised_later:
        return True
    if folded in gazetteers.PLACES or folded in gazetteers.ORGANIZATIONS or folded in gazetteers.FIRST_NAMES:
        return True
    if core.isupper():
        return True
    return _PERSON_AFTER.match(text[token.end - (len(token.text) - len(core)) :]) is not None


def _quoted_titles(text: str, known: _KnownPeople) -> Iterator[Entity]:
    """Title-cased quotations ("Charlotte's Web") as single entities."""
    for match in _QUOTED.finditer(text):
        group = 1 if match.group(1) is not None else 2
        content = match.group(group)
        stripped = content.strip().rstrip(".,!?;:")
        words = _TOKEN.findall(stripped)
        if not words or len(words) > 10 or not words[0][0].isupper():
            continue
        if not all(word[0].isupper() or word.casefold() in _TITLE_SMALL_WORDS for word in words):
            continue
        start = match.start(group) + (len(content) - len(content.lstrip()))
        end = start + len(stripped)
        name = " ".join(text[start:end].split())
        kind = _classify(name, text, start, end, known) if _is_listed(name, known) else EntityKind.OTHER
        yield Entity(name=name, kind=kind or EntityKind.OTHER, start=start, end=end)


def _is_listed(name: str, known: _KnownPeople) -> bool:
    folded = name.casefold()
    return known.matches(name) or folded in gazetteers.PLACES or folded in gazetteers.ORGANIZATIONS


def _classify(name: str, text: str, start: int, end: int, known: _KnownPeople) -> EntityKind | None:
    """Type a span by known people, titles, gazetteers and suffixes, then context cues; ``None`` if no evidence."""
    words = name.casefold().split()
    first = words[0]
    before = text[max(0, start - 60) : start]
    after = text[end : end + 40]
    if known.matches(name) or _TITLE_BEFORE.search(before):
        return EntityKind.PERSON
    listed = _listed_kind(words, name)
    if listed is not None:
        return listed
    if known.shares_a_word(name):
        return EntityKind.PERSON
    if _ORGANIZATION_BEFORE.search(before):
        return EntityKind.ORGANIZATION
    named = _NAMED_BEFORE.search(before)
    if named:
        return _kind_of_named(named.group("noun").casefold())
    # "a Harry Potter fan": a name used as a modifier is not a mention of a person.
    if not (_ARTICLE_BEFORE.search(before) and _LOWERCASE_WORD_AFTER.match(after)):
        if _RELATION_BEFORE.search(before) or _PERSON_VERB_BEFORE.search(before) or _PERSON_AFTER.match(after):
            return EntityKind.PERSON
        if _GREETING_BEFORE.search(before) or (
            len(words) == 1 and _COMMA_BEFORE.search(before) and _VOCATIVE_AFTER.match(after)
        ):
            return EntityKind.PERSON
        if first in gazetteers.FIRST_NAMES:
            return EntityKind.PERSON
    if name.isupper():
        return EntityKind.OTHER
    if _PLACE_BEFORE.search(before):
        return EntityKind.PLACE
    return None


def _listed_kind(words: list[str], name: str) -> EntityKind | None:
    """The kind a gazetteer, a suffix or a head word gives the name, if any."""
    folded = " ".join(words)
    first, last = words[0], words[-1].rstrip(".")
    is_multiword = len(words) > 1
    if folded in gazetteers.ORGANIZATIONS or (is_multiword and last in gazetteers.ORGANIZATION_SUFFIXES):
        return EntityKind.ORGANIZATION
    if len(words) > 2 and first in gazetteers.ORGANIZATION_HEADS and words[1] == "of":
        return EntityKind.ORGANIZATION
    if folded in gazetteers.PLACES or (name.isupper() and folded in gazetteers.STATE_CODES):
        return EntityKind.PLACE
    if is_multiword and (last in gazetteers.PLACE_SUFFIXES or first in gazetteers.PLACE_HEADS):
        return EntityKind.PLACE
    # A place and a plural is a sports team or a paper: "Minnesota Wolves", "New York Times".
    if is_multiword and last.endswith("s") and " ".join(words[:-1]) in gazetteers.PLACES:
        return EntityKind.ORGANIZATION
    return None


def _kind_of_named(noun: str) -> EntityKind:
    """The kind of whatever "a <noun> named X" names."""
    if noun in _ANIMAL_NOUNS or noun in _THING_NOUNS:
        return EntityKind.OTHER
    if noun in _PLACE_NOUNS:
        return EntityKind.PLACE
    if noun in _ORGANIZATION_NOUNS:
        return EntityKind.ORGANIZATION
    return EntityKind.PERSON
