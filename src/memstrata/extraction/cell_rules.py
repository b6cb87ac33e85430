"""The rule table behind ``extract_cells``: first-person statement patterns, each naming the cell it makes."""

from __future__ import annotations

from memstrata.extraction.cell_grammar import (
    ADVERBS,
    ANIMALS,
    CLAUSE,
    COMING_PERIOD,
    COUNT,
    DATE,
    FAVOURITE,
    JOB,
    JOB_NOUN,
    LIST,
    NAME,
    NAMED_AS,
    NAMED_BY_WORDS,
    OWN_NAME,
    PHRASE,
    RELATIONS,
    SOON,
    SUBJECT_I,
    SUBJECT_I_AM,
    SUBJECT_I_HAVE,
    SUBJECT_WE_OR_I,
    SUBJECT_WE_OR_I_AM,
    SUBJECT_WILL,
    WILL,
    CellKind,
    Rule,
    Shape,
    rule,
)

_FACT, _PREFERENCE, _TASK = CellKind.FACT, CellKind.PREFERENCE, CellKind.TASK
_DECISION, _PLAN, _RISK = CellKind.DECISION, CellKind.PLAN, CellKind.RISK

RULES: tuple[Rule, ...] = (
    # Preferences.
    rule(
        _PREFERENCE,
        "favourite:{thing}",
        FAVOURITE + r"\s+(?P<thing>[a-z][a-z ]{0,30}?)\s+"
        r"(?:is|are|was|has\s+to\s+be|would\s+be|=)\s+" + PHRASE,
        Shape.PHRASE,
        0.7,
        single=True,
    ),
    rule(
        _PREFERENCE,
        "favourite:{thing}",
        r"(?:^|,\s*|\band\s+|\bbut\s+)(?P<value>[\w'-]+(?:\s+[\w'-]+){0,2})\s+(?:is|are)\s+(?:definitely\s+|probably\s+)?"
        + FAVOURITE
        + r"\s+(?P<thing>[a-z]+(?:\s+[a-z]+)?)\b",
        Shape.PHRASE,
        0.7,
        single=True,
    ),
    rule(_PREFERENCE, "likes:{key}", SUBJECT_I + r"(?:like|love|enjoy|adore|dig)\s+" + LIST, Shape.LIST, 0.6),
    rule(
        _PREFERENCE,
        "likes:{key}",
        SUBJECT_I_AM + r"(?:really\s+)?(?:into|a\s+(?:big\s+|huge\s+)?fan\s+of|fond\s+of|keen\s+on|passionate\s+about|"
        r"obsessed\s+with|crazy\s+about|addicted\s+to|in\s+love\s+with)\s+" + LIST,
        Shape.LIST,
        0.6,
    ),
    rule(_PREFERENCE, "prefers:{key}", SUBJECT_I + r"prefer\s+" + LIST, Shape.LIST, 0.65),
    rule(
        _PREFERENCE,
        "dislikes:{key}",
        SUBJECT_I
        + r"(?:hate|dislike|detest|loathe|can't\s+stand|cannot\s+stand|can't\s+bear|(?:don't|dont|do\s+not)\s+"
        r"(?:really\s+)?(?:like|enjoy|love))\s+" + LIST,
        Shape.LIST,
        0.6,
    ),
    rule(
        _PREFERENCE,
        "dislikes:{key}",
        SUBJECT_I_AM + r"not\s+(?:a\s+(?:big\s+|huge\s+)?fan\s+of|into)\s+" + LIST,
        Shape.LIST,
        0.6,
    ),
    # Identity.
    rule(_FACT, "name", r"\bmy\s+name(?:'s|\s+is)\s+" + OWN_NAME, Shape.NAME, 0.9, single=True),
    rule(_FACT, "name", r"(?:\b(?:i'm|i\s+am)\s+called|\bcall\s+me)\s+" + OWN_NAME, Shape.NAME, 0.9, single=True),
    rule(
        _FACT,
        "age",
        SUBJECT_I_AM + r"(?P<value>\d{1,3})\s*(?:years?|yrs?|y/?o)(?:\s+old)?\b",
        Shape.WORD,
        0.8,
        single=True,
    ),
    rule(_FACT, "age", SUBJECT_I_AM + r"(?P<value>\d{1,3})\s*(?:[.!,]|$)", Shape.WORD, 0.8, single=True),
    rule(_FACT, "age", SUBJECT_I + r"turned\s+(?P<value>\d{1,3})\b", Shape.WORD, 0.8, single=True),
    rule(_FACT, "job", SUBJECT_I + r"work\s+as\s+(?:an?\s+)?" + PHRASE, Shape.PHRASE, 0.8, single=True),
    rule(_FACT, "job", SUBJECT_I_AM + r"(?:an?\s+)" + JOB, Shape.PHRASE, 0.8, single=True),
    # Work.
    rule(_FACT, "employer", SUBJECT_I + r"work\s+(?:at|for)\s+" + PHRASE, Shape.PHRASE, 0.8, single=True),
    rule(
        _FACT,
        "employer",
        SUBJECT_I_AM + r"an?\s+(?:[\w-]+\s+){0,3}?(?:" + JOB_NOUN + r")\s+(?:at|for)\s+" + PHRASE,
        Shape.PHRASE,
        0.8,
        single=True,
    ),
    rule(
        _FACT,
        "employer",
        # "I started with workshops" or "by learning the basics" is no employer: those need the work or job named.
        r"\b(?:i|i've|i\s+have)\s+" + ADVERBS + r"(?:(?:started|began)\s+(?:(?:working|a\s+(?:new\s+)?job|"
        r"my\s+(?:new\s+)?job)\s+(?:at|by|with)|at)|(?:got\s+a\s+(?:new\s+)?job|got\s+hired|been\s+hired)"
        r"\s+(?:at|by|with))\s+" + PHRASE,
        Shape.PHRASE,
        0.8,
        single=True,
    ),
    rule(
        _FACT,
        "employer",
        SUBJECT_I_AM + r"(?:employed|working)\s+(?:at|by|for)\s+" + PHRASE,
        Shape.PHRASE,
        0.8,
        single=True,
    ),
    # Location and origin.
    rule(_FACT, "location", SUBJECT_I + r"(?:live|reside)\s+in\s+" + PHRASE, Shape.PHRASE, 0.8, single=True),
    rule(
        _FACT,
        "location",
        SUBJECT_I_AM + r"(?:living|based|located|settled)\s+in\s+" + PHRASE,
        Shape.PHRASE,
        0.8,
        single=True,
    ),
    rule(
        _FACT,
        "location",
        SUBJECT_I_HAVE + r"(?:been\s+living|lived)\s+in\s+" + PHRASE,
        Shape.PHRASE,
        0.75,
        single=True,
    ),
    rule(
        _FACT,
        "location",
        r"\b(?:i|i've|i\s+have)\s+" + ADVERBS + r"(?:moved|relocated)\s+(?:back\s+)?to\s+" + PHRASE,
        Shape.PHRASE,
        0.8,
        single=True,
    ),
    rule(_FACT, "origin", SUBJECT_I_AM + r"(?:originally\s+)?from\s+" + PHRASE, Shape.PHRASE, 0.75, single=True),
    rule(
        _FACT,
        "origin",
        SUBJECT_I + r"(?:come\s+from|came\s+from|grew\s+up\s+in|moved\s+(?:here\s+)?from)\s+" + PHRASE,
        Shape.PHRASE,
        0.75,
        single=True,
    ),
    rule(
        _FACT,
        "origin",
        r"\bi\s+was\s+(?:born\s+and\s+raised|born|raised)\s+in\s+" + PHRASE,
        Shape.PHRASE,
        0.75,
        single=True,
    ),
    # Relationships and pets: the engine decides single or multi from the relation.
    rule(
        _FACT,
        "relationship:{relation}",
        r"\bmy\s+(?P<relation>" + RELATIONS + ")" + NAMED_BY_WORDS + NAME,
        Shape.NAME,
        0.75,
    ),
    rule(
        _FACT,
        "relationship:{relation}",
        # "My wife, Ana, ..." names her; "my girlfriend, Toby and I" lists two people (Toby is the dog).
        r"\bmy\s+(?P<relation>" + RELATIONS + r")\s*,\s+(?>" + NAME + r")(?!\s+and\s+(?:i|me)\b)",
        Shape.NAME,
        0.75,
    ),
    # "Max is my mother's cat" names the cat, not the mother.
    rule(
        _FACT,
        "relationship:{relation}",
        NAME + r"\s+is\s+my\s+(?P<relation>" + RELATIONS + r")\b(?!')",
        Shape.NAME,
        0.75,
    ),
    rule(
        _FACT,
        "relationship:{relation}",
        SUBJECT_I + r"have\s+" + COUNT + r"\s+(?P<relation>" + RELATIONS + r")\s+(?:named|called)\s+" + NAME,
        Shape.NAME,
        0.75,
    ),
    rule(
        _FACT,
        "marital_status",
        SUBJECT_I_AM
        + r"(?P<value>married|engaged|single|divorced|widowed|separated)\b(?!\s+(?:parent|mom|dad|mother|father))",
        Shape.WORD,
        0.75,
        single=True,
    ),
    rule(
        _FACT,
        "marital_status",
        SUBJECT_I + r"got\s+(?P<value>married|engaged|divorced)\b",
        Shape.WORD,
        0.75,
        single=True,
    ),
    rule(
        _FACT,
        "pet:{animal}",
        SUBJECT_I
        + r"(?:have|own|got|adopted|rescued)\s+"
        + COUNT
        + r"\s+(?:new\s+|little\s+|rescue\s+)?(?P<animal>"
        + ANIMALS
        + r")(?:\s+(?:named|called)\s+"
        + NAME
        + r")?",
        Shape.NAME,
        0.7,
    ),
    rule(
        _FACT,
        "pet:{animal}",
        r"\bmy\s+(?P<animal>" + ANIMALS + ")" + NAMED_AS + NAME,
        Shape.NAME,
        0.7,
    ),
    # Health and diet.
    rule(
        _FACT,
        "allergy:{key}",
        SUBJECT_I_AM + r"(?:severely\s+|very\s+|deathly\s+)?allergic\s+to\s+" + LIST,
        Shape.LIST,
        0.9,
    ),
    rule(
        _FACT,
        "allergy:{key}",
        r"\b(?:i\s+have\s+an?|my)\s+(?:severe\s+|bad\s+|mild\s+)?" + r"(?P<value>[\w-]+(?:\s+[\w-]+)?)\s+allergy",
        Shape.LIST,
        0.9,
    ),
    rule(
        _FACT,
        "diet",
        SUBJECT_I_AM + r"(?:a\s+)?(?:strict\s+)?(?P<value>vegetarian|vegan|pescatarian|pescetarian|keto|gluten[- ]free|"
        r"lactose[- ]intolerant|celiac|coeliac|kosher|halal)\b",
        Shape.WORD,
        0.8,
        single=True,
    ),
    rule(
        _FACT,
        "avoids:{key}",
        SUBJECT_I + r"(?:don't|dont|do\s+not|can't|cannot|never)\s+eat\s+" + LIST,
        Shape.LIST,
        0.75,
    ),
    # Dates and contact details.
    rule(
        _FACT,
        "birthday",
        r"\bmy\s+(?:birthday|bday|b-day)\s+is\s+(?:on\s+)?(?P<value>" + DATE + r")",
        Shape.WORD,
        0.8,
        single=True,
    ),
    rule(_FACT, "birthday", r"\bi\s+was\s+born\s+on\s+(?P<value>" + DATE + r")", Shape.WORD, 0.8, single=True),
    rule(
        _FACT,
        "email",
        r"\bmy\s+(?:e-?mail|email\s+address)\s+is\s+(?P<value>[\w.+-]+@[\w-]+(?:\.[\w-]+)+)",
        Shape.WORD,
        0.8,
        single=True,
    ),
    rule(
        _FACT,
        "phone",
        r"\bmy\s+(?:phone\s+|cell\s+|mobile\s+)?(?:number|phone)\s+is\s+(?P<value>\+?\d[\d ()-]{5,20}\d)",
        Shape.WORD,
        0.8,
        single=True,
    ),
    rule(
        _FACT, "event:{date}:{key}", r"\bon\s+(?P<date>" + DATE + r")\s*,?\s+(?:i|we)\s+" + CLAUSE, Shape.CLAUSE, 0.55
    ),
    # Plans.
    rule(
        _PLAN,
        "plan:{key}",
        SUBJECT_WE_OR_I_AM + r"(?:planning|hoping|aiming|intending|going|about)\s+(?:to|on)\s+" + CLAUSE,
        Shape.CLAUSE,
        0.65,
    ),
    rule(_PLAN, "plan:{key}", SUBJECT_WE_OR_I_AM + r"gonna\s+" + CLAUSE, Shape.CLAUSE, 0.6),
    rule(_PLAN, "plan:{key}", SUBJECT_WE_OR_I + r"(?:plan|intend)\s+(?:to|on)\s+" + CLAUSE, Shape.CLAUSE, 0.65),
    rule(
        _PLAN,
        "plan:{key}",
        SUBJECT_WE_OR_I_AM + r"(?:thinking\s+(?:about|of)|considering)\s+(?P<value>\w+ing\b[^;:.!?()\n]{0,120})",
        Shape.CLAUSE,
        0.55,
    ),
    rule(
        _PLAN,
        "plan:{key}",
        SUBJECT_WE_OR_I_AM + r"(?P<value>(?:moving|relocating|flying|travel+ing|heading)\s+to\s+[^;:.!?()\n]{1,120})",
        Shape.CLAUSE,
        0.65,
    ),
    rule(
        _PLAN,
        "plan:{key}",
        r"\b" + COMING_PERIOD + r"\s*,?\s+(?:i|we)" + WILL + r"\s+" + CLAUSE,
        Shape.CLAUSE,
        0.65,
    ),
    rule(
        _PLAN,
        "plan:{key}",
        SUBJECT_WILL + r"(?P<value>[^;:.!?()\n]{1,80}?\s+" + SOON + r")\b",
        Shape.CLAUSE,
        0.6,
    ),
    # Tasks.
    rule(
        _TASK,
        "task:{key}",
        # A bare "I got to" tells what one had the chance to do ("I got to hang with nature"), not a task.
        r"\b(?:(?:i've|i\s+have)\s+"
        + ADVERBS
        + r"(?:need\s+to|have\s+to|got\s+to|gotta|must|should)|i\s+"
        + ADVERBS
        + r"(?:need\s+to|have\s+to|gotta|must|should))\s+"
        + CLAUSE,
        Shape.CLAUSE,
        0.7,
    ),
    # A request, where a clause starts or after a filler or "you" ("Remind me to …", "Thanks, remind me to …",
    # "Can you also remind me to …", "I'd like you to remind me to …"); not "a painting to remind me to stay
    # true" or "these photos remind me to slow down".
    rule(
        _TASK,
        "task:{key}",
        r"(?:^\W*|[,;:!]\s*|\b(?:hey|hi|oh|so|ok|okay|also|just|and|then|now|btw|please|pls|kindly|you|you\s+to)\s+)"
        r"remind\s+me\s+(?:to|about)\s+" + CLAUSE,
        Shape.CLAUSE,
        0.85,
    ),
    rule(
        _TASK,
        "task:{key}",
        r"\b(?:don't|dont|do\s+not)\s+let\s+me\s+forget\s+(?:to\s+|about\s+)?" + CLAUSE,
        Shape.CLAUSE,
        0.85,
    ),
    rule(_TASK, "task:{key}", r"\bto-?do\s*:\s*(?P<value>[^;.!?()\n]{2,160})", Shape.CLAUSE, 0.75),
    # Decisions.
    rule(
        _DECISION,
        "decision:{key}",
        r"\b(?:i|we)(?:'ve|\s+have)?\s+"
        + ADVERBS
        + r"(?:decided|agreed|resolved|settled)\s+(?:to\s+|on\s+|that\s+)?"
        + CLAUSE,
        Shape.CLAUSE,
        0.75,
    ),
    rule(
        _DECISION,
        "decision:{key}",
        SUBJECT_WE_OR_I + r"(?:chose|picked(?!\s+up\b)|opted\s+for)\s+" + CLAUSE,
        Shape.CLAUSE,
        0.7,
    ),
    rule(
        _DECISION,
        "decision:{key}",
        r"\b(?:i'll|i\s+will|we'll|we\s+will|let's|lets|let\s+us|i'm|we're|i\s+am|we\s+are)\s+(?:go|going)\s+with\s+"
        + CLAUSE,
        Shape.CLAUSE,
        0.75,
    ),
    rule(_DECISION, "decision:{key}", r"\bthe\s+decision\s+is\s+(?:to\s+)?" + CLAUSE, Shape.CLAUSE, 0.75),
    # Risks.
    rule(
        _RISK,
        "risk:{key}",
        SUBJECT_I_AM
        + r"(?:a\s+bit\s+|a\s+little\s+|really\s+|very\s+|so\s+)?(?:worried|concerned|afraid|scared|nervous|anxious)"
        r"\s+(?:that\s+|about\s+)" + CLAUSE,
        Shape.CLAUSE,
        0.7,
    ),
    rule(
        _RISK,
        "risk:{key}",
        r"\bthe\s+(?:main\s+|biggest\s+|big\s+|only\s+|real\s+)?(?:risk|danger|concern|worry)\s+is\s+(?:that\s+)?"
        + CLAUSE,
        Shape.CLAUSE,
        0.7,
    ),
    rule(
        _RISK,
        "risk:{key}",
        r"\bthere(?:'s|\s+is)\s+a\s+(?:real\s+|big\s+|serious\s+|high\s+)?(?:risk|danger)\s+(?:that\s+|of\s+)?"
        + CLAUSE,
        Shape.CLAUSE,
        0.7,
    ),
    rule(
        _RISK,
        "risk:{key}",
        r"(?:^|[,;]\s*|\b(?:but|and|so|because)\s+)(?P<value>(?:[\w'-]+\s+){1,5}?(?:might|may|could)\s+(?:not\s+work|"
        r"fail|break|crash|go\s+wrong|be\s+late|slip|fall\s+through|run\s+out|get\s+cancell?ed|not\s+be\s+ready)\b)",
        Shape.CLAUSE,
        0.65,
    ),
)
