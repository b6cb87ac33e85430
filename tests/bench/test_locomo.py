"""The LoCoMo runner on one conversation with the hash embedder: structure and sanity of the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstrata import InvalidInput
from memstrata.bench.locomo import MODES, LocomoOptions, run_locomo
from memstrata.bench.replay import choose_conversations, dia_ids, parse_conversations
from tests.conftest import LOCOMO


def test_parse_conversations() -> None:
    assert parse_conversations("1-3,7") == (1, 2, 3, 7)
    assert parse_conversations(None) == ()
    with pytest.raises(ValueError):
        parse_conversations("one")
    for text in ("3-1", "0", "0-2"):
        with pytest.raises(ValueError, match="range from 1"):
            parse_conversations(text)


def test_a_conversation_past_the_last_is_invalid_input() -> None:
    assert choose_conversations(["a", "b"], (2,)) == ["b"] and choose_conversations(["a", "b"], ()) == ["a", "b"]
    with pytest.raises(InvalidInput, match="no conversation 7"):
        choose_conversations(["a", "b"], (1, 7))


def test_evidence_ids_written_slightly_off_still_name_their_turns() -> None:
    assert dia_ids("D30:05") == ["D30:5"] and dia_ids("D:11:26") == ["D11:26"]
    assert dia_ids("D3:12; D4:10") == ["D3:12", "D4:10"]


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
    baselines = report["retrieval"]["all"]
    assert {"bm25_baseline", "dense_baseline"} <= set(baselines)
    for record in records:
        for name in ("bm25_baseline", "dense_baseline"):
            assert all(item.startswith(record["conversation"] + ":") for item in record[name]["ranked"])
    context = report["context"]["all"]
    assert set(context) == {"500", "1000", "2000"}
    for budget, groups in context.items():
        scores = groups["overall"]
        assert 0 < scores["tokens_mean"] <= int(budget)
        assert 0.0 <= scores["evidence_in_context"] <= 1.0 and 0.0 <= scores["evidence_shown"] <= 1.0
        assert scores["answer_string_in_context"] <= scores["answer_in_context"] <= 1.0
        assert scores["answer_in_whole_conversation"] >= scores["answer_in_context"] - 1e-9
        assert scores["answer_string_in_whole_conversation"] <= scores["answer_in_whole_conversation"]
        assert 0.0 <= scores["answer_with_evidence_first"] <= 1.0
    for record in records:
        # A few evidence turns always fit in 2,000 tokens, so the moved block holds every word they hold.
        if record["answer_in_evidence"]:
            assert record["context"]["2000"]["answer_with_evidence_first"], record["question"]
    assert context["1000"]["overall"]["crs_questions"] == 6  # every fifth of 30 questions
    # Quoted word for word need not grow with the budget: a bigger block packs more excerpts and
    # has fewer tokens left to quote them whole. Shown, whole or abridged, does grow.
    assert context["2000"]["overall"]["evidence_shown"] > context["500"]["overall"]["evidence_shown"]
    ages = report["retrieval_by_evidence_age"]
    assert sum(bucket["questions"] for bucket in ages.values()) == 30
    assert {"context@500", "context@1000", "context@2000"} <= set(report["latency_ms"])


def test_context_metrics() -> None:
    from memstrata.bench.context_metrics import (
        answer_in_context,
        answer_string_in_context,
        evidence_in_context,
        normalize_answer,
    )

    assert normalize_answer("The Sunday before 25 May, 2023!") == "sunday before 25 may 2023"
    assert answer_string_in_context("7 May 2023", "[Sunday 7 May 2023] Ana: hi")
    assert not answer_string_in_context("beach, mountains", "Ana: we love mountains and the beach")
    assert answer_in_context("beach, mountains", "Ana: we love mountains and the beach")
    assert not answer_in_context("beach, forest", "Ana: we love mountains and the beach")
    assert answer_in_context("Likely no", "Bo: likely no, sorry") and not answer_in_context("Likely no", "Bo: yes")
    assert evidence_in_context(["hello there", "gone"], "Ana: hello there") == 0.5


def test_evidence_first_moves_the_evidence_to_the_front_within_the_budget() -> None:
    from memstrata.bench.context_metrics import evidence_first
    from memstrata.retrieval.tokens import count_tokens

    excerpt = "Bo: I adopted a cat\n[shared an image: a cat]"  # a caption makes an excerpt two lines
    block = "\n".join(
        [
            "# Memory",
            "## Summaries",
            "- Bo: I adopted a cat Ana: lovely",
            "## From past conversations",
            "[Monday 1 May 2023]",
            excerpt,
            "Ana: nice weather",
        ]
    )
    moved = evidence_first([f"[1 May 2023] {excerpt}"], [excerpt], block, budget=1000)
    assert moved.splitlines() == [
        "[1 May 2023] Bo: I adopted a cat",
        "[shared an image: a cat]",
        "# Memory",
        "## Summaries",
        "- Bo: I adopted a cat Ana: lovely",  # a summary quoting the words keeps them
        "## From past conversations",
        "[Monday 1 May 2023]",
        "Ana: nice weather",
    ]
    assert evidence_first(["[1 May 2023] Bo: hi"], ["", "  "], "Ana: hi", budget=1000) == "[1 May 2023] Bo: hi\nAna: hi"
    small = evidence_first([f"[1 May 2023] {excerpt}"], [excerpt], block, budget=30)
    assert small.startswith("[1 May 2023] Bo: I adopted a cat") and count_tokens(small) <= 30 < count_tokens(moved)
    long_evidence = "Bo: " + "word " * 50
    skipped = evidence_first([long_evidence], [long_evidence], "Ana: hi", budget=10)
    assert skipped == "Ana: hi", "a line that does not fit is skipped, and a shorter one after it still goes in"
