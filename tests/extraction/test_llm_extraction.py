"""The LLM-backed extractors alone: what they ask, and how they check every field of a reply."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.errors import ProviderError
from memstrata.extraction.cells import CellKind
from memstrata.extraction.llm_cells import (
    CELLS_SCHEMA,
    MAX_CELLS,
    MAX_VALUE_CHARS,
    cells_from_reply,
    extract_cells_with_llm,
    source_sentence,
)
from memstrata.extraction.llm_reply import PROMPT_CHARS, quote_lines, unit_interval
from memstrata.extraction.profile import MAX_UPDATES, profile_from_reply, update_profile
from memstrata.extraction.summaries import summarize_cluster, summarize_scene, summarize_segment
from memstrata.extraction.supersession import choose_superseded, superseded_from_reply
from memstrata.models import Cell
from tests.fakes import FakeLLM

TEXT = "I moved to Lisbon last spring. My sister Marta still lives in Porto."


def _cell(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "type": "fact",
        "subject": "user",
        "attribute": "location",
        "value": "Lisbon",
        "single_valued": True,
        "salience": 0.8,
        "scene": "moving house",
    }
    return {**fields, **overrides}


# -- cells ----------------------------------------------------------------------------


def test_a_valid_cell_keeps_every_field_and_its_sentence() -> None:
    reply = cells_from_reply({"cells": [_cell(attribute=" Home  City ", salience=1)]}, TEXT, subject="Ana")
    (cell,) = reply.cells
    assert (cell.kind, cell.subject, cell.attribute, cell.value) == (CellKind.FACT, "Ana", "home city", "Lisbon")
    assert (cell.salience, cell.is_single_valued, cell.scene) == (1.0, True, "moving house")
    assert cell.text == "I moved to Lisbon last spring." and reply.dropped == ()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"type": "opinion"}, "unknown type"),
        ({"type": 3}, "unknown type"),
        ({"subject": ""}, "subject"),
        ({"attribute": None}, "attribute"),
        ({"value": "x" * (MAX_VALUE_CHARS + 1)}, "value"),
        ({"value": "   "}, "value"),
        ({"salience": 1.01}, "salience"),
        ({"salience": -0.1}, "salience"),
        ({"salience": float("nan")}, "salience"),
        ({"salience": True}, "salience"),
        ({"salience": "0.5"}, "salience"),
        ({"single_valued": "yes"}, "single_valued"),
        ({"scene": ["trip"]}, "scene"),
        ({"scene": "s" * 200}, "scene"),
    ],
)
def test_a_bad_field_drops_that_cell_and_keeps_the_rest(change: dict[str, Any], reason: str) -> None:
    reply = cells_from_reply({"cells": [_cell(**change), _cell(value="Porto")]}, TEXT, subject="user")
    assert [cell.value for cell in reply.cells] == ["Porto"]
    (dropped,) = reply.dropped
    assert dropped.startswith("cell 0:") and reason in dropped


def test_missing_fields_and_non_objects_are_dropped() -> None:
    partial = {key: value for key, value in _cell().items() if key not in ("salience", "scene")}
    reply = cells_from_reply({"cells": [partial, "Lisbon", None, _cell()]}, TEXT, subject="user")
    assert len(reply.cells) == 1
    assert reply.dropped == ("cell 0: missing salience, scene", "cell 1: not an object", "cell 2: not an object")


def test_speaker_words_become_the_speaker_and_other_subjects_stay() -> None:
    cells = [_cell(subject="I"), _cell(subject="Marta", attribute="location", value="Porto"), _cell(subject="USER")]
    reply = cells_from_reply({"cells": cells}, TEXT, subject="Ana")
    assert [(cell.subject, cell.value) for cell in reply.cells] == [("Ana", "Lisbon"), ("Marta", "Porto")]
    assert reply.dropped == ("cell 2: repeats an earlier cell",)


def test_at_most_max_cells_are_kept() -> None:
    cells = [_cell(attribute=f"likes:thing {n}", value=f"thing {n}") for n in range(MAX_CELLS + 3)]
    reply = cells_from_reply({"cells": cells}, TEXT, subject="user")
    assert len(reply.cells) == MAX_CELLS and len(reply.dropped) == 3


@pytest.mark.parametrize("data", [{}, {"cells": None}, {"cells": {"0": _cell()}}, {"cells": "Lisbon"}])
def test_a_reply_without_a_cell_list_is_unusable(data: dict[str, Any]) -> None:
    with pytest.raises(ProviderError, match="no 'cells' list"):
        cells_from_reply(data, TEXT, subject="user")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=250),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=8),
    max_leaves=8,
)
cell_like = st.fixed_dictionaries({key: json_values | st.just(value) for key, value in _cell().items()})
cell_lists = st.lists(cell_like | json_values, max_size=6)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["cells", "other"]), cell_lists | json_values))
def test_any_reply_gives_valid_cells_or_an_unusable_reply_error(data: dict[str, Any]) -> None:
    try:
        reply = cells_from_reply(data, TEXT, subject="user")
    except ProviderError:
        return
    for cell in reply.cells:
        assert 0.0 <= cell.salience <= 1.0 and isinstance(cell.is_single_valued, bool)
        assert cell.kind in CellKind and 0 < len(cell.value) <= MAX_VALUE_CHARS and cell.attribute and cell.subject


def test_the_extractor_sends_the_message_the_kinds_and_the_known_attributes() -> None:
    llm = FakeLLM([{"cells": [_cell()]}])
    reply = extract_cells_with_llm(llm, TEXT, speaker="Ana", known_attributes=["location", "likes:jazz"])
    assert [cell.value for cell in reply.cells] == ["Lisbon"]
    (call,) = llm.calls
    assert call.purpose == "extract_cells" and call.json_schema == CELLS_SCHEMA
    assert TEXT in call.prompt and "Known attributes: location, likes:jazz" in call.prompt
    assert "fact, preference, task, decision, plan, risk" in call.prompt and "written by Ana" in call.prompt


def test_a_text_reply_to_a_json_request_is_unusable() -> None:
    with pytest.raises(ProviderError, match="not a JSON object"):
        extract_cells_with_llm(FakeLLM(["Lisbon!"]), TEXT)


def test_the_source_sentence_is_the_one_naming_the_value() -> None:
    assert source_sentence(TEXT, "porto") == "My sister Marta still lives in Porto."
    assert source_sentence(TEXT, "a home by the sea") == TEXT
    assert len(source_sentence("word " * 500, "absent")) == 500


# -- profile --------------------------------------------------------------------------


def test_profile_updates_are_short_snake_case_and_only_changes() -> None:
    data = {
        "updates": [
            {"key": "Home City", "value": "Lisbon"},
            {"key": "diet", "value": "vegetarian"},
            {"key": "favorite:food", "value": "ramen"},
            {"key": "1st", "value": "x"},
            {"key": "job", "value": "word " * 30},
            {"key": "job"},
            "diet: vegan",
        ]
    }
    reply = profile_from_reply(data, {"diet": "vegetarian"})
    assert reply.updates == {"home_city": "Lisbon", "favorite:food": "ramen"}
    assert len(reply.dropped) == 4


def test_profile_updates_are_bounded() -> None:
    data = {"updates": [{"key": f"trait_{n}", "value": "yes"} for n in range(MAX_UPDATES + 2)]}
    assert len(profile_from_reply(data, {}).updates) == MAX_UPDATES


def test_profile_prompt_shows_the_current_profile_and_the_message() -> None:
    llm = FakeLLM([{"updates": [{"key": "location", "value": "Lisbon"}]}])
    reply = update_profile(llm, text=TEXT, subject="Ana", profile={"location": "Porto", "diet": "vegan"})
    assert reply.updates == {"location": "Lisbon"}
    prompt = llm.calls[0].prompt
    assert "- diet: vegan\n- location: Porto" in prompt and TEXT in prompt and llm.calls[0].purpose == "profile_update"


def test_a_profile_reply_without_an_update_list_is_unusable() -> None:
    with pytest.raises(ProviderError, match="no 'updates' list"):
        profile_from_reply({"updates": {"location": "Lisbon"}}, {})


# -- supersession ---------------------------------------------------------------------


def _stored(cell_id: str, value: str) -> Cell:
    when = datetime(2026, 1, 2, tzinfo=UTC)
    return Cell(
        id=cell_id,
        user_id="ana",
        kind="fact",
        subject="user",
        attribute="location",
        value=value,
        content=f"I live in {value}.",
        salience=0.8,
        valid_from=when,
        source_turn_id="turn-" + cell_id,
    )


def test_only_candidate_ids_are_superseded() -> None:
    reply = superseded_from_reply({"supersede": ["b", "zzz", 4, "a", "a"]}, ["a", "b", "c"])
    assert reply.superseded == ("a", "b") and reply.ignored == ("zzz", "4")


def test_the_supersession_prompt_lists_exactly_the_candidates() -> None:
    llm = FakeLLM([{"supersede": ["old-1"]}])
    new = _stored("new-1", "Lisbon")
    reply = choose_superseded(llm, new, [_stored("old-1", "Porto"), _stored("old-2", "Faro")])
    assert reply.superseded == ("old-1",)
    (call,) = llm.calls
    assert call.purpose == "supersede" and "id old-1: Porto" in call.prompt and "id old-2: Faro" in call.prompt
    assert "Lisbon" in call.prompt and "new-1" not in call.prompt


def test_a_supersession_reply_without_a_list_is_unusable() -> None:
    with pytest.raises(ProviderError, match="no 'supersede' list"):
        superseded_from_reply({"supersede": "old-1"}, ["old-1"])


# -- summaries ------------------------------------------------------------------------


def test_segment_summaries_keep_valid_keywords_only() -> None:
    llm = FakeLLM([{"summary": "  Ana  moved.\nShe likes Lisbon. ", "keywords": ["Lisbon", "lisbon", "", 5, "move"]}])
    reply = summarize_segment(llm, previous_summary="", new_turns=["I moved to Lisbon."], keyword_count=6)
    assert reply.summary == "Ana moved.\nShe likes Lisbon." and reply.keywords == ("lisbon", "move")
    assert llm.calls[0].purpose == "segment_summary" and "a new segment" in llm.calls[0].prompt


@pytest.mark.parametrize("data", [{"summary": ""}, {"summary": 3}, {"summary": "x" * 1501}, {}])
def test_an_unusable_segment_summary_raises(data: dict[str, Any]) -> None:
    with pytest.raises(ProviderError, match="summary"):
        summarize_segment(FakeLLM([data]), previous_summary="So far.", new_turns=["New."], keyword_count=6)


def test_scene_summaries_need_a_title_and_a_summary() -> None:
    reply = summarize_scene(FakeLLM([{"title": "Moving", "summary": "Ana moved."}]), keywords=[], summary="", turns=[])
    assert (reply.title, reply.summary) == ("Moving", "Ana moved.")
    with pytest.raises(ProviderError, match="title"):
        summarize_scene(FakeLLM([{"title": "t" * 81, "summary": "Ana moved."}]), keywords=[], summary="", turns=[])


def test_consolidation_summaries_use_the_consolidate_purpose() -> None:
    llm = FakeLLM([{"summary": "Ana moved to Lisbon."}])
    assert summarize_cluster(llm, ["I moved to Lisbon.", "Nice!"]) == "Ana moved to Lisbon."
    assert llm.calls[0].purpose == "consolidate" and "- I moved to Lisbon.\n- Nice!" in llm.calls[0].prompt


def test_quoted_turns_keep_the_newest_that_fit() -> None:
    assert quote_lines(["one", "two", "three"], max_chars=13) == "- two\n- three"
    assert quote_lines(["x" * 50], max_chars=10) == "- " + "x" * 8


def test_one_long_message_is_quoted_up_to_the_cap_in_the_cell_and_profile_prompts() -> None:
    message = "I live in Lisbon. " + "filler " * 30_000
    llm = FakeLLM([{"cells": []}, {"updates": []}])
    extract_cells_with_llm(llm, message)
    update_profile(llm, text=message, subject="user", profile={})
    assert all("I live in Lisbon." in call.prompt and len(call.prompt) < PROMPT_CHARS + 5_000 for call in llm.calls)


@pytest.mark.parametrize(("value", "expected"), [(0, 0.0), (1, 1.0), (0.12345, 0.123), (2, None), (None, None)])
def test_unit_interval(value: object, expected: float | None) -> None:
    assert unit_interval(value) == expected
