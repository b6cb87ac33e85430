"""Procedural memory: recurring ways a user asks for things, observed one message at a time by rules."""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass

from memstrata.extraction.gazetteers import CHAT_FILLER, word_set


@dataclass(frozen=True, slots=True)
class PatternObservation:
    """One sighting of an interaction pattern: a stable key, a human description and the span that showed it."""

    key: str
    description: str
    evidence: str


@dataclass(kw_only=True, frozen=True, slots=True)
class _Detector:
    key: str
    description: str
    pattern: re.Pattern[str]
    #: Counts only inside a request (a question, or a sentence opening with one): its words are
    #: as often just mentioned ("a source of joy", "how they compare to the books").
    in_request_only: bool = False


#: A word of a name in "Lakers vs. Celtics game" (an event, not a comparison asked for): not a function word,
#: so "Python vs Go for game dev?" is still a comparison.
_NAME_WORD = r"(?!(?:for|in|on|at|to|of|with|as|and|or)\b)[\w'-]+"


def _detector(
    key: str, description: str, pattern: str, flags: int = re.IGNORECASE, *, in_request_only: bool = False
) -> _Detector:
    return _Detector(
        key=key, description=description, pattern=re.compile(pattern, flags), in_request_only=in_request_only
    )


_MESSAGE_DETECTORS = (
    _detector(
        "greets_first",
        "greets before asking",
        r"^\s*(?:hi|hello|hey|hiya|howdy|greetings|yo|good\s+(?:morning|afternoon|evening)|hola|bonjour|hallo|olá|ola)\b",
    ),
    _detector(
        "code_before_explanation",
        "wants the code before any explanation",
        r"\b(?:just\s+(?:give|show|send)\s+me\s+the\s+code|code\s+first|(?:only|just)\s+the\s+code|"
        r"skip\s+the\s+(?:explanation|talk|theory)|no\s+explanations?(?:\s+needed)?|without\s+(?:any\s+)?explanations?|"
        r"explain\s+later)\b",
    ),
    _detector(
        "asks_for_code",
        "asks for code",
        r"\b(?:(?:write|show|give|send|share|paste|generate)\s+(?:me\s+)?(?:the\s+|some\s+|a\s+|an\s+)?(?:[\w+#-]+\s+)?"
        r"(?:code|snippet|script|function|class|implementation|regex|query|program)|code\s+(?:for|to|that|please|pls)|"
        r"(?:can|could)\s+you\s+(?:write|code|implement)|implement\s+(?:a|an|the)\s+\w+)\b",
    ),
    _detector(
        "asks_for_examples",
        "asks for examples",
        r"\b(?:(?:give|show|provide)\s+(?:me\s+)?(?:an?\s+|some\s+|a\s+few\s+|concrete\s+|more\s+)?examples?|"
        r"for\s+(?:example|instance)\s*\?|examples?\s+(?:please|pls)|with\s+(?:an?\s+|some\s+)?examples?|"
        r"(?:an?\s+|some\s+)example\s+of)",
        in_request_only=True,
    ),
    _detector(
        "prefers_bullets",
        "prefers bullet points",
        r"\b(?:bullet(?:ed)?(?!\s+journal)(?:\s+(?:points?|list))?|bullets|as\s+a\s+(?:numbered\s+)?list|in\s+a\s+list|"
        r"numbered\s+list|list\s+format|point\s+form)\b",
    ),
    _detector(
        "prefers_tables", "prefers tables", r"\b(?:(?:as|in)\s+a\s+table|tabular|table\s+format|markdown\s+table)\b"
    ),
    _detector(
        "prefers_brevity",
        "prefers short answers",
        r"\b(?:short\s+(?:answer|version|reply|response)|keep\s+it\s+(?:short|brief|simple)|briefly|be\s+brief|"
        r"concise(?:ly)?|tl;?dr|in\s+(?:one|a\s+single|a\s+few|two)\s+(?:sentence|line|word)s?|in\s+a\s+nutshell|"
        r"just\s+the\s+answer|(?<!not\s)(?<!take\s)(?<!been\s)(?<!for\s)too\s+long(?!\s+ago)|shorter|one[- ]liner)\b",
    ),
    _detector(
        "prefers_detail",
        "asks for detailed answers",
        r"\b(?:in\s+(?:more\s+|great\s+|full\s+)?detail|detailed|thorough(?:ly)?|in[- ]depth|elaborate|more\s+details?|"
        r"(?<!life's\s)(?<!life’s\s)(?<!life\sis\s)too\s+short|explain\s+(?:everything|fully))\b",
    ),
    _detector(
        "asks_step_by_step",
        "asks for step-by-step guidance",
        r"\bstep[- ]by[- ]step\b|\b(?:walk|talk)\s+me\s+through\b",
        in_request_only=True,
    ),
    _detector(
        "asks_for_sources",
        "asks for sources",
        r"(?<!open )(?<!open-)\b(?:sources?(?!\s+(?:code|of|like)\b)|citations?|references?|cite)\b|\blinks?\s+to\b|"
        r"\b(?:a|the|any|some)\s+links?\b|\bwhere\s+did\s+you\s+(?:read|hear|learn)\s+(?:that|this)\b|"
        r"\bwhere\s+did\s+you\s+(?:get|find)\s+(?:that|this|these|those)\s+"
        r"(?:information|info|data|numbers?|figures?|facts?|claims?|quotes?|statistics?|stats)\b",
        in_request_only=True,
    ),
    _detector(
        "asks_for_explanation",
        "asks for explanations",
        r"\b(?:explain|why\s+(?:does|do|is|are|did|would|should)|how\s+does\s+[^?.!]{1,40}\s+work|"
        r"what\s+does\s+[^?.!]{1,40}\s+mean|eli5|help\s+me\s+understand)\b",
    ),
    _detector(
        "asks_for_comparison",
        "asks for comparisons",
        r"\b(?:compare|(?<!in )comparison|differences?\s+between|(?:vs|versus)\b(?!\.?(?:\s+" + _NAME_WORD + r"){1,2}"
        r"\s+(?:match|game|fight|final|derby|bout|series|race|showdown)\b(?!\s+(?:engines?|dev\w*|design\w*|theory)\b))"
        r"|pros\s+and\s+cons|which\s+is\s+better)\b",
        in_request_only=True,
    ),
    _detector(
        "asks_for_summary",
        "asks for summaries",
        r"\b(?:summari[sz]e|summary|recap|sum\s+(?:it\s+)?up)\b",
        in_request_only=True,
    ),
    _detector("asks_for_translation", "asks for translations", r"\btranslat(?:e|ion|ing)\b", in_request_only=True),
    _detector(
        "shares_code",
        "shares code",
        r"```|^\s*(?:def\s+\w+\(|class\s+\w+[:(]|import\s+\w+|from\s+\S+\s+import\s|function\s+\w+\(|"
        r"(?:const|let|var)\s+\w+\s*=|#include\s*<|public\s+(?:static\s+)?\w+)",
        re.MULTILINE,
    ),
    _detector(
        "shares_errors",
        "shares error messages",
        r"Traceback \(most recent call last\)|\b\w*(?:Error|Exception):\s|\berror\s+(?:message|code)\b|"
        r"\bstack\s*trace\b",
    ),
    _detector("says_please", "asks politely", r"\b(?:please|pls|plz)\b"),
    _detector("says_thanks", "says thanks", r"\b(?:thanks|thank\s+you|thx|much\s+appreciated|appreciate\s+it)\b"),
)

_CORRECTION = re.compile(
    r"^\s*(?:no|nope)\b\s*[,.!]|\b(?:that's|that\s+is|this\s+is|you're|you\s+are)\s+(?:wrong|incorrect|"
    r"not\s+(?:right|correct|what\s+i\s+(?:asked|meant|wanted)))|^\s*actually\s*,|\b(?:that|it)\s+(?:doesn't|does\s+not|"
    r"didn't|did\s+not)\s+work\b",
    re.IGNORECASE,
)
_EXPLAIN_REQUEST = re.compile(
    r"\b(?:explain|what\s+does\s+(?:this|that|it|line)|how\s+does\s+(?:this|that|it)\s+work|walk\s+me\s+through)\b",
    re.IGNORECASE,
)
_SENTENCE_ENDS = (".", "!", "?", "\n")
_REQUEST_OPENING = re.compile(
    r"\s*(?:(?:and|also|so|now|then|ok|okay)\s*,?\s+)?(?:please|pls|plz|can|could|would|will|give|show|send|provide|"
    r"include|add|list|cite|summari[sz]e|sum|recap|translate|compare|explain|tell|help|let\s+me|i\s+need|i\s+want|"
    r"i'd\s+like|i\s+would\s+like|walk|talk|what|which|how|where|do\s+you|any)\b",
    re.IGNORECASE,
)
_CODE_IN_REPLY = re.compile(r"```|^\s*(?:def|class|function|import|const|let|var)\s+\w+", re.MULTILINE)
_QUESTION_OPENING = re.compile(
    r"^\s*(?:what|why|how|when|where|which|who|whom|whose|can|could|would|should|is|are|does|do|did|and|also|"
    r"what\s+about|how\s+about)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_CONTENT_STOPWORDS = (
    word_set("""
    a about above after again against all also am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers him his how i if in into is it its just me more most my no nor not now of off on once only or other our out
    over own same she should so some such than that the their them then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your yours
    please thanks thank know tell like want need use make get got good best way ways thing things something really
    maybe okay yeah yes hey hello one two still well much many lot lots say said think does don't can't i'm it's
    what's that's you're there's let let's give show help explain example examples shared share
    going doing getting anything everything nothing anyone everyone someone special tough hard
    """)
    | CHAT_FILLER
)
_KEY_VERBS = word_set("ask say share prefer write correct greet followup")  # after the plural fold
_LANGUAGE_WORDS = {
    # "me" and "no" are Spanish too, and "a" and "as" Portuguese: listed here as well, they no
    # longer tip English into Spanish ("I work as a nurse" read as Portuguese).
    "en": "the and is are you that this what how with for of to it my can do please have was not me no just give"
    " i a an as at in on be we",
    "es": "el la los las que y es en por para con una un no como qué cómo está pero mi me gracias hola del",
    "fr": "le la les des et est je tu vous que qui pour dans avec une un pas ce mon merci bonjour c'est du",
    "de": "der die das und ist ich du sie nicht mit für ein eine auf wie was zu den dem bitte danke",
    "pt": "o a os as que de e é em para com uma um não como eu você obrigado obrigada olá está mas meu isso",
    "it": "il lo la gli le che di e è per con una un non come io tu grazie ciao sono mio questo",
    "nl": "de het een en is ik je jij niet met voor van op wat hoe dat dit dank hallo zijn",
}
_LANGUAGE_PROFILES = {code: frozenset(words.split()) for code, words in _LANGUAGE_WORDS.items()}
_LANGUAGE_NAMES = {
    "en": "English",
    "es": "Spanish",
    "fr": "French",
    "de": "German",
    "pt": "Portuguese",
    "it": "Italian",
    "nl": "Dutch",
    "ru": "Russian",
    "el": "Greek",
    "ar": "Arabic",
    "he": "Hebrew",
    "hi": "Hindi",
    "th": "Thai",
    "ko": "Korean",
    "ja": "Japanese",
    "zh": "Chinese",
}
# Script ranges, most specific first: kana marks Japanese even among Han characters.
_SCRIPTS = (
    ("ja", re.compile(r"[\u3040-\u30ff]")),
    ("ko", re.compile(r"[\uac00-\ud7af\u1100-\u11ff]")),
    ("zh", re.compile(r"[\u4e00-\u9fff]")),
    ("ru", re.compile(r"[\u0400-\u04ff]")),
    ("el", re.compile(r"[\u0370-\u03ff]")),
    ("ar", re.compile(r"[\u0600-\u06ff]")),
    ("he", re.compile(r"[\u0590-\u05ff]")),
    ("hi", re.compile(r"[\u0900-\u097f]")),
    ("th", re.compile(r"[\u0e00-\u0e7f]")),
)
_MIN_SCRIPT_CHARACTERS = 2
_MIN_LANGUAGE_HITS = 2
_MAX_EVIDENCE = 80


def observe_patterns(
    user_text: str, *, previous_user_text: str | None = None, assistant_text: str | None = None
) -> list[PatternObservation]:
    """The interaction patterns one user message shows, given optionally the user's previous message and the reply."""
    observations: list[PatternObservation] = []
    for detector in _MESSAGE_DETECTORS:
        matches = detector.pattern.finditer(user_text)
        match = next((m for m in matches if not detector.in_request_only or _in_request(user_text, m)), None)
        if match:
            observations.append(PatternObservation(detector.key, detector.description, _evidence(match.group())))
    if assistant_text is not None:
        observations.extend(_reply_patterns(user_text, assistant_text))
    if previous_user_text is not None:
        follow_up = _follow_up(user_text, previous_user_text)
        if follow_up is not None:
            observations.append(follow_up)
    language = _language(user_text)
    if language is not None:
        observations.append(language)
    unique: dict[str, PatternObservation] = {}
    for observation in observations:
        unique.setdefault(observation.key, observation)
    return list(unique.values())


def _in_request(text: str, match: re.Match[str]) -> bool:
    """Whether ``match`` sits in a sentence that asks for something: a question, or one opening with a request."""
    start = max(text.rfind(mark, 0, match.start()) for mark in _SENTENCE_ENDS) + 1
    ends = [found for found in (text.find(mark, match.end()) for mark in _SENTENCE_ENDS) if found >= 0]
    end = min(ends, default=len(text))
    return text[end : end + 1] == "?" or _REQUEST_OPENING.match(text, start, end) is not None


def _reply_patterns(user_text: str, assistant_text: str) -> list[PatternObservation]:
    """Patterns that only make sense as a reaction to the assistant's last reply."""
    found = []
    correction = _CORRECTION.search(user_text)
    if correction:
        found.append(PatternObservation("corrects_answers", "corrects the assistant", _evidence(correction.group())))
    explain = _EXPLAIN_REQUEST.search(user_text)
    if explain and _CODE_IN_REPLY.search(assistant_text):
        found.append(
            PatternObservation("asks_to_explain_code", "asks for code to be explained", _evidence(explain.group()))
        )
    return found


def _follow_up(user_text: str, previous_user_text: str) -> PatternObservation | None:
    """A question that returns to a content word of the previous message, keyed by the strongest shared word."""
    if "?" not in user_text and not _QUESTION_OPENING.search(user_text):
        return None
    current, previous = _content_words(user_text), _content_words(previous_user_text)
    shared = set(current) & set(previous)
    if not shared:
        return None
    topic = min(shared, key=lambda word: (-(current[word] + previous[word]), -len(word), word))
    # The key holds the folded word ("memorie" of "memories"), so plurals meet; people read the word as said
    # (lower-cased, without a possessive).
    said = next(
        (word.casefold().removesuffix("'s") for word in _WORD.findall(user_text) if _stem(word.casefold()) == topic),
        topic,
    )
    return PatternObservation(f"asks_followups:{topic}", f"asks follow-up questions about {said}", said)


def topic_words(text: str) -> frozenset[str]:
    """What ``text`` (a query, or a pattern's key such as "asks_followups:dog") is about: its content words.

    Plurals are folded and the keys' own verbs ("asks", "prefers", "followups") left out, so
    "Any dogs?" meets "asks_followups:dog" and "What is this for?" meets nothing.
    """
    return frozenset(word for word in _content_words(text.replace(":", " ")) if word not in _KEY_VERBS)


@functools.lru_cache(maxsize=4096)
def key_topic_words(key: str) -> frozenset[str]:
    """``topic_words`` of a pattern's key, remembered: ranking patterns for a query reads every key of the user."""
    return topic_words(key)


def _content_words(text: str) -> Counter[str]:
    words = (_stem(word.casefold()) for word in _WORD.findall(text))
    return Counter(word for word in words if len(word) >= 3 and word not in _CONTENT_STOPWORDS)


def _stem(word: str) -> str:
    """A light plural fold so "dogs" and "dog" meet; anything subtler is left alone."""
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _language(text: str) -> PatternObservation | None:
    """The language a message is written in, from its script or its commonest function words."""
    for code, script in _SCRIPTS:
        characters = script.findall(text)
        if len(characters) >= _MIN_SCRIPT_CHARACTERS:
            return _written_in(code, "".join(characters[:10]))
    words = [word.casefold() for word in _WORD.findall(text)]
    hits = {code: [word for word in words if word in profile] for code, profile in _LANGUAGE_PROFILES.items()}
    ranked = sorted(hits.items(), key=lambda item: (-len(set(item[1])), item[0]))
    (best, best_words), (_, runner_up) = ranked[0], ranked[1]
    if len(set(best_words)) < _MIN_LANGUAGE_HITS or len(set(best_words)) <= len(set(runner_up)):
        return None
    return _written_in(best, " ".join(dict.fromkeys(best_words)))


def _written_in(code: str, evidence: str) -> PatternObservation:
    return PatternObservation(f"writes_in:{code}", f"writes in {_LANGUAGE_NAMES[code]}", _evidence(evidence))


def _evidence(span: str) -> str:
    text = " ".join(span.split())
    return text if len(text) <= _MAX_EVIDENCE else text[: _MAX_EVIDENCE - 1] + "…"
