"""``memstrata bench scale`` at a tiny size, end to end: its JSON holds each figure beside its target."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from memstrata import InvalidInput
from memstrata.bench.scale import MANY_USERS_TARGETS, ONE_USER_TARGETS, ScaleOptions, run_scale
from tests.cli.test_cli import assert_one_line_error, ok, run_cli


def test_a_tiny_scale_run_writes_both_scenarios_with_their_targets(tmp_path: Path) -> None:
    target = tmp_path / "results" / "scale.json"
    arguments = ["--turns", "300", "--batch", "100", "--queries", "5", "--singles", "3"]
    arguments += ["--users", "6", "--turns-per-user", "4", "--rounds", "3", "--json", str(target)]
    output = ok(run_cli("bench", "scale", *arguments, home=tmp_path / "home"))
    assert "one user" in output and "many users" in output  # the tables

    result = json.loads(target.read_text())
    assert result["benchmark"] == "scale" and result["store"] == "sqlite"
    assert {"machine", "settings", "notes"} <= set(result)
    for moment in ("before", "after"):  # the machine's speed, for comparing runs of different days
        speed = result["machine_speed"][moment]
        assert speed["scan_gb_per_s"] > 0 and speed["python_loop_ms"] > 0
    assert "machine speed" in output
    one, many = result["one_user"], result["many_users"]
    assert one["embedder"] == many["embedder"] == "hash-bow-384" and one["dimension"] == 384
    assert one["summary"]["turns"] == 300 and one["counts"]["users"] == 1
    assert 0 < one["summary"]["first_search_s"] < 60  # the user's vectors loaded by their first search
    beside = one["raw_ms"]["beside_first_search"]  # another user's searches while it ran
    assert beside and one["summary"]["beside_first_search_max_ms"] == max(beside)
    assert len(one["raw_ms"]["search"]) == 5 and len(one["raw_ms"]["add"]) == 3
    assert many["summary"]["users"] == 6 and many["summary"]["turns_per_user"] == 4
    assert len(many["raw_ms"]["crowded"]["cold"]) == 3 and len(many["raw_ms"]["alone"]["cold"]) == 3
    for scenario, targets in ((one, ONE_USER_TARGETS), (many, MANY_USERS_TARGETS)):
        assert [row["measure"] for row in scenario["targets"]] == [name for name, _, _ in targets]
        for row in scenario["targets"]:
            assert row["value"] == scenario["summary"][row["measure"]]
            assert row["met"] is (row["value"] <= row["target_max"])
        for key, value in scenario["summary"].items():
            assert isinstance(value, int | float) and not isinstance(value, bool), key
            assert value > 0, (key, value)


def test_help_shows_an_example(tmp_path: Path) -> None:
    output = ok(run_cli("bench", "scale", "--help", home=tmp_path / "home"))
    assert "memstrata bench scale --turns" in output


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ([], "--turns N"),
        (["--users", "3", "--storage-url", "postgresql://nowhere/db", "--turns", "5"], "one scenario at a time"),
        (["--turns", "5", "--queries", "10"], "--queries"),
        (["--users", "3", "--others", "2"], "give --turns too"),
    ],
)
def test_bad_options_exit_2_before_any_work(tmp_path: Path, arguments: list[str], said: str) -> None:
    home = tmp_path / "home"
    line = assert_one_line_error(run_cli("bench", "scale", *arguments, "--home", str(home), home=home), 2)
    assert said in line
    assert not home.exists()


@pytest.mark.parametrize("arguments", [["--users", "1"], ["--turns", "0"], ["--turns", "many"]])
def test_out_of_range_options_are_usage_errors(tmp_path: Path, arguments: list[str]) -> None:
    home = tmp_path / "home"
    result = run_cli("bench", "scale", *arguments, "--home", str(home), home=home)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert not home.exists()


def test_options_are_checked_without_the_cli() -> None:
    with pytest.raises(InvalidInput, match="at least 2"):
        ScaleOptions(users=1).check()
    with pytest.raises(InvalidInput, match="--batch"):
        ScaleOptions(turns=10, queries=5, batch=0).check()
    ScaleOptions(turns=10, queries=5).check()


def test_without_tier_work_nothing_is_drained_or_reported(tmp_path: Path) -> None:
    options = ScaleOptions(users=3, turns_per_user=3, queries=2, rounds=2, warm_per_round=1, tier_work=False)
    result = run_scale(replace(options, home=tmp_path / "home"))
    summary = result["many_users"]["summary"]
    assert result["settings"]["tier_work"] is False and "one_user" not in result
    assert "tier_work_seconds" not in summary and summary["warm_search_p50_ms"] > 0


def test_others_joining_the_one_users_store_time_its_searches_again(tmp_path: Path) -> None:
    options = ScaleOptions(turns=120, others=3, turns_per_user=4, batch=60, queries=4, singles=2, tier_work=False)
    one = run_scale(replace(options, home=tmp_path / "home"))["one_user"]
    assert one["counts"]["users"] == 1  # counted before the others joined
    assert one["summary"]["others_joined"] == 3
    assert len(one["raw_ms"]["shared_search"]) == len(one["raw_ms"]["shared_context"]) == 4
    assert one["summary"]["shared_search_overhead_p50_ms"] > 0
    with pytest.raises(InvalidInput, match="--others"):
        ScaleOptions(turns=10, queries=5, others=-1).check()
