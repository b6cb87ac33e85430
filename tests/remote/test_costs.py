"""The cost log: whole lines from concurrent processes, prices as estimates, and the summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memstrata import InvalidInput, load_settings
from memstrata.config import CONFIG_FILE_NAME
from memstrata.prices import ModelPrice, default_prices, estimate_cost, find_price
from memstrata.remote.costs import COST_LOG_FILE_NAME, CostLog, CostRecord, parse_since, read_costs, summarize_costs
from memstrata.remote.usage import Usage

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def _record(log: CostLog, model: str, purpose: str, usage: Usage, *, hours_ago: float = 0) -> CostRecord:
    return log.record(
        provider="openai",
        model=model,
        purpose=purpose,
        usage=usage,
        latency_ms=12.5,
        time=NOW - timedelta(hours=hours_ago),
    )


def test_a_call_appends_one_json_line(tmp_path: Path) -> None:
    log = CostLog(tmp_path / "deep" / "dir" / COST_LOG_FILE_NAME)
    _record(log, "gpt-4o-mini", "extract", Usage(input_tokens=2000, output_tokens=100, cached_tokens=1000))
    (line,) = log.path.read_text(encoding="utf-8").splitlines()
    values = json.loads(line)
    assert values == {
        "time": "2026-03-02T12:00:00+00:00",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "purpose": "extract",
        "input_tokens": 2000,
        "output_tokens": 100,
        "cached_tokens": 1000,
        "cost_usd": pytest.approx((1000 * 0.15 + 1000 * 0.075 + 100 * 0.60) / 1_000_000),
        "latency_ms": 12.5,
    }


def test_unknown_models_cost_null(tmp_path: Path) -> None:
    log = CostLog(tmp_path / COST_LOG_FILE_NAME)
    assert _record(log, "llama3.1:8b", "chat", Usage(10, 10, 0)).cost_usd is None
    assert json.loads(log.path.read_text(encoding="utf-8"))["cost_usd"] is None


def test_prices_match_snapshots_and_router_prefixes() -> None:
    prices = default_prices()
    assert find_price("gpt-4o-mini-2024-07-18", prices) == prices["gpt-4o-mini"]
    assert find_price("gpt-4o-2024-08-06", prices) == prices["gpt-4o"]
    assert find_price("openai/gpt-4o-mini", prices) == prices["gpt-4o-mini"]
    assert find_price("claude-sonnet-4-20250514", prices) == prices["claude-sonnet-4"]
    assert find_price("qwen2.5:7b", prices) is None
    assert find_price("gpt-4o-latest", prices) == prices["gpt-4o"]
    # Other models whose names only start the same have no price, not a wrong one.
    assert find_price("gpt-5-nano", prices) is None and find_price("claude-opus-4-1", prices) is None


def test_cached_price_defaults_to_the_input_price() -> None:
    prices = {"m": ModelPrice(input=2.0, output=4.0)}
    cost = estimate_cost("m", prices, input_tokens=1_000_000, output_tokens=500_000, cached_tokens=400_000)
    assert cost == pytest.approx(2.0 + 2.0)


def test_prices_in_settings_merge_over_the_built_in_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / CONFIG_FILE_NAME).write_text(
        '[memstrata.llm_prices]\n"llama3.1:8b" = { input = 0.0, output = 0.0 }\n'
        '"gpt-4o-mini" = { input = 1.0, output = 2.0, cached_input = 0.5 }\n',
        encoding="utf-8",
    )
    settings = load_settings(home=home)
    assert settings.llm_prices["llama3.1:8b"] == ModelPrice(input=0, output=0)
    assert settings.llm_prices["gpt-4o-mini"].input == 1.0
    assert settings.llm_prices["gpt-4o"] == default_prices()["gpt-4o"]
    log = CostLog.for_settings(settings)
    assert log.path == home / COST_LOG_FILE_NAME
    assert _record(log, "llama3.1:8b", "chat", Usage(10, 10, 0)).cost_usd == 0.0
    monkeypatch.setenv("MEMSTRATA_LLM_PRICES", '{"my-model": {"input": 3, "output": 4}}')
    from_env = load_settings(home=tmp_path / "other")
    assert from_env.llm_prices["my-model"].output == 4
    assert "gpt-4o-mini" in from_env.llm_prices


def test_a_models_price_from_a_higher_source_replaces_its_whole_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cached_input from the file must not survive an entry that leaves it out (then it is the input price).
    (tmp_path / CONFIG_FILE_NAME).write_text(
        '[memstrata.llm_prices]\n"my-model" = { input = 1.0, output = 2.0, cached_input = 0.01 }\n', encoding="utf-8"
    )
    monkeypatch.setenv("MEMSTRATA_LLM_PRICES", '{"my-model": {"input": 5.0, "output": 6.0}}')
    assert load_settings(home=tmp_path).llm_prices["my-model"] == ModelPrice(input=5.0, output=6.0)
    argument = load_settings(home=tmp_path, llm_prices={"my-model": {"input": 7.0, "output": 8.0}})
    assert argument.llm_prices["my-model"] == ModelPrice(input=7.0, output=8.0)
    monkeypatch.delenv("MEMSTRATA_LLM_PRICES")
    assert load_settings(home=tmp_path).llm_prices["my-model"].cached_input == 0.01


def test_summary_per_model_and_purpose(tmp_path: Path) -> None:
    log = CostLog(tmp_path / COST_LOG_FILE_NAME)
    _record(log, "gpt-4o-mini", "extract", Usage(1000, 100, 800), hours_ago=30)
    _record(log, "gpt-4o-mini", "chat", Usage(2000, 200, 1200), hours_ago=2)
    _record(log, "llama3.1:8b", "chat", Usage(1000, 50, 0), hours_ago=1)
    summary = summarize_costs(log.path)
    assert summary.total.calls == 3
    assert summary.total.input_tokens == 4000
    assert summary.total.cached_tokens == 2000
    assert summary.total.cached_share == pytest.approx(0.5)
    assert summary.total.unpriced_calls == 1
    assert set(summary.by_model) == {"gpt-4o-mini", "llama3.1:8b"}
    assert summary.by_model["gpt-4o-mini"].calls == 2
    assert summary.by_model["llama3.1:8b"].cost_usd == 0.0
    assert summary.by_purpose["chat"].calls == 2
    assert summary.by_purpose["extract"].cached_share == pytest.approx(0.8)
    assert summary.total.cost_usd == pytest.approx(summary.by_model["gpt-4o-mini"].cost_usd)
    assert (summary.first, summary.last) == (NOW - timedelta(hours=30), NOW - timedelta(hours=1))

    recent = summarize_costs(log.path, since=NOW - timedelta(days=1))
    assert recent.total.calls == 2
    assert set(recent.by_purpose) == {"chat"}
    assert summarize_costs(str(log.path)) == summary  # a path given as text, as the docs' example does


def test_summary_of_a_missing_log_is_empty(tmp_path: Path) -> None:
    summary = summarize_costs(tmp_path / "none.jsonl")
    assert summary.total.calls == 0
    assert summary.by_model == {}


def test_torn_or_foreign_lines_are_skipped(tmp_path: Path) -> None:
    log = CostLog(tmp_path / COST_LOG_FILE_NAME)
    _record(log, "gpt-4o", "chat", Usage(1, 1, 0))
    with log.path.open("a", encoding="utf-8") as handle:
        handle.write('not json\n{"time": "yesterday"}\n\n{"provider": "openai", "mod')
        # Numbers no record holds: int(1e999) overflows, NaN would make every total NaN.
        for field in ('"input_tokens": 1e999', '"cost_usd": NaN', '"latency_ms": Infinity'):
            handle.write(f'\n{{"time": "2024-01-01T00:00:00+00:00", "provider": "openai", "model": "m", {field}}}')
    assert len(list(read_costs(log.path))) == 1


def test_write_failures_do_not_fail_the_call(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    log = CostLog(blocker / COST_LOG_FILE_NAME)  # its directory is a file
    entry = _record(log, "gpt-4o", "chat", Usage(1, 1, 0))
    assert entry.model == "gpt-4o"
    assert "cost log" in caplog.text


WRITER = """
import sys
import time
from pathlib import Path
from memstrata.remote.usage import Usage
from memstrata.remote.costs import CostLog

log = CostLog(Path(sys.argv[1]))
tag, count = sys.argv[2], int(sys.argv[3])
gate = Path(sys.argv[4])
Path(f"{gate}.{tag}").touch()  # ready
while not gate.exists():  # start together, so the appends interleave
    time.sleep(0.001)
for index in range(count):
    log.record(provider="openai", model="gpt-4o-mini", purpose=tag * 6000, usage=Usage(index, 1, 0), latency_ms=1.0)
"""


@pytest.mark.slow
def test_two_processes_append_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / COST_LOG_FILE_NAME
    gate = tmp_path / "go"
    count = 150
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), tag, str(count), str(gate)],
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for tag in ("a", "b")
    ]
    deadline = time.monotonic() + 60
    while not all(Path(f"{gate}.{tag}").exists() for tag in ("a", "b")) and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.touch()
    for writer in writers:
        _, errors = writer.communicate(timeout=120)
        assert writer.returncode == 0, errors.decode()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 * count
    records = [CostRecord.from_json(line) for line in lines]
    assert all(record is not None for record in records)
    purposes = [record.purpose for record in records if record is not None]
    assert sorted({purpose[0] for purpose in purposes}) == ["a", "b"]
    assert all(purpose in ("a" * 6000, "b" * 6000) for purpose in purposes)
    for tag in ("a", "b"):
        mine = [record.input_tokens for record in records if record is not None and record.purpose[0] == tag]
        assert mine == list(range(count))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7d", NOW - timedelta(days=7)),
        ("12h", NOW - timedelta(hours=12)),
        ("30m", NOW - timedelta(minutes=30)),
        ("2w", NOW - timedelta(weeks=2)),
        ("90s", NOW - timedelta(seconds=90)),
        (" 1.5D ", NOW - timedelta(hours=36)),
        ("2026-01-31", datetime(2026, 1, 31, tzinfo=UTC)),
        ("2026-01-31T09:00:00+02:00", datetime(2026, 1, 31, 7, tzinfo=UTC)),
    ],
)
def test_parse_since(text: str, expected: datetime) -> None:
    assert parse_since(text, now=NOW) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "7 days", "-3d", "2026-13-01"])
def test_parse_since_rejects_with_a_hint(text: str) -> None:
    with pytest.raises(InvalidInput, match="7d"):
        parse_since(text, now=NOW)


def test_a_since_time_is_read_in_utc_as_the_summary_prints_it() -> None:
    assert parse_since("2026-01-31T09:00:00+02:00", now=NOW).utcoffset() == timedelta(0)


@pytest.mark.parametrize("text", ["1000000d", "99999999999w", "9" * 400 + "d"])
def test_a_duration_reaching_before_the_year_1_is_invalid_input(text: str) -> None:
    with pytest.raises(InvalidInput, match="shorter duration"):
        parse_since(text, now=NOW)


@pytest.mark.parametrize("text", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-05:00"])
def test_a_time_at_the_edge_of_the_calendar_is_invalid_input(text: str) -> None:
    with pytest.raises(InvalidInput, match="edge of the calendar"):
        parse_since(text, now=NOW)
