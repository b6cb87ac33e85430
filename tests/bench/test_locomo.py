"""The LoCoMo runner on one conversation with the hash embedder: structure and sanity of the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstrata.bench.locomo import MODES, LocomoOptions, parse_conversations, run_locomo
from tests.conftest import LOCOMO


def test_parse_conversations() -> None:
    assert parse_conversations("1-3,7") == (1, 2, 3, 7)
    assert parse_conversations(None) == ()
    with pytest.raises(ValueError):
        parse_conversations("one")


def test_one_conversation_report(tmp_path: Path) -> None:
    options = LocomoOptions(data=LOCOMO, conversations=(1,), limit=30, embedder="hash", home=tmp_path / "h")
    report, records = run_locomo(options)
    assert report["conversations"] == [1]
    assert report["turns"] == 419
    assert report["questions"] == len(records) == 30
    overall = report["retrieval"]["all"]["fulltext"]["overall"]
    assert 0.0 < overall["recall@10"] <= overall["recall@20"] <= 1.0
    for record in records:
        assert record["evidence"], "questions without known evidence are left out"
        for mode in MODES:
            ranked = record[mode]["ranked"]
            assert len(ranked) <= 20
            assert all(item.startswith(record["conversation"] + ":") for item in ranked), "scope leak"
    assert "conversations 6-10" not in report["retrieval"]
    assert report["ingest_vs_embedder"] is not None and report["ingest_vs_embedder"] > 0
