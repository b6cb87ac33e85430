"""How well the rule-based entity extractor finds people, places and organisations in LoCoMo turns.

Matching is entity-level and per turn: a predicted (turn, case-folded name) pair counts once.
"untyped" ignores the kind, "typed" also requires it. Predictions of kind OTHER claim no
person, place or organisation, so they are left out of both and counted on their own;
"with_other" repeats the untyped score with them included.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from memstrata.bench.datasets import load_locomo
from memstrata.errors import InvalidInput
from memstrata.extraction.entities import EntityKind, extract_entities

SCORED_KINDS = (EntityKind.PERSON, EntityKind.PLACE, EntityKind.ORGANIZATION)

_Mention = tuple[str, str, EntityKind]  # (dia_id, case-folded name, kind)
_Item = TypeVar("_Item")


def evaluate_entities(locomo_path: Path, gold_path: Path) -> dict[str, Any]:
    """Precision, recall and F1 of ``extract_entities`` against hand-annotated LoCoMo turns, JSON-ready."""
    gold_document = json.loads(gold_path.read_text(encoding="utf-8"))
    conversation = str(gold_document["conversation"])
    dia_ids = [str(dia_id) for dia_id in gold_document["turns"]]
    turns, _ = load_locomo(locomo_path)
    texts = {turn.dia_id: turn.text for turn in turns if turn.conversation == conversation}
    if not texts:
        raise InvalidInput(f"conversation {conversation!r} is not in {locomo_path}")
    missing = [dia_id for dia_id in dia_ids if dia_id not in texts]
    if missing:
        raise InvalidInput(f"gold turns {missing[:5]} are not in conversation {conversation!r}")
    speakers = list(dict.fromkeys(turn.speaker for turn in turns if turn.conversation == conversation))

    gold = {
        (str(item["dia_id"]), str(item["name"]).casefold(), EntityKind(item["kind"]))
        for item in gold_document["entities"]
    }
    predicted: set[_Mention] = set()
    for dia_id in dia_ids:
        for entity in extract_entities(texts[dia_id], known_people=speakers):
            predicted.add((dia_id, entity.name.casefold(), entity.kind))
    scored = {mention for mention in predicted if mention[2] in SCORED_KINDS}
    other = predicted - scored

    return {
        "conversation": conversation,
        "turns": len(dia_ids),
        "known_people": speakers,
        "gold_entities": len(gold),
        "predicted_entities": len(scored),
        "predicted_other": len(other),
        "untyped": _scores(_names(scored), _names(gold)),
        "typed": _scores(scored, gold),
        "with_other": _scores(_names(predicted), _names(gold)),
        "per_kind": {kind.value: _per_kind(kind, scored, gold) for kind in SCORED_KINDS},
        "missed": _describe(gold - scored),
        "spurious": _describe(scored - gold),
    }


def _names(mentions: Iterable[_Mention]) -> set[tuple[str, str]]:
    return {(dia_id, name) for dia_id, name, _ in mentions}


def _per_kind(kind: EntityKind, predicted: set[_Mention], gold: set[_Mention]) -> dict[str, Any]:
    """Typed scores for one kind, plus untyped ones: its gold found under any kind, its predictions in any gold."""
    gold_of_kind = {mention for mention in gold if mention[2] == kind}
    predicted_of_kind = {mention for mention in predicted if mention[2] == kind}
    gold_names, predicted_names = _names(gold), _names(predicted)
    found = len(_names(gold_of_kind) & predicted_names)
    correct = len(_names(predicted_of_kind) & gold_names)
    return {
        "gold": len(gold_of_kind),
        "predicted": len(predicted_of_kind),
        "typed": _scores(predicted_of_kind, gold_of_kind),
        "untyped": _ratios(correct, len(predicted_of_kind), found, len(gold_of_kind)),
    }


def _scores(predicted: set[_Item], gold: set[_Item]) -> dict[str, Any]:
    matched = len(predicted & gold)
    return _ratios(matched, len(predicted), matched, len(gold))


def _ratios(correct: int, predicted: int, found: int, gold: int) -> dict[str, Any]:
    """Precision and recall as shares (``None`` when undefined: nothing predicted or nothing to find)."""
    precision = correct / predicted if predicted else None
    recall = found / gold if gold else None
    f1 = None
    if precision is not None and recall is not None:
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": _rounded(precision),
        "recall": _rounded(recall),
        "f1": _rounded(f1),
        "true_positives": found,
        "false_positives": predicted - correct,
        "false_negatives": gold - found,
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _describe(mentions: set[_Mention]) -> list[str]:
    return [f"{dia_id} {name} ({kind.value})" for dia_id, name, kind in sorted(mentions, key=_turn_order)]


def _turn_order(mention: _Mention) -> tuple[int, int, str]:
    session, _, number = mention[0].removeprefix("D").partition(":")
    return (int(session) if session.isdigit() else 0, int(number) if number.isdigit() else 0, mention[1])
