"""Typed memory cells from first-person statements, by rules: the extractor used when no LLM is configured.

A cell says one thing about its subject: ``attribute`` is the key that decides supersession.
Single-valued attributes (location, employer, job, name, age, favourite:<thing> ...) come out
the same for conflicting statements, so the newer value retires the older one. Multi-valued
ones carry their object in the key ("likes:hiking", "relationship:sister:anna", "task:<what>"),
so unrelated items never retire each other.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memstrata.extraction.cell_grammar import CellKind, Rule, Shape
from memstrata.extraction.cell_rules import RULES
from memstrata.extraction.gazetteers import CAPITALISED_STOPWORDS, word_set

__all__ = ["CellKind", "ExtractedCell", "extract_cells", "profile_updates"]


@dataclass(frozen=True, slots=True)
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
_SUBORDINATE_TAIL = re.compile(
    r"\s+(?:because|but|since|which|who|whom|whose|where|when|whenever|while|though|although|if|unless|until|"
    r"so\s+that|so\s+(?:i|we|you|they|he|she|it|\w+ing)|as\s+well\s+as|'cause|cause|cuz|coz|cos|whereas|except|"
    r"even\s+though|and\s+(?:i|we)|but\s+(?:i|we)|or\s+(?:is|are|was|would|should|could|can|do|does|am|will))\b.*$"
    r"|\s+[-–—]+(?:\s.*)?$"
    # ", so keep that in mind" / ", please …" starts a new clause, not another list item.
    r"|\s*,\s*(?:so|then|please|thus|hence)\b.*$",
    re.IGNORECASE | re.DOTALL,
)
# A comma or dash (not a hyphen inside a word) before a subject or an aside opens a new clause, which ends a
# list: "bowling itself, to be honest", "dogs, that's why I have cats", "yoga - it keeps me calm".
_NEW_CLAUSE = re.compile(
    r"(?:\s*,|\s+-+|\s*[\u2013\u2014])\s*(?:(?:and|but|so)\s+)?(?:to\s+be\s+(?:honest|fair)|it|it's|its|that|that's|"
    r"this|they|they're|there|there's|he|she|i|i'm|i've|i'd|we|we're|you|you're|which|who)\b.*$",
    re.IGNORECASE | re.DOTALL,
)
# ", plus sushi", ", especially kayaking", ", like blankets and tea": more items, not a new clause.
_MORE_ITEMS = re.compile(r"\s*,\s*(?:plus|especially|particularly|like|including|such\s+as)\s+", re.IGNORECASE)
# "I love how …", "I like what you did": the object is a clause about something, not a thing liked.
_CLAUSE_OBJECT = re.compile(r"^(?:how|what|why|when|where|the\s+way)\b", re.IGNORECASE)
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
_PREPOSITION = re.compile(
    r"\s+(?:with|for|near|since|after|before|during|until|in|on|at|by|from|as|to|because|about)\s+", re.IGNORECASE
)
_COORDINATE_TAIL = re.compile(r"\s*,.*$|\s+(?:and|or|&)\s+(?=[a-z]).*$", re.DOTALL)
_PREPOSITION_TAIL = re.compile(
    r"\s+(?:with|for|near|since|after|before|during|until|in|on|at|by|from|as|to|because)\s+.*$",
    re.IGNORECASE | re.DOTALL,
)
_NUMBER_WORD = r"(?:a|one|two|three|four|five|six|seven|eight|nine|ten|a\s+few|a\s+couple\s+of|several|many|\d+)"
_TRAILING_FILLER = re.compile(
    r"\s+(?:now|right\s+now|at\s+the\s+moment|these\s+days|nowadays|currently|recently|lately|too|as\s+well|already|"
    r"again|though|actually|still|a\s+lot|so\s+much|very\s+much|really|haha|lol|for\s+now|yesterday|today|tonight|"
    r"tomorrow|ever\s+since|(?:last|this|next)\s+(?:week|weekend|month|year|summer|winter|spring|fall|autumn|night|"
    r"time)|"
    + _NUMBER_WORD
    + r"\s+(?:days?|weeks?|months?|years?)\s+ago|(?:in|since)\s+\d{4}|for\s+"
    + _NUMBER_WORD
    + r"\s+(?:days?|weeks?|months?|years?))\s*$",
    re.IGNORECASE,
)
_LEADING_FILLER = re.compile(
    r"^(?:(?:honestly|definitely|probably|well|oh|yeah|so|and|but|actually|really|also|plus|i\s+think|"
    r"i\s+guess)\s*,?\s+)+",
    re.IGNORECASE,
)
_LEADING_ARTICLE = re.compile(r"^(?:a|an|the)\s+", re.IGNORECASE)
_KEY_LEADING = re.compile(
    r"^(?:(?:a|an|the|my|our|your|his|her|their|some|any|this|that|these|those|more|lots\s+of|a\s+lot\s+of|to|"
    r"both|all)\s+)+",
    re.IGNORECASE,
)
_LIST_SEPARATOR = re.compile(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+|\s*/\s*", re.IGNORECASE)
_EDGE_JUNK = re.compile(r"^[^\w]+|[^\w]+$")
_POSSESSIVE = re.compile(r"'s$")
_KEY_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*")
_INTENSIFIER = re.compile(r"\b(?:really|absolutely|definitely|always|so\s+much|hate|adore)\b", re.IGNORECASE)
_HEDGE = re.compile(r"\b(?:maybe|might|probably|perhaps|kinda|sort\s+of|hoping|thinking)\b", re.IGNORECASE)

_EMPTY_VALUES = word_set("""
    it that this you them him her those these what how when why where there here so too one some all everything
    something anything nothing someone everyone anyone me myself us yourself whatever which who doing being
    stuff things lot lots to on etc forth whatnot
    """)
_EMPTY_STARTS = ("that ", "this ", "them ", "what ", "how ", "when ", "why ", "where ", "the way ")
# An item that starts with a preposition tells when or with whom, not what: "(yoga, especially) in the morning".
_CIRCUMSTANCE_STARTS = ("in ", "at ", "on ", "with ", "during ", "after ", "before ", "when ")
_PRONOUN_SUBJECTS = word_set("i you he she it we they there that")
# A place told by reference, not named: "I moved from my home country" says nothing of where (origin, location).
_REFERENCED_PLACE = re.compile(
    r"(?:my|our|your|his|her|their)\s+(?:home|(?:home\s*|own\s+|native\s+)?"
    r"(?:country|countries|land|town|city|village|region|state|place|area))"
)
# Words that cannot carry a plan or a task on their own: "keep it up", "make it happen", "do it too".
_LIGHT_WORDS = word_set(
    "do make keep get go try have take give it that this them too up happen there again more out on so then"
)
_EMPTY_VERBS = word_set("think say believe imagine know see hear admit agree confess guess wonder tell thank")
# A plan or task made only of these is encouragement, not something to do: "keep on going and never quit".
_PEP_TALK_WORDS = word_set("""
    keep keeps going pushing push working hard harder chasing chase after dreams dream goals goal believing
    believe myself yourself positive determined stay staying never quit give giving up make making success
    successful reach continue continuing striving strive moving move ahead forward grinding grind trying try best
    focused focus motivated on happen happens whatever comes my way matter no be patient have faith patience true
    shot go goes see check out how come pursue pursuing what a an the good fun to with of for in at one is and it
    this that these those them
    """)
_MAKE_IT_WORK = re.compile(r"\bmake\s+(?:it|this|that)\s+work\b", re.IGNORECASE)
# Words that point at something said elsewhere; a value that is mostly pointer says nothing on its own.
_OBJECT_POINTERS = word_set("them him it em")  # not "her", which is as often "her cooking"
_DEMONSTRATIVES = word_set("that this these those")
_POSSESSIVE_POINTERS = word_set("their your his")
_FUNCTION_WORDS = word_set("a an the to of in on at for with by from about like and or so too as up out all my our")
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
_MAX_PHRASE_WORDS = 6
_MAX_CLAUSE_WORDS = 14
_MAX_LIST_ITEMS = 5


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
                    cells.append(ExtractedCell(rule.kind, subject, attribute, value, sentence, salience, single))
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
        values = _list_values(raw or "")
    elif rule.shape is Shape.PHRASE:
        values = _phrase_value(raw or "")
    elif rule.shape is Shape.CLAUSE:
        values = _clause_value(raw or "")
    elif rule.shape is Shape.NAME:
        values = _name_value(raw)
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
            attribute = f"{attribute}:{_key(value)}"
        readings.append((attribute, value))
    return readings


def _fill(template: str, groups: dict[str, str | None], value: str) -> str:
    replacements = {
        "{key}": _key(value),
        "{thing}": _thing(groups.get("thing") or ""),
        "{relation}": _relation(groups.get("relation") or ""),
        "{animal}": _animal(groups.get("animal") or ""),
        "{date}": " ".join((groups.get("date") or "").casefold().split()),
    }
    for placeholder, replacement in replacements.items():
        template = template.replace(placeholder, replacement)
    return template


def _phrase_value(raw: str) -> list[str]:
    value = _SUBORDINATE_TAIL.sub("", raw)
    value = _COORDINATE_TAIL.sub("", value)
    value = _PREPOSITION_TAIL.sub("", value)
    value = _tidy(value)
    return [value] if _is_meaningful(value, _MAX_PHRASE_WORDS) else []


def _list_values(raw: str) -> list[str]:
    if _CLAUSE_OBJECT.match(_LEADING_FILLER.sub("", raw.strip())):
        return []
    values: list[str] = []
    items = _SUBORDINATE_TAIL.sub("", _NEW_CLAUSE.sub("", _MORE_ITEMS.sub(", ", raw)))
    for item in _LIST_SEPARATOR.split(items)[:_MAX_LIST_ITEMS]:
        value = _tidy(_shortened(item) if len(item.split()) > _MAX_PHRASE_WORDS else item)
        if value.casefold().startswith("to "):
            value = value[3:].strip()
            if value.split(" ", 1)[0].casefold() in _EMPTY_VERBS:
                continue
        if value.casefold().startswith(_CIRCUMSTANCE_STARTS) or _is_pointer(value, liked=True):
            continue
        if _is_meaningful(value, _MAX_PHRASE_WORDS) and value.casefold() not in (v.casefold() for v in values):
            values.append(value)
    return values


def _shortened(item: str) -> str:
    """An over-long item cut at its last preposition that leaves two to six words ("going for walks to take it all
    in" → "going for walks"), or at its first one when none does."""
    heads = [item[: found.start()] for found in _PREPOSITION.finditer(item)]
    fitting = [head for head in heads if 2 <= len(head.split()) <= _MAX_PHRASE_WORDS]
    return fitting[-1] if fitting else _PREPOSITION_TAIL.sub("", item)


def _is_pointer(value: str, *, liked: bool) -> bool:
    """A value that only points at something said elsewhere: "check them out", "try that"; for a thing liked
    also "those games", "your commitment" (a compliment on what was just shown, not a taste).

    It has at most one word of its own besides the pointer (two for a thing liked that starts with one); "fix this
    bug", "pick them up from school" and "spending time with them" say enough to stay.
    """
    words = [word.casefold() for word in _KEY_WORD.findall(value)]
    if liked and words and words[0] in _DEMONSTRATIVES | _POSSESSIVE_POINTERS:
        determiners = _DEMONSTRATIVES | _POSSESSIVE_POINTERS
        return len([word for word in words if word not in determiners | _FUNCTION_WORDS | _LIGHT_WORDS]) <= 2
    # Otherwise an object pronoun, or a demonstrative alone ("do that"; not one before its noun, "sell that car").
    pointers: set[str] = set(_OBJECT_POINTERS) | {
        word
        for word, following in zip(words, [*words[1:], ""], strict=False)
        if word in _DEMONSTRATIVES and (not following or following in _FUNCTION_WORDS)
    }
    if not pointers.intersection(words):
        return False
    return len([word for word in words if word not in pointers | _FUNCTION_WORDS | _LIGHT_WORDS]) <= 1


def _clause_value(raw: str) -> list[str]:
    value = _SUBORDINATE_TAIL.sub("", raw)
    value = _COORDINATE_TAIL.sub("", value) if "," in value else value
    value = _tidy(value, keep_time=True)
    words = value.split()
    if words and words[0].casefold() in _EMPTY_VERBS:
        return []
    value = " ".join(words[:_MAX_CLAUSE_WORDS])
    words = [word.casefold() for word in _KEY_WORD.findall(value)]
    if all(word in _LIGHT_WORDS for word in words):
        return []
    # "quit" alone is a decision; "make this work" is encouragement, "go to work" is not.
    encouraging = _PEP_TALK_WORDS | ({"work"} if _MAKE_IT_WORK.search(value) else set())
    if len(words) > 1 and all(word in encouraging for word in words):
        return []
    if _is_pointer(value, liked=False):
        return []
    return [value] if _is_meaningful(value, _MAX_CLAUSE_WORDS) else []


def _name_value(raw: str | None) -> list[str]:
    words: list[str] = []
    for word in (raw or "").split():
        word = _POSSESSIVE.sub("", word)
        if word.casefold() in CAPITALISED_STOPWORDS or len(word) < 2:
            break
        words.append(word)
    return [" ".join(words)] if words else []


def _tidy(value: str, *, keep_time: bool = False) -> str:
    value = _EDGE_JUNK.sub("", " ".join(value.split()))
    value = _LEADING_FILLER.sub("", value)
    if not keep_time:
        previous = None
        while previous != value:
            previous, value = value, _TRAILING_FILLER.sub("", value)
        value = _LEADING_ARTICLE.sub("", value)
    return _EDGE_JUNK.sub("", value)


def _is_meaningful(value: str, max_words: int) -> bool:
    folded = value.casefold()
    if not folded or folded in _EMPTY_VALUES or folded.startswith(_EMPTY_STARTS):
        return False
    if re.split(r"['\s]", folded, maxsplit=1)[0] in _PRONOUN_SUBJECTS:
        return False  # a clause with its own subject ("it'd be great"), not a thing
    return len(folded.split()) <= max_words and any(character.isalnum() for character in folded)


def _key(value: str) -> str:
    """A normalised key for a value: case-folded words without determiners or a trailing time, at most six."""
    text = value
    previous = None
    while previous != text:
        previous, text = text, _TRAILING_FILLER.sub("", text)
    text = _KEY_LEADING.sub("", text.strip())
    words = [word.casefold() for word in _KEY_WORD.findall(text)]
    return " ".join(words[:_MAX_PHRASE_WORDS]) or value.casefold()


def _thing(raw: str) -> str:
    words = [_SPELLING.get(word, word) for word in _key(raw).split()]
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
