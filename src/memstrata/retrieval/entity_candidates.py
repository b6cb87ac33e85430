"""Entity candidates: for a question asking for a kind of thing, the turns naming the user's entities of that kind.

Pure functions; the store reads and the embedding happen in the caller.
See docs/retrieval.md#1-candidates ("Entities of the kind a question asks for").
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from memstrata.retrieval.fulltext import STOPWORDS

# "What <kind> has/did/…": the words between the question word and the first auxiliary.
_KIND_QUESTION = re.compile(
    r"^\s*(?:what|which)\s+(?P<kind>[^?]*?)\s+"
    r"(?:has|have|had|does|do|did|is|are|was|were|can|could|would|will|might)\b",
    re.IGNORECASE,
)
_PLURAL = re.compile(r"[a-z]+[^s'’]s|people|children")
_WORD = re.compile(r"[^\W_]+")
Key = TypeVar("Key", bound=Hashable)


@dataclass(kw_only=True, frozen=True, slots=True)
class EntityCandidatePolicy:
    """How many entities a question may reach, how many of their turns, and where those turns go."""

    #: Entities taken at most, closest first.
    entities: int = 4
    #: An entity is taken only if its cosine is this many standard deviations above the mean
    #: cosine of all the user's entities to the question: nothing stands out, nothing is taken.
    min_deviations: float = 1.0
    #: Turns taken per entity (those closest to the question), and in all.
    turns_per_entity: int = 2
    turns: int = 6
    #: The turns go after this many excerpts; a turn already ranked among the first ``kept`` stays.
    after: int = 5
    kept: int = 20


def asks_for_kind(question: str) -> bool:
    """Whether ``question`` asks for things of a kind, named in the plural.

    "What European countries has Maria been to?", "Which US cities did John visit?", "What
    books has Tim read?" do; "What did Maria buy?", "Which country did Tim visit most?" and
    "What is Maria's job?" do not. English only.
    """
    found = _KIND_QUESTION.match(question)
    if found is None:
        return False
    words = found.group("kind").split()
    return 0 < len(words) <= 4 and _PLURAL.fullmatch(words[-1].lower()) is not None


def closest_entities(
    question: str,
    names: Sequence[str],
    cosines: npt.NDArray[np.float32],
    speakers: Sequence[str],
    policy: EntityCandidatePolicy,
) -> list[int]:
    """Indexes into ``names`` of the entities to follow, closest first.

    ``cosines`` are each name's cosine to the question. Left out: names sharing a word with
    the question (the full-text retriever already finds their turns; stopwords aside) and the speakers' own
    names (every turn of theirs is about them).
    """
    if len(names) < 2 or len(names) != len(cosines):
        return []
    spread = float(np.std(cosines))
    if spread <= 0.0:
        return []
    floor = float(np.mean(cosines)) + policy.min_deviations * spread
    asked = _words(question)
    people = {speaker.casefold() for speaker in speakers}
    picked: list[int] = []
    for index in np.argsort(-cosines, kind="stable"):
        if float(cosines[index]) < floor or len(picked) >= policy.entities:
            break
        name = names[int(index)]
        if name.casefold() in people or _words(name) & asked:
            continue
        picked.append(int(index))
    return picked


def entity_turns(
    picked: Sequence[int],
    mentions: Mapping[int, Sequence[int]],
    closeness: Mapping[int, float],
    policy: EntityCandidatePolicy,
) -> list[int]:
    """The turn seqs to add, in order: each picked entity's mentions closest to the question first.

    ``mentions`` maps each picked entity (by the same index) to the seqs of its turns;
    ``closeness`` each seq to its cosine to the question (a seq without one comes last).
    """
    chosen: list[int] = []
    for entity in picked:
        seqs = sorted(mentions.get(entity, ()), key=lambda seq: -closeness.get(seq, -2.0))
        fresh = [seq for seq in seqs if seq not in chosen][: policy.turns_per_entity]
        chosen.extend(fresh)
    return chosen[: policy.turns]


def placed(order: Sequence[Key], added: Sequence[Key], policy: EntityCandidatePolicy) -> list[Key]:
    """``order`` with the ``added`` keys after its first ``policy.after``; a key already among the
    first ``policy.kept`` keeps its place, one further down moves up."""
    head = set(order[: policy.kept])
    moving = [key for key in added if key not in head]
    if not moving:
        return list(order)
    moved = set(moving)
    rest = [key for key in order if key not in moved]
    return [*rest[: policy.after], *moving, *rest[policy.after :]]


def _words(text: str) -> set[str]:
    """Content words, case-folded: "Lord of the Rings" and "What areas of the U.S." share none."""
    return {word.casefold() for word in _WORD.findall(text)} - STOPWORDS
