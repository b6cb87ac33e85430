"""LoCoMo QA: the F1 and BLEU-1 metrics, and `bench locomo --qa` end to end against the fake LLM server."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.bench.qa import QA_PROMPTS, bleu1, mentions, prompt_records, token_f1
from memstrata.prompts import render
from tests.conftest import LOCOMO
from tests.llm_server import CHAT, LLMServer, Reply

# -- metrics --------------------------------------------------------------------------


def test_token_f1_hand_computed() -> None:
    assert token_f1("7 May 2023", "7 May 2023") == 1.0
    # prediction {on, 7, may} vs gold {7, may, 2023}: precision 2/3, recall 2/3
    assert token_f1("On 7 May", "7 May 2023") == pytest.approx(2 / 3)
    assert token_f1("The Adoption agencies!", "adoption agencies") == 1.0  # articles, case, punctuation
    assert token_f1("Paris", "London") == 0.0
    assert token_f1("", "London") == 0.0 and token_f1("", "") == 1.0


def test_token_f1_counts_repeated_words_once_each() -> None:
    # prediction "may may may" vs gold "may 2023": one shared word; precision 1/3, recall 1/2
    assert token_f1("may may may", "may 2023") == pytest.approx(2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2))


def test_bleu1_hand_computed() -> None:
    assert bleu1("7 May 2023", "7 May 2023") == 1.0
    # longer than the gold: no brevity penalty; clipped precision 2/4
    assert bleu1("on 7 May maybe", "7 May 2023") == pytest.approx(0.5)
    # shorter than the gold: precision 1, brevity penalty exp(1 - 3/2)
    assert bleu1("7 May", "7 May 2023") == pytest.approx(math.exp(1 - 3 / 2))
    assert bleu1("", "x") == 0.0 and bleu1("x", "") == 0.0


words = st.lists(st.sampled_from(["may", "7", "2023", "paris", "the", "blue", "drawer"]), max_size=6).map(" ".join)


@given(words, words)
def test_metrics_stay_between_zero_and_one_and_f1_is_symmetric(prediction: str, gold: str) -> None:
    assert 0.0 <= token_f1(prediction, gold) <= 1.0
    assert 0.0 <= bleu1(prediction, gold) <= 1.0
    assert token_f1(prediction, gold) == pytest.approx(token_f1(gold, prediction))


def test_mentions_needs_every_word_of_the_value() -> None:
    assert mentions("It's in the blue drawer, I think.", "blue drawer")
    assert mentions("Her birthday is May 12th.", "12 May")
    assert not mentions("It's in the red drawer.", "blue drawer")
    assert not mentions("anything", "")


def test_prompt_records_pin_each_template() -> None:
    records = prompt_records(QA_PROMPTS)
    assert set(records) == set(QA_PROMPTS)
    for record in records.values():
        assert record["sha256"] == hashlib.sha256(record["text"].encode()).hexdigest()
    judge = render("qa_judge", question="Q?", gold="G", answer="A")
    assert "Gold answer: G" in judge and '{"reasoning"' in judge


# -- end to end -----------------------------------------------------------------------


def _bench(*args: str, home: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
    environment |= {"MEMSTRATA_HOME": str(home), "MEMSTRATA_EMBEDDER": "hash", "COLUMNS": "200", **env}
    return subprocess.run(
        [sys.executable, "-m", "memstrata", "bench", "locomo", "--data", str(LOCOMO), *args],
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_qa_end_to_end_against_the_fake_server(tmp_path: Path, llm_server: LLMServer) -> None:
    verdicts = ["CORRECT", "WRONG", "CORRECT"]
    for verdict in verdicts:
        llm_server.queue(
            CHAT,
            Reply.of_text("7 May 2023", usage={"prompt_tokens": 300, "completion_tokens": 4}),
            Reply.of_text(json.dumps({"reasoning": "compared", "verdict": verdict})),
        )
    out, details = tmp_path / "qa.json", tmp_path / "qa.jsonl"
    env = {
        "MEMSTRATA_LLM_PROVIDER": "openai",
        "MEMSTRATA_LLM_BASE_URL": llm_server.openai_url,
        "MEMSTRATA_LLM_MODEL": "answer-model-1",
        "MEMSTRATA_LLM_MAX_RETRIES": "0",
    }
    arguments = ("--qa", "--conversations", "1", "--limit", "3", "--budget", "500")
    result = _bench(*arguments, "--json", str(out), "--details", str(details), home=tmp_path / "h", env=env)
    assert result.returncode == 0, result.stderr
    assert "LoCoMo QA" in result.stdout

    report = json.loads(out.read_text())
    assert report["benchmark"] == "locomo-qa" and report["conversations"] == [1] and report["questions"] == 3
    assert report["token_budget"] == 500 and report["turns"] == 419
    assert report["llm"] == {
        "provider": "openai:answer-model-1",
        "answer_models": ["answer-model-1"],
        "judge_models": ["answer-model-1"],
    }
    assert set(report["prompts"]) == set(QA_PROMPTS)
    assert report["prompts"]["qa_system"]["text"] == render("qa_system")
    assert report["answer_errors"] == report["judge_errors"] == 0
    overall = report["scores"]["overall"]
    assert overall["questions"] == overall["answered"] == overall["judged"] == 3
    assert overall["judge_accuracy"] == pytest.approx(2 / 3)
    records = [json.loads(line) for line in details.read_text().splitlines()]
    assert overall["f1"] == pytest.approx(sum(token_f1("7 May 2023", r["gold"]) for r in records) / 3)
    assert overall["bleu1"] == pytest.approx(sum(bleu1("7 May 2023", r["gold"]) for r in records) / 3)
    assert [r["correct"] for r in records] == [True, False, True]
    assert report["tokens_per_question"]["tokens_in"] == 300 and report["tokens_per_question"]["tokens_out"] == 4
    assert 0 < report["tokens_per_question"]["context_tokens"] <= 500
    assert set(report["latency_ms"]) == {"context", "answer", "judge"}
    assert {key for key in report["scores"] if key != "overall"} <= {
        "category 1 (multi-hop)",
        "category 2 (temporal)",
        "category 3 (open-domain)",
        "category 4 (single-hop)",
    }

    # Ingest ran offline: the server saw only the three answers and the three verdicts.
    requests = llm_server.requests_to(CHAT)
    assert len(requests) == 6
    for number, request in enumerate(requests[::2]):
        system, question = request.body["messages"]
        instructions, _, block = system["content"].partition("\n\n# Memory\n")
        assert instructions == render("qa_system")
        assert block, "the answer call carried the memory block after the instructions"
        assert question["content"] == render("qa_question", question=records[number]["question"])
        assert "response_format" not in request.body
    for request in requests[1::2]:
        assert request.body["response_format"]["type"] == "json_schema"
        assert "Answer to grade: 7 May 2023" in request.body["messages"][-1]["content"]


def test_qa_without_an_llm_says_how_to_configure_one_and_reports_nothing(tmp_path: Path) -> None:
    out = tmp_path / "qa.json"
    result = _bench("--qa", "--conversations", "1", "--limit", "3", "--json", str(out), home=tmp_path / "h", env={})
    assert result.returncode == 4, result.stdout + result.stderr
    assert "needs an LLM" in result.stderr and "MEMSTRATA_LLM_PROVIDER" in result.stderr
    assert not out.exists() and "F1" not in result.stdout


def test_without_a_home_the_qa_memory_reads_the_users_settings_and_cost_log_over_a_scratch_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memstrata.bench.qa import answering_memory
    from memstrata.llms.base import ChatMessage

    home = tmp_path / "home"
    home.mkdir()
    with LLMServer() as server:
        server.queue(CHAT, Reply.of_text("Lisbon."))
        (home / "memstrata.toml").write_text(
            f'llm_provider = "openai"\nllm_base_url = "{server.openai_url}"\nllm_model = "m"\nembedder = "hash"\n'
            'working_url = "redis://127.0.0.1:9/0"\n',
            encoding="utf-8",
        )
        monkeypatch.setenv("MEMSTRATA_HOME", str(home))
        with answering_memory(None, {}, needs_llm_for="the QA benchmark") as (answering, ingesting):
            assert answering.llm.is_available and not ingesting.llm.is_available
            assert answering.settings.working_url is None  # nor the user's shared working set
            answering.llm.generate([ChatMessage("user", "where?")], purpose="bench_qa")
            ingesting.add("a benchmark turn", user_id="conv-1")
            scratch = answering.settings.resolved_storage_url
        assert '"purpose": "bench_qa"' in (home / "costs.jsonl").read_text(encoding="utf-8")
        assert str(home) not in scratch and not (home / "memstrata.db").exists()  # the user's store is untouched
