"""A server SIGKILLed under load and restarted keeps every write it acknowledged (the serve benchmark, briefly)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstrata.bench.serve import ServeBenchOptions, run_serve_bench


@pytest.mark.slow
def test_no_acknowledged_write_is_lost_to_a_sigkill(tmp_path: Path) -> None:
    options = ServeBenchOptions(clients=3, seconds=4.0, users=3, kill=True, embedder="hash", home=tmp_path / "home")
    result = run_serve_bench(options)
    verified = result["verified"]
    assert result["kill"]["down_seconds"] > 0
    assert verified["acknowledged"] > 20, result
    assert verified["missing"] == 0, verified["missing_ids"]
    assert result["add"]["ok"] == verified["acknowledged"]
    assert result["search"]["ok"] > 0
    assert result["add"]["p50_ms"] <= result["add"]["p99_ms"]


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="clients"):
        run_serve_bench(ServeBenchOptions(clients=0))
