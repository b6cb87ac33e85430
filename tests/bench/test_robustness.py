"""LoCoMo robustness: each perturbation alone on real LoCoMo turns, then a tiny run with the hash embedder."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstrata import InvalidInput
from memstrata.bench.datasets import DialogTurn, Question, load_locomo
from memstrata.bench.perturb import (
    FILLERS,
    PERTURBATIONS,
    SURNAMES,
    check_perturbations,
    filler,
    lowercase,
    names,
    split,
    typos,
    unchanged,
)
from memstrata.bench.replay import dia_ids, turn_id
from memstrata.bench.robustness import ROW_HEADINGS, RobustnessOptions, run_robustness, summary_rows
from tests.cli.test_cli import assert_one_line_error, ok, run_cli
from tests.conftest import LOCOMO

CAPTION = re.compile(r" \[shared an image: .*\]$")


@pytest.fixture(scope="module")
def locomo() -> tuple[list[DialogTurn], list[Question]]:
    """Every LoCoMo turn and question, read once."""
    return load_locomo(LOCOMO)


@pytest.fixture(scope="module")
def turns(locomo: tuple[list[DialogTurn], list[Question]]) -> list[DialogTurn]:
    """The first two conversations (630 turns): enough words for the rates to settle."""
    first_two = list(dict.fromkeys(turn.conversation for turn in locomo[0]))[:2]
    return [turn for turn in locomo[0] if turn.conversation in first_two]


@pytest.fixture(scope="module")
def first_sessions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """LoCoMo cut to the first session of each of its ten conversations, with the questions asked of it."""
    samples = json.loads(LOCOMO.read_text(encoding="utf-8"))
    for sample in samples:
        conversation = sample["conversation"]
        later = [key for key in conversation if re.fullmatch(r"session_(?!1(_|$))\d+(_date_time)?", key)]
        for key in later:
            del conversation[key]
        sample["qa"] = [
            qa
            for qa in sample["qa"]
            if qa.get("evidence") and all(d.startswith("D1:") for e in qa["evidence"] for d in dia_ids(e))
        ]
    path = tmp_path_factory.mktemp("locomo") / "locomo-first-sessions.json"
    path.write_text(json.dumps(samples), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(PERTURBATIONS))
def test_each_perturbation_is_deterministic_for_a_seed_and_per_conversation(name: str, turns: list[DialogTurn]) -> None:
    perturb = PERTURBATIONS[name]
    once = perturb(turns, 5)
    assert once == perturb(turns, 5)
    if name != "lowercase":  # the one rule without chance
        assert once.turns != perturb(turns, 6).turns
    assert once.turns != tuple(turns), f"{name} changed nothing"
    # A conversation is perturbed the same way whether it runs alone or with the others.
    second = [turn for turn in turns if turn.conversation == turns[-1].conversation]
    alone = perturb(second, 5)
    assert [t for t in once.turns if t.conversation == turns[-1].conversation] == list(alone.turns)
    # Every new turn maps to a LoCoMo turn (or, a filler, to itself), and questions are never an argument.
    assert set(once.origin) == {turn_id(turn) for turn in once.turns}
    originals = {turn_id(turn) for turn in turns}
    assert all(source in originals or name == "filler" for source in once.origin.values())


def test_clean_is_the_identity(turns: list[DialogTurn]) -> None:
    clean = unchanged(turns)
    assert clean.turns == tuple(turns) and all(new == old for new, old in clean.origin.items())


def test_lowercase_drops_case_and_prose_punctuation_only(turns: list[DialogTurn]) -> None:
    result = lowercase(turns)
    assert len(result.turns) == len(turns)
    for old, new in zip(turns, result.turns, strict=True):
        assert replace(new, text=old.text) == old, "only the text changes"
        typed, old_typed = CAPTION.sub("", new.text), CAPTION.sub("", old.text)
        assert new.text.removeprefix(typed) == old.text.removeprefix(old_typed), "the image caption is kept"
        assert typed == typed.lower()
        if re.search(r"\w", old_typed):  # an emoticon alone (";)") stays as typed
            assert not re.search(r"[.,!?;:\"()…]", re.sub(r"(?<=\d)[.,:](?=\d)", "", typed)), typed
        assert re.sub(r"\W", "", typed) == re.sub(r"\W", "", old_typed.lower()), "no letter or digit lost"
    assert (
        lowercase([replace(turns[0], text="Well... I'm in!Ok...it's 3.5 km, at 10:30 (x-ray) — “yes”?")]).turns[0].text
        == "well i'm in ok it's 3.5 km at 10:30 x-ray yes"
    )
    # A message of nothing but marks is an emoticon, typed as it is (never an empty message).
    emoticons = [replace(turns[0], text=";)"), replace(turns[0], text=":-(")]
    assert [t.text for t in lowercase(emoticons).turns] == [";)", ":-("]


def _one_edit_apart(old: str, new: str) -> bool:
    """Swap of two neighbours, one letter dropped, doubled or replaced."""
    if len(old) == len(new):
        differ = [i for i in range(len(old)) if old[i] != new[i]]
        swapped = len(differ) == 2 and differ[1] == differ[0] + 1 and old[differ[0]] == new[differ[1]]
        return len(differ) == 1 or (swapped and old[differ[1]] == new[differ[0]])
    shorter, longer = sorted((old, new), key=len)
    return len(longer) == len(shorter) + 1 and any(longer[:i] + longer[i + 1 :] == shorter for i in range(len(longer)))


def test_typos_edit_about_a_tenth_of_the_long_words_once_each(turns: list[DialogTurn]) -> None:
    result = typos(turns, 2)
    eligible = changed = 0
    for old, new in zip(turns, result.turns, strict=True):
        assert replace(new, text=old.text) == old, "only the text changes"
        old_typed, new_typed = CAPTION.sub("", old.text), CAPTION.sub("", new.text)
        assert old.text.removeprefix(old_typed) == new.text.removeprefix(new_typed), "the image caption is kept"
        assert re.sub(r"[A-Za-z]", "", old_typed) == re.sub(r"[A-Za-z]", "", new_typed), "only letters change"
        old_words, new_words = re.findall(r"[A-Za-z]+", old_typed), re.findall(r"[A-Za-z]+", new_typed)
        assert len(old_words) == len(new_words)
        for before, after in zip(old_words, new_words, strict=True):
            eligible += len(before) >= 4
            if before != after:
                changed += 1
                assert len(before) >= 4 and _one_edit_apart(before, after), (before, after)
                assert before[0] == after[0], "the first letter is never mistyped"
    assert 0.085 <= changed / eligible <= 0.115, changed / eligible


def test_split_pieces_rejoin_to_the_turn(turns: list[DialogTurn]) -> None:
    result = split(turns, 3)
    pieces: dict[str, list[DialogTurn]] = {}
    for piece in result.turns:
        pieces.setdefault(result.origin[turn_id(piece)], []).append(piece)
    assert list(pieces) == [turn_id(turn) for turn in turns], "every turn, in order, its pieces in a row"
    split_turns = 0
    for turn in turns:
        made = pieces[turn_id(turn)]
        assert " ".join(piece.text for piece in made).split() == turn.text.split(), "the words, all of them, in order"
        assert {(p.conversation, p.session, p.speaker, p.timestamp) for p in made} == {
            (turn.conversation, turn.session, turn.speaker, turn.timestamp)
        }
        if len(made) == 1:
            assert made[0] == turn, "a turn left whole keeps its id"
        else:
            split_turns += 1
            assert 2 <= len(made) <= 4
            assert [p.dia_id for p in made] == [f"{turn.dia_id}#{n}" for n in range(1, len(made) + 1)]
            assert all(not CAPTION.search(p.text) for p in made[:-1]), "the caption goes with the last piece"
        if len(CAPTION.sub("", turn.text).split()) < 8:
            assert made == [turn], "a turn of very few words stays whole"
    assert split_turns > 0.8 * len(turns)
    first = [p.text for p in split([replace(turns[0], text="Hey Mel! Good to see you. How have you been?")]).turns]
    assert first in (
        ["Hey Mel! Good to see you.", "How have you been?"],
        ["Hey Mel!", "Good to see you.", "How have you been?"],
    )


def test_names_change_only_the_speaker_and_by_a_generic_rule(
    turns: list[DialogTurn], locomo: tuple[list[DialogTurn], list[Question]]
) -> None:
    made_up = [
        replace(turn, speaker={"Caroline": "Xaviera", "Melanie": "Bo"}.get(turn.speaker, "Quentin")) for turn in turns
    ]
    for data in (turns, made_up):
        result = names(data, 4)
        assert [replace(new, speaker=old.speaker) for old, new in zip(data, result.turns, strict=True)] == data
        shown = {(old.conversation, old.speaker): new.speaker for old, new in zip(data, result.turns, strict=True)}
        assert len(shown) == len({(old.conversation, old.speaker) for old in data}), "one display name per speaker"
        for (_, speaker), display in shown.items():
            assert display != speaker
            nickname = display in (speaker[:3], speaker[:4]) and len(display) < len(speaker)
            full = display.startswith(f"{speaker} ") and display.removeprefix(f"{speaker} ") in SURNAMES
            assert nickname or full, (speaker, display)
        for conversation in {conversation for conversation, _ in shown}:
            mine = [display for (where, _), display in shown.items() if where == conversation]
            assert len(set(mine)) == len(mine), "two speakers never share a display name"
    speakers = {turn.speaker for turn in locomo[0]}
    assert not speakers & set(SURNAMES), "no rule names a dataset's speaker"
    kinds = Counter(" " in names(turns, seed).turns[0].speaker for seed in range(40))
    assert kinds[True] > 5 and kinds[False] > 5, "both nicknames and full names are drawn"


def test_fillers_are_small_talk_after_a_fifth_of_turns_and_never_evidence(
    turns: list[DialogTurn], locomo: tuple[list[DialogTurn], list[Question]]
) -> None:
    result = filler(turns, 9)
    originals = {turn_id(turn) for turn in turns}
    kept = [turn for turn in result.turns if turn_id(turn) in originals]
    added = [turn for turn in result.turns if turn_id(turn) not in originals]
    assert kept == turns, "the turns are all there, unchanged, in order"
    assert 0.17 <= len(added) / len(turns) <= 0.23
    speakers = {(turn.conversation, turn.speaker) for turn in turns}
    for turn in added:
        assert turn.text in FILLERS and turn.dia_id.endswith("~1")
        assert (turn.conversation, turn.speaker) in speakers
        assert result.origin[turn_id(turn)] == turn_id(turn) and turn_id(turn) not in originals
    evidence = {f"{q.conversation}:{d}" for q in locomo[1] for e in q.evidence for d in dia_ids(e)}
    assert not {result.origin[turn_id(turn)] for turn in added} & evidence
    assert {turn.speaker for turn in added} == {turn.speaker for turn in turns}, "either speaker says them"


def test_unknown_perturbation_is_invalid_input_naming_the_valid_ones() -> None:
    assert check_perturbations(["clean", " typos", "split", "typos", ""]) == ("typos", "split")
    with pytest.raises(InvalidInput, match="unknown perturbation 'emoji'; choose from clean, lowercase, typos"):
        check_perturbations(["typos", "emoji"])
    with pytest.raises(InvalidInput, match="unknown perturbation"):
        run_robustness(RobustnessOptions(perturbations=("Typos",)))


def test_tiny_run_reports_each_variant_beside_clean(first_sessions: Path, tmp_path: Path) -> None:
    options = RobustnessOptions(data=first_sessions, conversations=(1, 6), embedder="hash", seed=3)
    report, records = run_robustness(options)
    assert list(report["variants"]) == ["clean", "lowercase", "typos", "split", "names", "filler"]
    assert report["conversations"] == [1, 6] and report["embedder"] == "hash-bow-384"
    assert report["questions"] == len(records) == 4 + 3
    _, questions = load_locomo(first_sessions)
    asked = {(q.conversation, q.question, q.answer) for q in questions}
    clean = report["variants"]["clean"]
    assert "delta_vs_clean" not in clean
    assert clean["turns"] == 18 + 24
    assert set(clean["scores"]) == {"all", "conversations 1-5", "conversations 6-10"}
    assert clean["scores"]["all"]["overall"]["questions"] == 7
    assert clean["scores"]["all"]["overall"]["recall@10"] > 0.5, "a session of 18-24 turns: most evidence in 10 hits"
    for name, variant in report["variants"].items():
        for split_name, groups in variant["scores"].items():
            assert (
                sum(g["questions"] for k, g in groups.items() if k.startswith("category"))
                == groups["overall"]["questions"]
            )
            for group, scores in groups.items():
                # The answer is not bounded by the ceiling: a summary's or fact's words may be in no turn.
                for metric in ("recall@10", "answer_in_context@1000", "answer_in_conversation"):
                    assert 0.0 <= scores[metric] <= 1.0
                    if name != "clean":
                        expected = scores[metric] - clean["scores"][split_name][group][metric]
                        assert variant["delta_vs_clean"][split_name][group][metric] == pytest.approx(expected)
    assert report["variants"]["split"]["turns"] > clean["turns"] < report["variants"]["filler"]["turns"]
    for record in records:
        assert (record["conversation"], record["question"], record["answer"]) in asked, "questions untouched"
        for name in report["variants"]:
            entry = record[name]
            # A hit stands for its turn, or for a burst of pieces sent in a row (join_bursts).
            assert len(entry["ranked"]) <= 10 or name in ("split", "filler")
            assert entry["ranked"] == list(dict.fromkeys(re.sub(r"#\d+$", "", hit) for hit in entry["hits"]))
            assert not any("#" in item for item in entry["ranked"]), "pieces count as their turns"
            found = set(entry["ranked"]) & set(record["evidence"])
            assert entry["recall@10"] == len(found) / len(record["evidence"])
            assert not any(item.endswith("~1") for item in found), "a filler is never evidence"
    rows = summary_rows(report)
    assert len(rows[0]) == len(ROW_HEADINGS)
    assert [row[0] for row in rows] == list(report["variants"])
    assert rows[0][4] == rows[0][6] == "" and rows[1][4][0] in "+-" and rows[1][6][0] in "+-"
    assert all(re.fullmatch(r"\d\.\d{3}", cell) for cell in rows[0][1:4]), "both halves were run"


def test_cli_bad_options_exit_2_with_one_line(home: Path) -> None:
    line = assert_one_line_error(run_cli("bench", "robustness", "--perturbations", "typos,emoji", home=home), 2)
    assert "unknown perturbation 'emoji'" in line and "lowercase, typos, split, names, filler" in line
    for arguments, said in ((["--limit", "0"], "--limit"), (["--conversations", "3-1"], "range from 1")):
        assert said in assert_one_line_error(run_cli("bench", "robustness", *arguments, home=home), 2)


def test_cli_prints_the_table_and_writes_json(first_sessions: Path, home: Path, tmp_path: Path) -> None:
    target = tmp_path / "robustness.json"
    arguments = [
        "--data",
        str(first_sessions),
        "--conversations",
        "1",
        "--perturbations",
        "names",
        "--json",
        str(target),
    ]
    output = ok(run_cli("bench", "robustness", *arguments, home=home))
    assert "LoCoMo robustness" in output and "clean" in output and "names" in output
    report = json.loads(target.read_text())
    assert list(report["variants"]) == ["clean", "names"] and report["seed"] == 1
    assert summary_rows(report)[0][3] == "—", "no held-out conversation was run"
    assert datetime.fromisoformat(report["measured_at"]).tzinfo == UTC
