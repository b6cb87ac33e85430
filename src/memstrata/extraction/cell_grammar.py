"""The vocabulary of the cell rules: cell kinds, value shapes, and the regex pieces rules are built from.

Patterns run case-insensitively over one sentence whose curly apostrophes are straightened.
Negation is handled by construction: the slot between "I" and the verb (``ADVERBS``) admits
adverbs ("I really live in ...") but never "don't", "not" or "never".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum, StrEnum

from memstrata.extraction.gazetteers import word_set


class CellKind(StrEnum):
    """The type of a memory cell."""

    FACT = "fact"
    PREFERENCE = "preference"
    TASK = "task"
    DECISION = "decision"
    PLAN = "plan"
    RISK = "risk"


class Shape(Enum):
    """How a captured value is cleaned and checked."""

    PHRASE = "phrase"  # a short noun phrase: a place, an employer, a job
    LIST = "list"  # one or more noun phrases: likes, dislikes, allergies
    CLAUSE = "clause"  # an action or a situation: plans, tasks, decisions, risks
    NAME = "name"  # capitalised words
    WORD = "word"  # taken as matched: an age, a diet, an email address


@dataclass(kw_only=True, frozen=True, slots=True)
class Rule:
    """One pattern and the cell it makes; ``attribute`` may name the groups {thing}, {relation}, {animal}, {date}."""

    kind: CellKind
    attribute: str
    pattern: re.Pattern[str]
    shape: Shape
    salience: float
    is_single_valued: bool


ADVERBS = (
    r"(?:(?:really|just|also|still|now|currently|actually|totally|absolutely|truly|honestly|definitely|recently|"
    r"finally|officially|kinda|pretty|sort\s+of|kind\s+of|literally|genuinely|usually|always|mostly|even|do|so|"
    r"especially|already|originally|happily|permanently)\s+){0,3}"
)
SUBJECT_I = r"\bi\s+" + ADVERBS
SUBJECT_I_AM = r"\b(?:i'm|im|i\s+am)\s+" + ADVERBS
SUBJECT_I_HAVE = r"\b(?:i've|ive|i\s+have)\s+" + ADVERBS
SUBJECT_WE_OR_I = r"\b(?:i|we)\s+" + ADVERBS
SUBJECT_WE_OR_I_AM = r"\b(?:i'm|im|i\s+am|we're|we\s+are)\s+" + ADVERBS
SUBJECT_WILL = r"\b(?:i'll|i\s+will|we'll|we\s+will)\s+" + ADVERBS

PHRASE = r"(?P<value>[^,;:.!?()\[\]\n\"]{1,80})"
LIST = r"(?P<value>[^;:.!?()\[\]\n\"]{1,160})"
CLAUSE = r"(?P<value>[^;:.!?()\[\]\n\"]{2,200})"
NAME = r"(?P<value>(?-i:[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,2}))"
# One's own name may be typed in lower case ("my name is john"); other people's names must be capitalised.
OWN_NAME = r"(?P<value>[^\W\d_][\w'-]*(?-i:(?:\s+[A-Z][\w'-]*){0,2}))"
MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
# Time words that make a statement about the future a plan.
COMING_PERIOD = (
    r"(?:next|this\s+coming|this)\s+(?:week|weekend|month|year|summer|winter|spring|fall|autumn|" + WEEKDAY + ")"
)
SOON = (
    r"(?:tomorrow|tonight|next\s+\w+|this\s+(?:weekend|week|month|evening|afternoon)|on\s+"
    + WEEKDAY
    + r"|in\s+(?:a|two|three|\d+)\s+(?:days?|weeks?|months?))"
)
WILL = r"(?:'ll|\s+will|'m\s+going\s+to|\s+am\s+going\s+to|'re\s+going\s+to|\s+are\s+going\s+to)"
DATE = (
    rf"(?:{MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH}"
    rf"(?:,?\s+\d{{4}})?|\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?|{WEEKDAY}|the\s+\d{{1,2}}(?:st|nd|rd|th))"
)

JOB_NOUNS = word_set(
    """
    engineer developer programmer designer teacher professor lecturer tutor nurse doctor physician surgeon dentist
    pharmacist therapist counselor counsellor psychologist psychiatrist lawyer attorney accountant analyst consultant
    manager director executive ceo cto cfo founder cofounder co-founder entrepreneur scientist researcher student
    writer author journalist editor artist painter photographer musician singer actor actress chef cook baker waiter
    waitress bartender barista cashier clerk driver pilot mechanic electrician plumber carpenter architect farmer
    firefighter officer soldier librarian secretary assistant receptionist administrator salesperson marketer
    recruiter intern freelancer contractor coach trainer instructor athlete dancer vet veterinarian paramedic
    technician specialist coordinator supervisor worker banker economist translator interpreter builder cleaner
    nanny babysitter caregiver streamer youtuber blogger producer illustrator animator scientist teller detective
    policeman policewoman judge professor postdoc mathematician physicist chemist biologist linguist historian
    """
)
# Any listed job noun, and a job phrase ending in one: "nurse", "senior software engineer".
JOB_NOUN = "(?:" + "|".join(sorted(JOB_NOUNS)) + ")"
# Two job nouns make one job: "assistant manager", "research assistant".
JOB = r"(?P<value>(?:[\w-]+\s+){0,3}?" + JOB_NOUN + r"(?:\s+" + JOB_NOUN + r")?)s?\b"

RELATIONS = (
    r"(?:(?:older|younger|little|big|baby|twin|best|oldest|youngest|eldest)\s+)?"
    r"(?:sister|brother|wife|husband|partner|spouse|boyfriend|girlfriend|bf|gf|fianc[ée]e?|friend|mom|mum|mother|"
    r"dad|father|son|daughter|cousin|aunt|uncle|niece|nephew|grandma|grandpa|grandmother|grandfather|boss|"
    r"roommate|flatmate|neighbou?r|stepmom|stepdad|stepson|stepdaughter)"
)
# What joins a relation or a pet to its name: "my sister Anna", "my dog's name is Max", "my wife, Ana".
NAMED_AS = r"(?:'s\s+name\s+is|\s+is\s+(?:called|named)|\s+named|\s+called|\s*,)?\s+"
# The same without the comma: "my sister Anna", "my dog's name is Max" (the comma form has its own rule).
NAMED_BY_WORDS = r"(?:'s\s+name\s+is|\s+is\s+(?:called|named)|\s+named|\s+called)?\s+"
FAVOURITE = r"\bmy\s+(?:absolute\s+|all[- ]time\s+|current\s+)?fav(?:ou?rite|e)"
ANIMALS = (
    r"(?:dog|puppy|pup|cat|kitten|kitty|hamster|rabbit|bunny|parrot|bird|fish|turtle|tortoise|snake|horse|pony|"
    r"guinea\s+pig|ferret|lizard|gecko)s?"
)
COUNT = r"(?:a|an|one|two|three|four|five|another|\d{1,2})"


def rule(kind: CellKind, attribute: str, pattern: str, shape: Shape, salience: float, *, single: bool = False) -> Rule:
    """A rule whose pattern is compiled case-insensitively."""
    return Rule(
        kind=kind,
        attribute=attribute,
        pattern=re.compile(pattern, re.IGNORECASE),
        shape=shape,
        salience=salience,
        is_single_valued=single,
    )
