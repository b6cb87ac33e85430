"""Typed memory cells from first-person statements, by rules: the extractor used when no LLM is configured.

A cell's ``attribute`` is the key that decides supersession: single-valued attributes come
out the same for conflicting statements, multi-valued ones carry their object
("likes:hiking"). See docs/tiers.md#extraction-without-an-llm.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memstrata.extraction.cell_grammar import CellKind, Rule, Shape
from memstrata.extraction.cell_rules import RULES
from memstrata.extraction.cell_values import (
    clause_value,
    list_values,
    name_value,
    phrase_value,
    value_key,
)
from memstrata.extraction.gazetteers import word_set

__all__ = ["CellKind", "ExtractedCell", "extract_cells", "profile_updates"]


@dataclass(kw_only=True, frozen=True, slots=True)
class ExtractedCell:
    """One typed statement about a subject, with the sentence it came from and a salience in [0, 1].

    ``scene`` is a short topic label an LLM extractor gives the statement; rules leave it empty.
    """

    kind: CellKind
    subject: str
    attribute: str
    value: str
    text: str
    salience: float
    is_single_valued: bool
    scene: str = ""


_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSE_BOUNDARY = re.compile(r"[,;:]|\b(?:but|and|because|so|although|though|while|however|then)\b", re.IGNORECASE)
_NEGATION_OR_CONDITION = re.compile(
    r"\b(?:not|never|no\s+longer|nor|hardly|if|unless|whether|wish|wonder)\b|n't\b", re.IGNORECASE
)
# A question that is a request: "Can you remind me to call Ana?" is a task, not a question about one.
_REQUEST = re.compile(r"(?:can|could|would|will)\s+you\s+(?:(?:please|also|just|kindly)\s+)?remind\b", re.IGNORECASE)
# "Why would you remind me to …?" is no request.
_WH_WORD = re.compile(r"\b(?:why|how|what|when|where|who)\b", re.IGNORECASE)
_NEGATED_VALUE = re.compile(r"\b(?:anymore|any\s+more|no\s+more|no\s+longer)\b", re.IGNORECASE)
_CLAUSE_END = re.compile(r"[,;]")
# "the things I love make …", "a spot that I like": the statement sits in a relative clause of another one
# ("I realized that I love painting" is a statement: "that" follows no noun).
_RELATIVE_BEFORE = re.compile(
    r"(?:\b(?P<verb>[\w']+)\s+)?\b(?:things?|stuff|everything|something|anything|(?:the|a|an|this|that|my|our|one)\s+"
    r"(?P<noun>(?:[\w'-]+\s+){1,3})(?:that|which))\s+$",
    re.IGNORECASE,
)
# "I told my sister that I love hiking", "the fact that I like jazz": "that" opens what is said, not a relative.
_SAYING_VERBS = word_set(
    "told tell tells telling reminded remind promised promise showed show shown convinced assured wrote write texted "
    "asked warned informed taught teach admitted explained mentioned"
)
_STATEMENT_NOUNS = word_set("fact reason idea news feeling thought truth point sense hope belief")
#: How far before a match the relative-clause check looks (it is anchored at the match).
_RELATIVE_WINDOW = 60
#: How far around a match its clause is read for a negation, a condition or a question mark.
_CLAUSE_REACH = 400
_INTENSIFIER = re.compile(r"\b(?:really|absolutely|definitely|always|so\s+much|hate|adore)\b", re.IGNORECASE)
_HEDGE = re.compile(r"\b(?:maybe|might|probably|perhaps|kinda|sort\s+of|hoping|thinking)\b", re.IGNORECASE)

# A place told by reference, not named: "I moved from my home country" says nothing of where (origin, location).
_REFERENCED_PLACE = re.compile(
    r"(?:my|our|your|his|her|their)\s+(?:home|(?:home\s*|own\s+|native\s+)?"
    r"(?:country|countries|land|town|city|village|region|state|place|area))"
)
_SINGLE_RELATIONS = word_set("wife husband partner spouse boyfriend girlfriend fiance mother father boss")
_RELATION_SYNONYMS = {
    "mum": "mother",
    "mom": "mother",
    "stepmom": "stepmother",
    "dad": "father",
    "stepdad": "stepfather",
    "bf": "boyfriend",
    "gf": "girlfriend",
    "fiancé": "fiance",
    "fiancée": "fiance",
    "fiancee": "fiance",
    "neighbour": "neighbor",
    "grandma": "grandmother",
    "grandpa": "grandfather",
}
_RELATION_ADJECTIVES = word_set("older younger little big baby twin best oldest youngest eldest")
_ANIMAL_SYNONYMS = {"puppy": "dog", "pup": "dog", "kitten": "cat", "kitty": "cat", "bunny": "rabbit"}
_SPELLING = {"colour": "color", "flavour": "flavor", "favourite": "favorite"}


def extract_cells(text: str, *, role: str = "user", speaker: str | None = None) -> list[ExtractedCell]:
    """Facts, preferences, tasks, decisions, plans and risks stated in the first person by a user message."""
    if str(role).strip().casefold() != "user":
        return []
    subject = speaker.strip() if speaker and speaker.strip() else "user"
    cells: list[ExtractedCell] = []
    seen: set[tuple[CellKind, str, str]] = set()
    for sentence in _sentences(text):
        matchable = sentence.replace("’", "'").replace("‘", "'")
        claimed: list[tuple[CellKind, int, int]] = []
        for rule in RULES:
            for match in rule.pattern.finditer(matchable):
                if _is_negated_or_asked(matchable, match):
                    continue
                before = matchable[max(0, match.start() - _RELATIVE_WINDOW) : match.start()]
                if rule.shape is Shape.LIST and _is_relative_clause(before):
                    continue
                for attribute, value in _readings(rule, match, sentence):
                    identity = (rule.kind, attribute, value.casefold())
                    span = _value_span(sentence, match, value)
                    if identity in seen or _overlaps(claimed, rule.kind, span):
                        continue
                    seen.add(identity)
                    claimed.append((rule.kind, *span))
                    single = rule.is_single_valued or _is_single_relation(attribute)
                    salience = _salience(rule, sentence[match.start() : match.end()])
                    cells.append(
                        ExtractedCell(
                            kind=rule.kind,
                            subject=subject,
                            attribute=attribute,
                            value=value,
                            text=sentence,
                            salience=salience,
                            is_single_valued=single,
                        )
                    )
    return cells


def profile_updates(cells: Sequence[ExtractedCell]) -> dict[str, str]:
    """Stable traits for a profile: attribute → value of single-valued facts and preferences, later cells winning.

    Pass the cells of one subject; a multi-party transcript needs one call per speaker.
    """
    return {
        cell.attribute: cell.value
        for cell in cells
        if cell.is_single_valued and cell.kind in (CellKind.FACT, CellKind.PREFERENCE)
    }


def _sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_BREAK.split(text) if part and part.strip()]


def _value_span(sentence: str, match: re.Match[str], value: str) -> tuple[int, int]:
    """Where a cleaned value sits in the sentence (the whole match when it was rewritten)."""
    start = match.start("value") if match.groupdict().get("value") is not None else match.start()
    position = sentence.casefold().find(value.casefold(), start)
    return (position, position + len(value)) if position >= 0 else (match.start(), match.end())


def _overlaps(claimed: list[tuple[CellKind, int, int]], kind: CellKind, span: tuple[int, int]) -> bool:
    """Whether an earlier reading of the same kind already covers part of this stretch of the sentence."""
    start, end = span
    return any(seen == kind and start < seen_end and seen_start < end for seen, seen_start, seen_end in claimed)


def _is_relative_clause(before: str) -> bool:
    """Whether the words before a statement make it a relative clause of another ("the spot that I love")."""
    found = _RELATIVE_BEFORE.search(before)
    if found is None:
        return False
    noun = (found.group("noun") or "").split()
    told = (found.group("verb") or "").casefold() in _SAYING_VERBS
    return not (told or (noun and noun[-1].casefold() in _STATEMENT_NOUNS))


def _is_negated_or_asked(sentence: str, match: re.Match[str]) -> bool:
    """A denial, a condition or a question in the clause around the match makes no statement."""
    # A clause is read at most _CLAUSE_REACH characters each way: a message of thousands of list
    # statements in one "sentence" costs time in proportion to its length, not to its square.
    prefix = sentence[max(0, match.start() - _CLAUSE_REACH) : match.start()]
    boundaries = list(_CLAUSE_BOUNDARY.finditer(prefix))
    clause_start = boundaries[-1].end() if boundaries else 0
    if _NEGATION_OR_CONDITION.search(prefix[clause_start:]):
        return True
    asking = prefix[clause_start:] + sentence[match.start() : match.end()]
    if _REQUEST.search(asking) and not _WH_WORD.search(prefix[clause_start:]):
        return False  # "Could you remind me to …?" asks for something to be remembered
    rest = sentence[match.start() : match.end() + _CLAUSE_REACH]
    end = _CLAUSE_END.search(rest, match.end() - match.start())
    clause = rest[: end.start()] if end else rest
    return clause.rstrip().endswith("?")


def _readings(rule: Rule, match: re.Match[str], sentence: str) -> list[tuple[str, str]]:
    """The (attribute, value) pairs one match yields: none if the value is empty or negated, several for lists."""
    groups = match.groupdict()
    raw = sentence[match.start("value") : match.end("value")] if groups.get("value") is not None else None
    if raw is not None and _NEGATED_VALUE.search(raw):
        return []
    if rule.shape is Shape.LIST:
        values = list_values(raw or "")
    elif rule.shape is Shape.PHRASE:
        values = phrase_value(raw or "")
    elif rule.shape is Shape.CLAUSE:
        values = clause_value(raw or "")
    elif rule.shape is Shape.NAME:
        values = name_value(raw)
    else:
        values = [raw.strip()] if raw and raw.strip() else []
    attribute_template = rule.attribute
    if "{animal}" in attribute_template:
        animal = _animal(groups.get("animal") or "")
        if not values:
            return [(f"pet:{animal}", animal)]
        attribute_template = "pet:{animal}:{key}"
    if rule.attribute in ("origin", "location"):
        values = [value for value in values if not _REFERENCED_PLACE.fullmatch(value.casefold())]
    readings = []
    for value in values:
        if rule.attribute in ("diet", "marital_status"):
            value = value.casefold()
        attribute = _fill(attribute_template, groups, value)
        if attribute.startswith("relationship:") and not _is_single_relation(attribute):
            attribute = f"{attribute}:{value_key(value)}"
        readings.append((attribute, value))
    return readings


def _fill(template: str, groups: dict[str, str | None], value: str) -> str:
    replacements = {
        "{key}": value_key(value),
        "{thing}": _thing(groups.get("thing") or ""),
        "{relation}": _relation(groups.get("relation") or ""),
        "{animal}": _animal(groups.get("animal") or ""),
        "{date}": " ".join((groups.get("date") or "").casefold().split()),
    }
    for placeholder, replacement in replacements.items():
        template = template.replace(placeholder, replacement)
    return template


def _thing(raw: str) -> str:
    words = [_SPELLING.get(word, word) for word in value_key(raw).split()]
    return " ".join(words)


def _relation(raw: str) -> str:
    words = [word for word in raw.casefold().split() if word not in _RELATION_ADJECTIVES]
    word = words[-1] if words else raw.casefold()
    return _RELATION_SYNONYMS.get(word, word)


def _animal(raw: str) -> str:
    word = " ".join(raw.casefold().split())
    if word.endswith("s") and not word.endswith("ss") and word != "fish":
        word = word[:-1]
    return _ANIMAL_SYNONYMS.get(word, word)


def _is_single_relation(attribute: str) -> bool:
    parts = attribute.split(":")
    return len(parts) == 2 and parts[0] == "relationship" and parts[1] in _SINGLE_RELATIONS


def _salience(rule: Rule, matched: str) -> float:
    score = rule.salience
    if _INTENSIFIER.search(matched):
        score += 0.05
    if _HEDGE.search(matched):
        score -= 0.1
    return min(1.0, max(0.0, round(score, 3)))
