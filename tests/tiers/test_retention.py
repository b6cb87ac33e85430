"""Retention policies from settings: applied to every user and space, on demand and in the background, audited."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pytest

from memstrata import ConfigError, Memory, load_settings
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.facade.retention import RetentionKeeper
from memstrata.tiers.worker import Activity
from tests.cli.test_cli import run_cli

KEEP_ONE = {"episodic": {"keep_last": 1}}


def _fill(memory: Memory, **owner: str) -> None:
    for day in range(3):
        memory.add(
            [{"role": "user", "content": f"Note {day}: the plumber visits on day {day}."}],
            session_id=f"day-{day}",
            **owner,
        )


def _retention_events(memory: Memory) -> int:
    rows = memory.parts.store._fetch_all("SELECT count(*) FROM events WHERE kind = 'retention'", [])  # type: ignore[attr-defined]
    return int(rows[0][0])


def test_apply_retention_prunes_every_user_and_space_and_audits_it(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False, retention=KEEP_ONE) as memory:
        memory.create_space("household")
        for user in ("ana", "ben"):
            _fill(memory, user_id=user)
        _fill(memory, space="household")
        deleted = memory.apply_retention()
        assert deleted == {"episodic": 6}  # two of three turns, for each of three memories
        for owner in ({"user_id": "ana"}, {"user_id": "ben"}, {"space": "household"}):
            assert [turn.content for turn in memory.history(**owner)] == ["Note 2: the plumber visits on day 2."]
        assert _retention_events(memory) >= 3
        assert memory.apply_retention() == {"episodic": 0}  # nothing more to do


def test_without_rules_nothing_is_pruned(home: Path) -> None:
    assert load_settings(home=home).retention == {}
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        _fill(memory, user_id="ana")
        assert memory.apply_retention() == {}
        assert len(memory.history(user_id="ana")) == 3


def test_a_pass_is_logged_with_counts_and_never_names_a_user(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="memstrata.retention")
    with Memory(home, embedder=HashEmbedder(), background=False, retention=KEEP_ONE) as memory:
        _fill(memory, user_id="ana.secret@example.com")
        memory.apply_retention()
    messages = [record.getMessage() for record in caplog.records if record.name == "memstrata.retention"]
    assert messages == ["retention deleted 2 episodic across 1 memories"]
    assert "example.com" not in caplog.text


def test_the_background_worker_applies_the_rules_on_its_own(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), retention=KEEP_ONE, retention_interval_seconds=0.2) as memory:
        _fill(memory, user_id="ana")
        deadline = time.monotonic() + 30
        while len(memory.history(user_id="ana")) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(memory.history(user_id="ana")) == 1


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({"cells": {"keep_last": 1}}, "the tiers with retention are"),
        ({"midterm": {}}, "needs keep_last, max_age_days, or both"),
        ({"midterm": {"keep_last": -1}}, "greater than or equal to 0"),
        ({"midterm": {"max_age_days": 1, "colour": "red"}}, "Extra inputs"),
    ],
)
def test_bad_rules_are_config_errors(home: Path, rules: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(home=home, retention=rules)


def test_the_cli_applies_the_rules_or_says_how_to_set_them(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        _fill(memory, user_id="ana")
    missing = run_cli("retention", home=home)
    assert missing.returncode == 4 and "no retention rules are set" in missing.stderr
    applied = run_cli("retention", "--json", home=home, env={"MEMSTRATA_RETENTION": json.dumps(KEEP_ONE)})
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout) == {"episodic": 2}


def test_the_largest_age_is_bounded_and_still_prunes_nothing(home: Path) -> None:
    with pytest.raises(ConfigError, match="less than or equal to 1000000"):
        load_settings(home=home, retention={"midterm": {"max_age_days": 1e10}})
    rules = {"episodic": {"max_age_days": 1_000_000}}
    with Memory(home, embedder=HashEmbedder(), background=False, retention=rules) as memory:
        _fill(memory, user_id="ana")
        assert memory.apply_retention() == {"episodic": 0}


class _CountedRetention:
    """Stands in for ``Retention``: counts passes (the keeper's timing is what is tested)."""

    def __init__(self) -> None:
        self.passes = threading.Event()

    def apply(self) -> dict[str, int]:
        self.passes.set()
        return {}


def test_a_background_pass_waits_for_a_quiet_moment_in_the_foreground() -> None:
    activity = Activity()
    retention = _CountedRetention()
    keeper = RetentionKeeper(retention, 3600.0, first_after_seconds=0.01, activity=activity)  # type: ignore[arg-type]
    with activity:  # a foreground call in progress
        keeper.start()
        assert not retention.passes.wait(0.3)
    assert retention.passes.wait(5.0)  # once the call ends (and the foreground stays quiet)
    keeper.stop()
