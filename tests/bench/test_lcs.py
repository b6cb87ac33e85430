"""LCS: the fact generator, the recent-turns window, and a small run with the hash embedder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memstrata import InvalidInput
from memstrata.bench.lcs import (
    LcsOptions,
    conversation,
    generate_facts,
    in_text,
    max_facts,
    recent_window,
    run_lcs,
)
from memstrata.retrieval.abridge import abridge
from memstrata.retrieval.tokens import count_tokens
from tests.llm_server import CHAT, LLMServer


def test_facts_are_distinct_deterministic_and_varied() -> None:
    facts = generate_facts(max_facts(), seed=3)
    assert len({fact.question for fact in facts}) == len(facts) == max_facts()
    assert len({fact.value.casefold() for fact in facts}) == len(facts)
    assert all(fact.value in fact.statement for fact in facts)
    assert generate_facts(10, seed=3) == generate_facts(10, seed=3) != generate_facts(10, seed=4)
    assert len({fact.question.split()[1] for fact in generate_facts(20)}) >= 3, "is, does, do: several templates"


@pytest.mark.parametrize("count", [0, -1, max_facts() + 1])
def test_fact_count_out_of_range_is_invalid(count: int) -> None:
    with pytest.raises(InvalidInput):
        generate_facts(count)


def test_the_conversation_seeds_then_buries_the_facts() -> None:
    facts = generate_facts(4)
    turns = conversation(facts, 31)
    assert len(turns) == 2 * 4 + 31
    assert [text for role, text in turns[:8:2]] == [fact.statement for fact in facts]
    assert {role for role, _ in turns} == {"user", "assistant"}
    assert not any(fact.value in text for fact in facts for _, text in turns[8:])
    with pytest.raises(InvalidInput):
        conversation(facts, -1)


def test_the_window_keeps_the_last_turns_that_fit() -> None:
    turns = [("user", f"message number {n}") for n in range(100)]
    text, kept = recent_window(turns, 100)
    assert count_tokens(text) <= 100 and 0 < kept < 100
    assert text.endswith("user: message number 99") and "message number 0\n" not in text
    assert recent_window(turns, 1) == ("", 0)


def test_in_text_ignores_case_and_spacing() -> None:
    assert in_text("My sister's name is Ilse.", "user:  my SISTER'S name\nis Ilse.")
    assert not in_text("My sister's name is Ilse.", "My sister's name is Ilsa.")


def test_a_small_run_recalls_more_than_the_window(tmp_path: Path) -> None:
    report = run_lcs(LcsOptions(facts=6, filler=80, token_budget=300, embedder="hash", home=tmp_path / "h"))
    assert report["benchmark"] == "lcs" and report["facts"] == 6 and report["turns"] == 92
    assert report["embedder"] == "hash-bow-384" and report["answers"] is None
    assert 0 < report["baseline_window_turns"] < 80 and report["baseline_tokens"] <= 300
    in_context = report["in_context"]
    assert in_context["baseline"] == {"recalled": 0, "lcs": 0.0}, "every fact is older than the window"
    assert in_context["memstrata"]["recalled"] >= 4
    assert in_context["memstrata"]["lcs"] == in_context["memstrata"]["recalled"] / 6
    assert in_context["ratio"] is None and in_context["gain"] == in_context["memstrata"]["lcs"]
    assert [fact["statement"] for fact in report["per_fact"]] == [f.statement for f in generate_facts(6)]
    assert all(fact["context_tokens"] <= 300 for fact in report["per_fact"])
    assert all(fact["in_context"] for fact in report["per_fact"] if fact["in_context_verbatim"])


def test_an_abridged_fact_counts_as_recalled() -> None:
    statement = "My cousin's birthday is on 20 August."
    assert not in_text(statement, f"user: {abridge(statement)}")
    assert in_text(abridge(statement), f"user: {abridge(statement)}")


def test_with_an_llm_the_answers_are_checked_for_the_value(
    tmp_path: Path, llm_server: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMSTRATA_LLM_PROVIDER", "openai")
    monkeypatch.setenv("MEMSTRATA_LLM_BASE_URL", llm_server.openai_url)
    monkeypatch.setenv("MEMSTRATA_LLM_MODEL", "lcs-model")
    facts = generate_facts(3)
    for fact in facts:
        llm_server.queue(CHAT, f"You told me: {fact.value}.", "I don't remember that.")
    report = run_lcs(LcsOptions(facts=3, filler=60, token_budget=300, embedder="hash", home=tmp_path / "h"))
    answers = report["answers"]
    assert answers["llm"] == "openai:lcs-model" and answers["models"] == ["lcs-model"] and answers["errors"] == 0
    assert answers["memstrata"] == {"recalled": 3, "lcs": 1.0}
    assert answers["baseline"] == {"recalled": 0, "lcs": 0.0}
    assert "agent_system" in answers["prompts"]
    requests = llm_server.requests_to(CHAT)
    assert len(requests) == 6, "ingest ran offline; two answers per fact"
    for fact, ours, baseline in zip(facts, requests[::2], requests[1::2], strict=True):
        assert ours.body["messages"][-1] == {"role": "user", "content": fact.question}
        assert "# Memory" in ours.body["messages"][0]["content"]
        assert "## Earlier in this session" in baseline.body["messages"][0]["content"]


def test_the_cli_writes_the_report(tmp_path: Path) -> None:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
    environment |= {"MEMSTRATA_HOME": str(tmp_path / "h"), "MEMSTRATA_EMBEDDER": "hash", "COLUMNS": "200"}
    out = tmp_path / "lcs.json"
    arguments = ("--facts", "3", "--filler", "40", "--budget", "200", "--json", str(out))
    result = subprocess.run(
        [sys.executable, "-m", "memstrata", "bench", "lcs", *arguments],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["facts"] == 3 and report["filler_turns"] == 40 and report["token_budget"] == 200
    assert "LCS" in result.stdout and "no LLM configured" in result.stdout
