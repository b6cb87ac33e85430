"""Seeded, reproducible perturbations that make LoCoMo's turns read like a real messaging-app chat.

Each is a pure function of the turns and a seed that changes one habit and never the
questions. It returns the new turns and ``origin``, mapping each new turn's id to the LoCoMo
turn it came from (``"D1:3#2" → "D1:3"``; a filler maps to itself and is never evidence).
See docs/benchmark-history.md#robustness-protocol-notes.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from memstrata.bench.datasets import DialogTurn
from memstrata.bench.replay import turn_id
from memstrata.errors import InvalidInput

DEFAULT_SEED = 1
TYPO_RATE = 0.1  # the share of words of 4+ letters that get one typo
FILLER_RATE = 0.2  # the share of turns followed by a small-talk filler
SPLIT_PIECES = (2, 4)  # a split turn becomes this many messages at most, fewer if it is short
WORDS_PER_PIECE = 4  # a turn of n words is split into at most n // 4 pieces: under 8 words it stays whole
MIN_SENTENCE_WORDS = 2  # "Hey Mel!" is a message of its own
MIN_PIECE_WORDS = 3  # a piece cut inside a sentence has at least this many words
FILLERS = (
    "lol",
    "ok",
    "haha",
    "brb",
    "👍",
    "😂",
    "yeah",
    "k",
    "omg",
    "same",
    "np",
    "ty",
    "hmm",
    "yep",
    "ikr",
    "lmao",
    "😅",
    "haha yeah",
    "ok cool",
)
# Common English-language surnames; none is a first name a dataset's speaker goes by.
SURNAMES = (
    "Smith",
    "Johnson",
    "Williams",
    "Brown",
    "Jones",
    "Garcia",
    "Miller",
    "Davis",
    "Rodriguez",
    "Martinez",
    "Wilson",
    "Anderson",
    "Taylor",
    "Thomas",
    "Moore",
    "Martin",
    "Lee",
    "Thompson",
    "White",
    "Harris",
)
# QWERTY: each letter and the keys around it.
_KEYBOARD = (
    "q:wa w:qeas e:wrsd r:etdf t:ryfg y:tugh u:yihj i:uojk o:ipkl p:ol a:qwsz s:awedxz d:serfcx "
    "f:drtgvc g:ftyhbv h:gyujnb j:huikmn k:jiolm l:kop z:asx x:zsdc c:xdfv v:cfgb b:vghn n:bhjm m:njk"
)
_NEIGHBOURS = {key: around for key, _, around in (pair.partition(":") for pair in _KEYBOARD.split())}
_CAPTION = re.compile(r"\s*\[shared an image: .*\]\s*$", re.DOTALL)
_TYPO_WORD = re.compile(r"[A-Za-z]{4,}")
# Prose punctuation a lower-case chatter leaves out. Symbols that carry meaning ($ % & # @ +)
# and emoji stay.
_STRIPPED = frozenset(".,!?;:\"'()[]{}…“”‘’«»¡¿*_~`—–-/")
_INSIDE_WORDS = frozenset("'’-/")  # kept between two letters or digits: don't, Caroline's, x-ray, and/or
_INSIDE_NUMBERS = frozenset(".,:")  # kept between two digits: 3.5, 1,000, 10:30
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)]*$")
_CLAUSE_END = re.compile(r"[,;:—–]+[\"'”’)]*$|^[-—–]+$")
# A clause also starts at a conjunction: "… group yesterday" / "and it was so powerful."
_CONJUNCTIONS = frozenset(["and", "but", "so", "because", "which", "or", "then", "when", "while", "though", "since"])


@dataclass(frozen=True, slots=True)
class Perturbed:
    """Turns after a perturbation, and each new turn id's original LoCoMo turn id."""

    turns: tuple[DialogTurn, ...]
    origin: Mapping[str, str]


def unchanged(turns: Sequence[DialogTurn]) -> Perturbed:
    """The clean run: every turn as it is, each its own origin."""
    return Perturbed(tuple(turns), {turn_id(turn): turn_id(turn) for turn in turns})


def lowercase(turns: Sequence[DialogTurn], seed: int = DEFAULT_SEED) -> Perturbed:
    """Lower case, prose punctuation gone; apostrophes and hyphens inside words, and '.,:' inside numbers, kept."""
    return _apply(turns, seed, "lowercase", lambda group, _: ((replace(t, text=_lower(t.text)), t) for t in group))


def typos(turns: Sequence[DialogTurn], seed: int = DEFAULT_SEED) -> Perturbed:
    """One seeded typo (swap, drop, double, or a keyboard neighbour) in about 10% of the words of 4+ letters."""

    def change(group: list[DialogTurn], rng: random.Random) -> Iterator[tuple[DialogTurn, DialogTurn]]:
        for turn in group:
            typed, caption = _without_caption(turn.text)
            mistyped = _TYPO_WORD.sub(lambda m: _typo(m.group(), rng) if rng.random() < TYPO_RATE else m.group(), typed)
            yield replace(turn, text=mistyped + caption), turn

    return _apply(turns, seed, "typos", change)


def split(turns: Sequence[DialogTurn], seed: int = DEFAULT_SEED) -> Perturbed:
    """Each turn sent as 2-4 messages in a row (cut at sentences, then clauses, then by word count).

    The pieces keep the speaker and time and are ids ``"<id>#1"``, ``"#2"`` …; a turn of
    fewer than eight words stays whole under its own id, and a short one may make fewer
    pieces than drawn (a piece cut inside a sentence keeps three words or more).
    """

    def change(group: list[DialogTurn], rng: random.Random) -> Iterator[tuple[DialogTurn, DialogTurn]]:
        for turn in group:
            typed, caption = _without_caption(turn.text)
            words = typed.split()
            wanted = min(rng.randint(*SPLIT_PIECES), len(words) // WORDS_PER_PIECE)
            pieces = _pieces(words, wanted)
            if len(pieces) < 2:
                yield turn, turn
                continue
            for number, piece in enumerate(pieces, start=1):
                text = " ".join(piece) + (caption if number == len(pieces) else "")
                yield replace(turn, dia_id=f"{turn.dia_id}#{number}", text=text), turn

    return _apply(turns, seed, "split", change)


def names(turns: Sequence[DialogTurn], seed: int = DEFAULT_SEED) -> Perturbed:
    """Each speaker's display name, per conversation, a clipped nickname or the name plus a seeded surname.

    Only the ``speaker`` field changes: the texts and the questions keep the names the
    conversation uses. The rule reads the name itself, so it names no dataset's speakers.
    """

    def change(group: list[DialogTurn], rng: random.Random) -> Iterator[tuple[DialogTurn, DialogTurn]]:
        shown: dict[str, str] = {}
        for speaker in dict.fromkeys(turn.speaker for turn in group):
            nickname = _nickname(speaker, rng)
            if nickname is None or nickname in shown.values() or rng.random() < 0.5:
                nickname = f"{speaker} {rng.choice(SURNAMES)}"
            shown[speaker] = nickname
        return ((replace(turn, speaker=shown[turn.speaker]), turn) for turn in group)

    return _apply(turns, seed, "names", change)


def filler(turns: Sequence[DialogTurn], seed: int = DEFAULT_SEED) -> Perturbed:
    """Small talk ("lol", "ok", "👍" …) by either speaker after about 20% of the turns, id ``"<id>~1"``."""

    def change(group: list[DialogTurn], rng: random.Random) -> Iterator[tuple[DialogTurn, DialogTurn | None]]:
        speakers = list(dict.fromkeys(turn.speaker for turn in group))
        for turn in group:
            yield turn, turn
            if rng.random() < FILLER_RATE:
                said = replace(turn, dia_id=f"{turn.dia_id}~1", speaker=rng.choice(speakers), text=rng.choice(FILLERS))
                yield said, None

    return _apply(turns, seed, "filler", change)


PERTURBATIONS: dict[str, Callable[[Sequence[DialogTurn], int], Perturbed]] = {
    "lowercase": lowercase,
    "typos": typos,
    "split": split,
    "names": names,
    "filler": filler,
}


def check_perturbations(wanted: Iterable[str]) -> tuple[str, ...]:
    """The perturbation names, deduplicated in order ("clean" dropped: it always runs); InvalidInput for others."""
    chosen = tuple(dict.fromkeys(name.strip() for name in wanted if name.strip() and name.strip() != "clean"))
    unknown = [name for name in chosen if name not in PERTURBATIONS]
    if unknown:
        raise InvalidInput(
            f"unknown perturbation {unknown[0]!r}; choose from clean, {', '.join(PERTURBATIONS)} (comma-separated)"
        )
    return chosen


def _apply(
    turns: Sequence[DialogTurn],
    seed: int,
    name: str,
    change: Callable[[list[DialogTurn], random.Random], Iterable[tuple[DialogTurn, DialogTurn | None]]],
) -> Perturbed:
    """Run ``change`` over each conversation with its own generator; collect turns and origins."""
    groups: dict[str, list[DialogTurn]] = {}
    for turn in turns:
        groups.setdefault(turn.conversation, []).append(turn)
    result: list[DialogTurn] = []
    origin: dict[str, str] = {}
    for conversation, group in groups.items():
        # A string seed is hashed with SHA-512, the same in every process (no PYTHONHASHSEED).
        rng = random.Random(f"{seed}:{name}:{conversation}")
        for new, old in change(group, rng):
            result.append(new)
            origin[turn_id(new)] = turn_id(old if old is not None else new)
    return Perturbed(tuple(result), origin)


def _without_caption(text: str) -> tuple[str, str]:
    """(what was typed, the appended image caption or "")."""
    match = _CAPTION.search(text)
    return (text[: match.start()], text[match.start() :]) if match else (text, "")


def _lower(text: str) -> str:
    typed, caption = _without_caption(text)
    kept: list[str] = []
    for index, character in enumerate(typed):
        before = typed[index - 1] if index else ""
        after = typed[index + 1] if index + 1 < len(typed) else ""
        inside_word = character in _INSIDE_WORDS and before.isalnum() and after.isalnum()
        inside_number = character in _INSIDE_NUMBERS and before.isdigit() and after.isdigit()
        stripped = character in _STRIPPED and not (inside_word or inside_number)
        kept.append(" " if stripped else character.lower())
    lowered = " ".join("".join(kept).split())
    # A message of nothing but marks (";)") is an emoticon: people type it as it is.
    return (lowered or typed.lower()) + caption


def _typo(word: str, rng: random.Random) -> str:
    """``word`` with one edit after its first letter (people seldom mistype that one); always a change."""
    kind = rng.choice(("swap", "drop", "double", "neighbour"))
    if kind == "swap":
        places = [i for i in range(1, len(word) - 1) if word[i].lower() != word[i + 1].lower()]
        if places:
            i = rng.choice(places)
            return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
        kind = "neighbour"
    i = rng.randrange(1, len(word))
    if kind == "drop":
        return word[:i] + word[i + 1 :]
    if kind == "double":
        return word[: i + 1] + word[i:]
    key = rng.choice(_NEIGHBOURS[word[i].lower()])
    return word[:i] + (key.upper() if word[i].isupper() else key) + word[i + 1 :]


def _nickname(name: str, rng: random.Random) -> str | None:
    """The name clipped to its first 3 or 4 letters ("Caroline" → "Caro"); None when it is too short to clip."""
    first = name.split()[0] if name.split() else name
    length = min(rng.choice((3, 4)), len(first) - 1)
    return first[:length] if length >= 3 else None


def _pieces(words: list[str], wanted: int) -> list[list[str]]:
    """``words`` cut into up to ``wanted`` pieces: the longest piece is cut again until there are enough."""
    pieces = [words]
    while len(pieces) < wanted:
        longest = max(range(len(pieces)), key=lambda index: len(pieces[index]))
        cut = _best_cut(pieces[longest])
        if cut is None:
            break
        piece = pieces[longest]
        pieces[longest : longest + 1] = [piece[:cut], piece[cut:]]
    return pieces


def _best_cut(words: list[str]) -> int | None:
    """Where to cut: after a sentence, else at a clause, else anywhere; nearest the middle; None if too short."""
    middle = len(words) / 2

    def nearest(places: list[int]) -> int | None:
        return min(places, key=lambda cut: (abs(cut - middle), cut)) if places else None

    sentences = range(MIN_SENTENCE_WORDS, len(words) - MIN_SENTENCE_WORDS + 1)
    inside = list(range(MIN_PIECE_WORDS, len(words) - MIN_PIECE_WORDS + 1))
    clauses = [cut for cut in inside if _CLAUSE_END.search(words[cut - 1]) or words[cut].lower() in _CONJUNCTIONS]
    for places in ([cut for cut in sentences if _SENTENCE_END.search(words[cut - 1])], clauses, inside):
        cut = nearest(places)
        if cut is not None:
            return cut
    return None
