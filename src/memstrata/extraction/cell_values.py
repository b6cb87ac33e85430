"""How the stretch of a sentence a rule matched becomes a cell's value: cut to the thing said, or refused.

A list gives one value per item, a phrase or a clause one, a name its capitalised words;
what says nothing on its own is refused. ``value_key`` folds a value into the key that
tells one value of an attribute from another. See docs/tiers.md#extraction-without-an-llm.
"""

from __future__ import annotations

import re

from memstrata.extraction.gazetteers import CAPITALISED_STOPWORDS, word_set

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
_EMPTY_VALUES = word_set("""
    it that this you them him her those these what how when why where there here so too one some all everything
    something anything nothing someone everyone anyone me myself us yourself whatever which who doing being
    stuff things lot lots to on etc forth whatnot
    """)
_EMPTY_STARTS = ("that ", "this ", "them ", "what ", "how ", "when ", "why ", "where ", "the way ")
# An item that starts with a preposition tells when or with whom, not what: "(yoga, especially) in the morning".
_CIRCUMSTANCE_STARTS = ("in ", "at ", "on ", "with ", "during ", "after ", "before ", "when ")
_PRONOUN_SUBJECTS = word_set("i you he she it we they there that")
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
_MAX_PHRASE_WORDS = 6
_MAX_CLAUSE_WORDS = 14
_MAX_LIST_ITEMS = 5


def phrase_value(raw: str) -> list[str]:
    """A place, an employer, a job: the phrase up to where a clause, a second item or a preposition starts."""
    value = _SUBORDINATE_TAIL.sub("", raw)
    value = _COORDINATE_TAIL.sub("", value)
    value = _PREPOSITION_TAIL.sub("", value)
    value = _tidy(value)
    return [value] if _is_meaningful(value, _MAX_PHRASE_WORDS) else []


def list_values(raw: str) -> list[str]:
    """Each item of a list of things liked, disliked or preferred, up to five, or none when it names no thing."""
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


def clause_value(raw: str) -> list[str]:
    """A plan, a task, a decision or a risk: the clause up to where another starts, at most 14 words."""
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


def name_value(raw: str | None) -> list[str]:
    """The capitalised words of a name, up to a word that only looks like one."""
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


def value_key(value: str) -> str:
    """A normalised key for a value: case-folded words without determiners or a trailing time, at most six."""
    text = value
    previous = None
    while previous != text:
        previous, text = text, _TRAILING_FILLER.sub("", text)
    text = _KEY_LEADING.sub("", text.strip())
    words = [word.casefold() for word in _KEY_WORD.findall(text)]
    return " ".join(words[:_MAX_PHRASE_WORDS]) or value.casefold()
