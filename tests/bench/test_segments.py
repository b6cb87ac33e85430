"""The segmentation benchmark: B-cubed scores, the streams it draws, and a small run with the hash embedder."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest

from memstrata import InvalidInput
from memstrata.bench.datasets import load_locomo
from memstrata.bench.segments import BLOCK_TURNS, SegmentBenchOptions, bcubed, draw_streams, run_segments
from tests.cli.test_cli import ok, run_cli
from tests.conftest import LOCOMO


def test_a_perfect_segmentation_scores_one() -> None:
    assert bcubed(["x", "x", "y"], ["a", "a", "b"]) == (1.0, 1.0, 1.0)


def test_one_segment_for_everything_has_full_recall_and_poor_precision() -> None:
    precision, recall, f1 = bcubed(["x"] * 4, ["a", "a", "b", "b"])
    assert (precision, recall) == (0.5, 1.0) and f1 == pytest.approx(2 / 3)


def test_one_segment_per_item_has_full_precision_and_poor_recall() -> None:
    precision, recall, _ = bcubed([1, 2, 3, 4], ["a", "a", "b", "b"])
    assert (precision, recall) == (1.0, 0.5)


def test_segments_and_labels_must_pair_up() -> None:
    with pytest.raises(ValueError, match="1 segments for 2 labels"):
        bcubed(["x"], ["a", "b"])
    with pytest.raises(ValueError, match="at least one"):
        bcubed([], [])


def test_streams_alternate_conversations_in_blocks_of_consecutive_turns() -> None:
    turns, _ = load_locomo(LOCOMO)
    names = list(dict.fromkeys(turn.conversation for turn in turns))[:3]
    streams = draw_streams(turns, names, streams=2, blocks=12, seed=5)
    assert streams == draw_streams(turns, names, streams=2, blocks=12, seed=5)  # reproducible
    for stream in streams:
        assert len(stream) == 12
        assert len({(block.conversation, block.session) for block in stream}) == 12  # no session twice
        assert all(first.conversation != second.conversation for first, second in itertools.pairwise(stream))
        for block in stream:
            assert block.conversation in names and 1 <= len(block.turns) <= BLOCK_TURNS[1]
            assert {(turn.conversation, turn.session) for turn in block.turns} == {(block.conversation, block.session)}
            said = [
                turn.dia_id
                for turn in turns
                if turn.session == block.session and turn.conversation == block.conversation
            ]
            start = said.index(block.turns[0].dia_id)
            assert [turn.dia_id for turn in block.turns] == said[start : start + len(block.turns)]


def test_streams_need_two_conversations_and_enough_sessions() -> None:
    turns, _ = load_locomo(LOCOMO)
    names = list(dict.fromkeys(turn.conversation for turn in turns))
    with pytest.raises(InvalidInput, match="two conversations"):
        draw_streams(turns, names[:1], streams=1, blocks=3, seed=0)
    with pytest.raises(InvalidInput, match="need more sessions"):
        draw_streams(turns, names[:2], streams=1, blocks=1000, seed=0)


def test_a_block_may_end_a_session() -> None:
    turns, _ = load_locomo(LOCOMO)
    names = list(dict.fromkeys(turn.conversation for turn in turns))
    streams = draw_streams(turns, names, streams=20, blocks=30, seed=1)
    last = {(turn.conversation, turn.session): turn.dia_id for turn in turns}  # each session's last turn
    assert any(block.turns[-1].dia_id == last[(block.conversation, block.session)] for s in streams for block in s)


def test_options_refuse_an_empty_run() -> None:
    with pytest.raises(InvalidInput, match="at least 1 stream of 2 blocks"):
        SegmentBenchOptions(streams=0)


def test_a_small_run_scores_every_filed_turn(tmp_path: Path) -> None:
    options = SegmentBenchOptions(
        data=LOCOMO, streams=1, blocks=3, whole_conversations=False, embedder="hash", home=tmp_path / "h"
    )
    report = run_segments(options)
    assert run_segments(options)["streams"] == report["streams"]  # a second run on the same home adds nothing
    assert report["benchmark"] == "segments" and report["whole_conversations"] is None
    assert 0 < report["thresholds"]["stay"] <= report["thresholds"]["join"] < 1
    for scores in report["streams"].values():
        (stream,) = scores["per_stream"]
        assert stream["turns"] >= 3 * BLOCK_TURNS[0] - 1  # every turn but the last, still in working memory
        assert 1 <= stream["segments"] <= stream["turns"]
        assert 0 < stream["precision"] <= 1 and 0 < stream["recall"] <= 1 and 0 <= stream["conversation_purity"] <= 1


def test_a_run_with_other_options_on_the_same_home_files_afresh(tmp_path: Path) -> None:
    options = SegmentBenchOptions(
        data=LOCOMO, streams=1, blocks=3, whole_conversations=False, embedder="hash", home=tmp_path / "h"
    )
    first = run_segments(options)
    fewer = run_segments(replace(options, blocks=2))  # the first run's users and turn ids are not reused
    assert fewer["streams"]["conversations 1-5"]["turns"] < first["streams"]["conversations 1-5"]["turns"]


def test_the_cli_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "segments.json"
    arguments = ("--data", str(LOCOMO), "--streams", "1", "--blocks", "2", "--no-whole", "--json", str(out))
    printed = ok(run_cli("bench", "segments", *arguments, home=tmp_path / "h"))
    report = json.loads(out.read_text())
    assert report["blocks_per_stream"] == 2 and report["streams_per_half"] == 1
    assert "mid-term segments" in printed and "conversations 6-10" in printed
