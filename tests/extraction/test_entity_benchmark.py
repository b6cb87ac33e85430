"""The entity extractor on hand-annotated LoCoMo turns: the measured figures must not regress.

The gold file holds annotations of conv-26's first 120 turns (people, places, organisations).
Those turns were read while the rules were written, so these are development figures; the bar
sits just below them to catch regressions, not to claim accuracy on unseen conversations.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memstrata.bench.entities import evaluate_entities

LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "locomo" / "locomo10.json"
GOLD = Path(__file__).resolve().parent / "data" / "locomo_conv26_entities.json"

needs_locomo = pytest.mark.skipif(not LOCOMO.is_file(), reason=f"LoCoMo is not at {LOCOMO}")


def test_gold_file_holds_annotations_only() -> None:
    gold = json.loads(GOLD.read_text(encoding="utf-8"))
    assert "CC BY-NC 4.0" in gold["note"]
    assert len(gold["turns"]) == len(set(gold["turns"])) == 120
    assert {item["kind"] for item in gold["entities"]} <= {"person", "place", "organization"}
    assert all(set(item) == {"dia_id", "name", "kind"} for item in gold["entities"])
    assert all(item["dia_id"] in gold["turns"] for item in gold["entities"])


@needs_locomo
def test_conv26_figures() -> None:
    report = evaluate_entities(LOCOMO, GOLD)
    assert report["conversation"] == "conv-26"
    assert report["turns"] == 120
    assert report["known_people"] == ["Caroline", "Melanie"]
    assert report["gold_entities"] == 82
    untyped, typed = report["untyped"], report["typed"]
    assert untyped["precision"] >= 0.95 and untyped["recall"] >= 0.95
    assert typed["precision"] >= 0.95 and typed["recall"] >= 0.95
    assert typed["f1"] <= untyped["f1"]
    person = report["per_kind"]["person"]
    assert person["gold"] == 81 and person["typed"]["recall"] >= 0.95
    assert report["per_kind"]["organization"]["typed"]["recall"] is None  # nothing to find in this slice
    assert report["with_other"]["recall"] >= untyped["recall"]
    json.dumps(report)  # JSON-ready


@needs_locomo
def test_every_counted_mention_is_explained(tmp_path: Path) -> None:
    gold = json.loads(GOLD.read_text(encoding="utf-8"))
    gold["entities"] = [*gold["entities"], {"dia_id": "D1:3", "name": "Atlantis", "kind": "place"}]
    edited = tmp_path / "gold.json"
    edited.write_text(json.dumps(gold), encoding="utf-8")
    report = evaluate_entities(LOCOMO, edited)
    assert "D1:3 atlantis (place)" in report["missed"]
    untyped = report["untyped"]
    assert untyped["true_positives"] + untyped["false_negatives"] == report["gold_entities"]
    assert untyped["true_positives"] + untyped["false_positives"] == report["predicted_entities"]
