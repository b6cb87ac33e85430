"""``memstrata bench federation`` at a small size: it measures, and its checks find no leak and no lost write."""

from __future__ import annotations

from pathlib import Path

from memstrata.bench.federation import FederationOptions, run_federation


def test_a_small_federation_run_reports_latency_and_finds_no_leak(tmp_path: Path) -> None:
    options = FederationOptions(
        agents=3,
        spaces=6,
        memories=300,
        users=2,
        federated=2,
        queries=5,
        reads=120,
        writers=2,
        writes=5,
        home=tmp_path / "home",
    )
    result = run_federation(options)
    summary = result["summary"]
    assert result["benchmark"] == "federation" and result["store"] == "sqlite"
    assert summary["reads"] == 120 and summary["leaks"] == 0 and summary["wrong_decisions"] == 0
    assert 0 < summary["denied"] < 120  # both outcomes were exercised
    assert summary["concurrent_stored"] == 10 and summary["concurrent_lost"] == 0
    assert summary["concurrent_writers_complete"] is True
    assert summary["federated_overhead_p50_ms"] > 0 and len(result["search_ms"]["federated"]) == 5
