"""``memstrata costs``: the summary of the cost log, as a table and as JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from memstrata.cli import app
from memstrata.remote.costs import COST_LOG_FILE_NAME, CostLog
from memstrata.remote.usage import Usage

runner = CliRunner()


def _seed(home: Path) -> None:
    log = CostLog(home / COST_LOG_FILE_NAME)
    now = datetime.now(UTC)
    log.record(
        provider="openai",
        model="gpt-4o-mini",
        purpose="extract",
        usage=Usage(1000, 100, 500),
        latency_ms=5,
        time=now - timedelta(days=10),
    )
    log.record(provider="openai", model="gpt-4o-mini", purpose="chat", usage=Usage(3000, 100, 1500), latency_ms=5)
    log.record(provider="openai", model="llama3.1:8b", purpose="chat", usage=Usage(10, 1, 0), latency_ms=5)


def test_costs_as_json(home: Path) -> None:
    _seed(home)
    result = runner.invoke(app, ["costs", "--home", str(home), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["total"]["calls"] == 3
    assert summary["total"]["input_tokens"] == 4010
    assert summary["total"]["unpriced_calls"] == 1
    assert set(summary["by_model"]) == {"gpt-4o-mini", "llama3.1:8b"}
    assert set(summary["by_purpose"]) == {"chat", "extract"}
    assert summary["by_model"]["gpt-4o-mini"]["cached_share"] == 0.5


def test_costs_since(home: Path) -> None:
    _seed(home)
    result = runner.invoke(app, ["costs", "--home", str(home), "--since", "7d", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["total"]["calls"] == 2
    assert set(summary["by_purpose"]) == {"chat"}
    assert summary["since"] is not None


def test_costs_table(home: Path) -> None:
    _seed(home)
    result = runner.invoke(app, ["costs", "--home", str(home)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for text in ("per model", "per purpose", "gpt-4o-mini", "llama3.1:8b", "extract", "cached prefix", "estimates"):
        assert text in result.stdout
    assert "no price" in result.stdout
    assert "?" in result.stdout  # llama3.1:8b has no price at all


def test_costs_with_no_log(home: Path) -> None:
    result = runner.invoke(app, ["costs", "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert "no LLM calls logged" in result.stdout


def test_a_bad_since_exits_2_with_a_hint(home: Path) -> None:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
    result = subprocess.run(
        [sys.executable, "-m", "memstrata", "costs", "--home", str(home), "--since", "last tuesday"],
        capture_output=True,
        text=True,
        env={**environment, "COLUMNS": "200"},
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "7d" in result.stderr
