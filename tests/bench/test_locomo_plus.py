"""LoCoMo-Plus on made-up data (three small conversations, eight invented pairs) with the hash embedder."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memstrata import InvalidInput, Memory
from memstrata.bench.datasets import load_locomo
from memstrata.bench.locomo_plus import (
    SYSTEMS,
    LocomoPlusOptions,
    first_rank,
    reciprocal_rank,
    rrf,
    run_locomo_plus,
)
from memstrata.bench.locomo_plus_data import load_locomo_plus, load_speakers, parse_time_gap, place
from tests.cli.test_cli import assert_one_line_error, ok, run_cli

DATA = Path(__file__).parent / "data"
PLUS = DATA / "locomo_plus_sample.json"
LOCOMO_SAMPLE = DATA / "locomo_sample.json"


@pytest.mark.parametrize(
    ("gap", "days"),
    [
        ("two weeks later", 14),
        ("about one month later", 30),
        ("around six weeks later", 42),
        ("roughly three months later", 90),
        ("One Year Later", 365),
        ("a year after", 365),
        ("a month later", 30),
        ("an hour and a week later", 7),
        ("2 weeks later", 14),
        ("12 months later", 360),
        ("two months after the challenge ended", 60),
        ("around one week after the birth", 7),
        ("several months later", 90),
        ("a few weeks later", 21),
        ("a couple of months later", 60),
        ("several years later", 1095),
        ("some time later", 0),
        ("two days later", 0),
        ("", 0),
        ("someone weeks later", 0),
    ],
)
def test_time_gaps_read_as_days(gap: str, days: int) -> None:
    assert parse_time_gap(gap) == days


def test_the_sample_loads_with_triggers_as_the_a_lines() -> None:
    items = load_locomo_plus(PLUS)
    assert [item.index for item in items] == list(range(8))
    assert {item.relation for item in items} == {"causal", "state", "goal", "value"}
    assert items[0].cue == (
        ("A", "I started training for the Lisbon marathon in my new blue running shoes."),
        ("B", "Good luck, Lisbon is hilly!"),
    )
    assert items[5].trigger == "Want to grab breakfast at eight tomorrow?", "the B line of a trigger is not asked"
    assert items[5].cue[0] == ("B", "How is the new job?")


def test_cues_are_dealt_round_robin_and_dated_a_week_after_the_last_session_less_the_gap() -> None:
    turns, _ = load_locomo(LOCOMO_SAMPLE)
    placements = place(load_locomo_plus(PLUS), turns, load_speakers(LOCOMO_SAMPLE))
    assert [p.conversation for p in placements] == ["conv-a", "conv-b", "conv-c"] * 2 + ["conv-a", "conv-b"]
    first = placements[0]
    assert first.query_time == datetime(2023, 6, 8, 9, 15, tzinfo=UTC)  # 1 June 2023 9:15 am + 7 days
    assert first.cue_time == first.query_time - timedelta(days=14)
    assert placements[3].cue_time == datetime(2022, 6, 8, 9, 15, tzinfo=UTC)  # "a year after": before every session
    assert placements[2].query_time == datetime(2023, 11, 6, 18, 0, tzinfo=UTC)
    # A is speaker_a and B speaker_b, whoever opens the conversation (Tomas opens conv-a; Rosa is speaker_a).
    assert [(t.speaker, t.session, t.dia_id) for t in first.cue_turns] == [
        ("Rosa", "plus_0", "P0:1"),
        ("Tomas", "plus_0", "P0:2"),
    ]
    assert first.speaker == "Rosa" and placements[1].speaker == "Ikram"
    assert [t.speaker for t in placements[5].cue_turns] == ["Arjun", "Mei"]  # a cue opened by B
    assert first.evidence == ["conv-a:P0:1", "conv-a:P0:2"]
    assert placements[6].evidence == ["conv-a:P6:1"]
    assert {t.timestamp for p in placements for t in p.cue_turns} == {p.cue_time for p in placements}


def test_ranking_helpers() -> None:
    assert reciprocal_rank(["x", "y", "c"], ["c", "d"]) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x"] * 10 + ["c"], ["c"]) == 0.0, "past the tenth rank counts nothing"
    assert first_rank(["x"] * 10 + ["c"], ["c"]) == 11 and first_rank(["x"], ["c"]) is None
    assert rrf([["a", "b"], ["b", "c"]]) == ["b", "a", "c"]
    assert rrf([["a", "b"], ["b", "a"]]) == ["a", "b"], "a tie keeps the first-seen order"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("not json at all", "JSONDecodeError"),
        ('{"relation_type": "causal"}', "non-empty JSON list"),
        ("[]", "non-empty JSON list"),
        ('[{"relation_type": "goal", "cue_dialogue": "A: hi", "time_gap": "a week later"}]', "trigger_query"),
        ('[{"relation_type": "goal", "cue_dialogue": "hi", "trigger_query": "A: x", "time_gap": ""}]', "line 1"),
        ('[{"relation_type": "goal", "cue_dialogue": "A: hi", "trigger_query": "B: x", "time_gap": ""}]', "no 'A:"),
        ('[{"relation_type": 3, "cue_dialogue": "A: hi", "trigger_query": "A: x", "time_gap": ""}]', "text"),
        ("[7]", "item 0 is int"),
    ],
)
def test_a_file_not_in_the_format_is_invalid_input(tmp_path: Path, content: str, said: str) -> None:
    path = tmp_path / "plus.json"
    path.write_text(content)
    with pytest.raises(InvalidInput, match=r"is not LoCoMo-Plus's locomo_plus\.json") as caught:
        load_locomo_plus(path)
    assert said in str(caught.value) and "Locomo-Plus repository" in str(caught.value)


def test_a_missing_file_is_invalid_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"no LoCoMo-Plus file at .*data/locomo_plus\.json"):
        load_locomo_plus(tmp_path / "nowhere.json")
    with pytest.raises(InvalidInput, match=r"not LoCoMo's locomo10\.json"):
        load_speakers(PLUS)


def test_end_to_end_with_the_hash_embedder(tmp_path: Path) -> None:
    options = LocomoPlusOptions(data=PLUS, locomo=LOCOMO_SAMPLE, embedder="hash", home=tmp_path / "h")
    report, records = run_locomo_plus(options)
    assert report["benchmark"] == "locomo-plus" and report["embedder"] == "hash-bow-384"
    assert report["items"] == len(records) == 8
    assert report["locomo_turns"] == 21 and report["cue_turns"] == 14
    assert set(report["splits"]) == {"all", "tuning", "held out"}
    assert report["splits"]["tuning"]["items"] == report["splits"]["held out"]["items"] == 4
    assert {r["index"] for r in records if r["half"] == "tuning"} == {0, 2, 4, 6}
    assert set(report["relations"]) == {"causal", "state", "goal", "value"}
    assert {"search", "context@500", "context@1000", "context@2000"} == set(report["latency_ms"])
    for group in [*report["splits"].values(), *report["relations"].values()]:
        assert set(group["retrieval"]) == set(SYSTEMS)
        for scores in group["retrieval"].values():
            assert 0.0 <= scores["mrr@10"] <= scores["hit@10"] <= 1.0 and 0.0 <= scores["recall@10"] <= 1.0
        assert set(group["context"]) == {"500", "1000", "2000"}
    for record in records:
        for system in SYSTEMS:
            assert len(record[system]["ranked"]) <= 10
            assert all(item.startswith(record["conversation"] + ":") for item in record[system]["ranked"]), "scope"
        assert all(item.startswith(record["conversation"] + ":P") for item in record["evidence"])
    # The one cue that shares words with its trigger is found first by every system and shown in every context.
    marathon = records[0]
    assert marathon["trigger"].startswith("My blue running shoes")
    for system in SYSTEMS:
        assert marathon[system]["ranked"][0] in marathon["evidence"], system
    assert all(entry["cue_in_context"] for entry in marathon["context"].values())
    # Every turn and cue is stored under its own id and date; the triggers are not stored.
    with Memory(tmp_path / "h", embedder="hash") as memory:
        stored = {c: memory.history(user_id=c) for c in ("conv-a", "conv-b", "conv-c")}
    assert sum(len(turns) for turns in stored.values()) == 21 + 14
    assert {r["trigger"] for r in records}.isdisjoint(turn.content for turns in stored.values() for turn in turns)
    cue = next(turn for turn in stored["conv-a"] if turn.id == "conv-a:P3:1")
    assert cue.created_at == datetime(2022, 6, 8, 9, 15, tzinfo=UTC) and cue.name == "Rosa"
    assert [turn.id for turn in stored["conv-a"]][:2] == ["conv-a:P3:1", "conv-a:P3:2"], "a year back: first"
    all_scores = report["splits"]["all"]["retrieval"]["memstrata"]
    assert all_scores["hit@10"] >= 1 / 8 and all_scores["mrr@10"] >= 1 / 8


def test_limit_asks_fewer_triggers(tmp_path: Path) -> None:
    options = LocomoPlusOptions(data=PLUS, locomo=LOCOMO_SAMPLE, embedder="hash", home=tmp_path / "h", limit=3)
    report, records = run_locomo_plus(options)
    assert [r["index"] for r in records] == [0, 1, 2] and report["cue_turns"] == 14
    with pytest.raises(InvalidInput, match="at least 1"):
        run_locomo_plus(LocomoPlusOptions(data=PLUS, limit=0))


def test_cli_prints_tables_and_writes_json_and_details(tmp_path: Path) -> None:
    target, details = tmp_path / "plus.json", tmp_path / "plus.jsonl"
    output = ok(
        run_cli(
            "bench",
            "locomo-plus",
            *("--data", str(PLUS), "--locomo", str(LOCOMO_SAMPLE), "--limit", "4"),
            *("--json", str(target), "--details", str(details)),
            home=tmp_path / "home",
        )
    )
    assert "LoCoMo-Plus, 4 triggers" in output and "bm25+dense" in output and "cue in ctx@2000" in output
    assert json.loads(target.read_text())["items"] == 4
    assert [json.loads(line)["index"] for line in details.read_text().splitlines()] == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ([], "--data is required"),
        (["--data", "nowhere.json"], "no LoCoMo-Plus file at nowhere.json"),
        (["--data", str(LOCOMO_SAMPLE)], "is not LoCoMo-Plus's locomo_plus.json"),
        (["--data", str(PLUS), "--limit", "0"], "--limit"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(tmp_path: Path, arguments: list[str], said: str) -> None:
    line = assert_one_line_error(run_cli("bench", "locomo-plus", *arguments, home=tmp_path / "home"), 2)
    assert said in line
    assert "data/locomo_plus.json" in line or "--limit" in line
