"""The LLM-backed memory steps end to end: each with a scripted model, with a failing one, and offline."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.errors import ProviderError
from memstrata.extraction.cells import extract_cells, profile_updates
from memstrata.extraction.llm_cells import CELLS_SCHEMA
from memstrata.extraction.profile import PROFILE_SCHEMA
from memstrata.extraction.summaries import CONSOLIDATION_SCHEMA, SCENE_SCHEMA, SEGMENT_SCHEMA
from memstrata.extraction.supersession import SUPERSEDE_SCHEMA
from memstrata.llms.base import LLM
from memstrata.llms.none import NoLLM
from memstrata.policies.consolidation import extractive_summary
from memstrata.tiers.steps import keywords
from tests.fakes import FakeLLM
from tests.races import after_first_read

USER = "ana"


def _cell(attribute: str, value: str, **overrides: Any) -> dict[str, Any]:
    """One cell as a model would return it."""
    fields: dict[str, Any] = {
        "type": "fact",
        "subject": "user",
        "attribute": attribute,
        "value": value,
        "single_valued": True,
        "salience": 0.8,
        "scene": "",
    }
    return {**fields, **overrides}


def _open(home: Path, llm: LLM, **settings: Any) -> Memory:
    return Memory(home, embedder=HashEmbedder(), llm=llm, background=False, **settings)


def _exchange(memory: Memory, user_text: str, reply: str = "Noted.") -> None:
    messages = [{"role": "user", "content": user_text}, {"role": "assistant", "content": reply}]
    memory.add(messages, user_id=USER, session_id="s1")


def _warnings(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING)


@pytest.fixture(autouse=True)
def _capture_warnings(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    with caplog.at_level(logging.WARNING, logger="memstrata"):
        yield


# -- 1. cell extraction ---------------------------------------------------------------


def test_llm_cells_are_checked_one_by_one_and_keep_their_source_turn(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reply = {
        "cells": [
            _cell("Home City", "Lisbon", subject="I", salience=0.9, scene="moving house"),
            _cell("likes:fado", "fado", type="preference", single_valued=False, salience=0.5),
            _cell("mood", "happy", type="opinion"),  # unknown type
            _cell("age", "34", salience=1.5),  # salience outside 0..1
            _cell("biography", "word " * 200),  # absurdly long value
            {key: value for key, value in _cell("task:call", "call mom").items() if key != "attribute"},
            "not a cell",
        ]
    }
    llm = FakeLLM({"extract_cells": [reply]})
    with _open(home, llm) as memory:
        (turn,) = memory.add("I moved to Lisbon and I love fado.", user_id=USER)
        assert llm.calls == []  # the write path never calls the model
        memory.flush()
        cells = memory.cells(user_id=USER)
    assert {(cell.kind, cell.subject, cell.attribute, cell.value) for cell in cells} == {
        ("fact", "user", "home city", "Lisbon"),
        ("preference", "user", "likes:fado", "fado"),
    }
    assert all(cell.source_turn_id == turn.id for cell in cells)
    city = next(cell for cell in cells if cell.attribute == "home city")
    assert city.salience == 0.9 and city.content == "moving house: I moved to Lisbon and I love fado."
    (call,) = llm.calls_for("extract_cells")
    assert call.json_schema == CELLS_SCHEMA and "I moved to Lisbon and I love fado." in call.prompt
    warnings = _warnings(caplog)
    assert "unknown type 'opinion'" in warnings and "salience" in warnings and "missing attribute" in warnings


def test_a_fact_stays_beside_its_turn_unless_it_only_quotes_it(home: Path) -> None:
    llm = FakeLLM(
        {
            "extract_cells": [
                {"cells": [_cell("Home City", "Lisbon", subject="I", scene="moving house")]},
                {"cells": [_cell("diet", "vegetarian")]},  # read from the question before, say
                {"cells": [_cell("pet", "Miso")]},
            ]
        }
    )
    with _open(home, llm) as memory:
        memory.add("I moved to Lisbon and I love fado.", user_id=USER)
        memory.add("Yes, since 2019.", user_id=USER)
        memory.add("My cat Miso sleeps all day.", user_id=USER, session_id="s9")
        memory.flush()
        for history in (False, True):
            text = memory.context(
                "Lisbon vegetarian Miso since 2019",
                user_id=USER,
                session_id="s9",
                token_budget=500,
                include_superseded=history,
                verbatim=True,
            ).text
            lines = text.splitlines()
            # Worded by the model, or with a value its turn does not say: more than the excerpt.
            assert "- user · home city: Lisbon — moving house: I moved to Lisbon and I love fado." in lines
            assert "- user · diet: vegetarian — Yes, since 2019." in lines
            assert "user: I moved to Lisbon and I love fado." in lines and "user: Yes, since 2019." in lines
            # Said word for word by a turn shown as this session's latest: said once.
            assert text.count("My cat Miso sleeps all day.") == 1, text


def test_llm_extractor_is_shown_the_attributes_already_known(home: Path) -> None:
    llm = FakeLLM({"extract_cells": [{"cells": [_cell("residence", "Porto")]}, {"cells": []}]})
    with _open(home, llm) as memory:
        memory.add("I live in Porto.", user_id=USER)
        memory.add("Still there.", user_id=USER)
        memory.flush()
    first, second = llm.calls_for("extract_cells")
    assert "residence" not in first.prompt and "Known attributes: residence" in second.prompt


@pytest.mark.parametrize("reply", [{"cells": "none"}, {"facts": []}, "I found nothing to remember."])
def test_a_reply_without_a_cell_list_falls_back_to_the_rules_for_that_turn(
    home: Path, caplog: pytest.LogCaptureFixture, reply: Mapping[str, Any] | str
) -> None:
    llm = FakeLLM({"extract_cells": [reply]})
    with _open(home, llm) as memory:
        memory.add("I live in Porto.", user_id=USER)
        memory.flush()
        stored = [(cell.attribute, cell.value, cell.content) for cell in memory.cells(user_id=USER)]
    assert stored == [("location", "Porto", "I live in Porto.")]
    assert "extract_cells fell back to its offline version" in _warnings(caplog)


def test_offline_cells_are_the_rule_based_ones(home: Path) -> None:
    text = "My name is Ana. I live in Lisbon and I work at Tern. I need to call my mom."
    with _open(home, NoLLM()) as memory:
        (turn,) = memory.add(text, user_id=USER)
        memory.flush()
        stored = {(c.kind, c.attribute, c.value, c.content, c.salience) for c in memory.cells(user_id=USER)}
        assert {cell.source_turn_id for cell in memory.cells(user_id=USER)} == {turn.id}
    expected = {(c.kind.value, c.attribute, c.value, c.text, c.salience) for c in extract_cells(text)}
    assert stored == expected and len(expected) >= 4


# -- 2. scene summaries ---------------------------------------------------------------


def _promote_a_segment(memory: Memory) -> None:
    _exchange(memory, "The sailing regatta in Cascais starts at nine.")
    _exchange(memory, "Unrelated: buy printer toner.")
    _exchange(memory, "Another unrelated thing about taxes.")
    memory.flush()
    for _ in range(3):
        memory.search("sailing regatta Cascais", user_id=USER)
        memory.flush()


def _scenes(memory: Memory, query: str) -> list[str]:
    return [hit.content for hit in memory.search(query, user_id=USER, tiers=("scene",)) if hit.tier == "scene"]


def test_llm_titles_and_summarises_a_promoted_scene(home: Path) -> None:
    llm = FakeLLM({"scene_summary": [{"title": "Cascais regatta", "summary": "The regatta starts at nine."}]})
    with _open(home, llm, working_capacity=1, promote_heat=3.0) as memory:
        _promote_a_segment(memory)
        scenes = _scenes(memory, "regatta")
    assert scenes == ["Cascais regatta: The regatta starts at nine."]
    # The toner segment got the same visits and was promoted next, with the keyword title (no reply left).
    regatta, toner = llm.calls_for("scene_summary")
    assert regatta.json_schema == SCENE_SCHEMA and "The sailing regatta in Cascais starts at nine." in regatta.prompt
    assert "Cascais" not in toner.prompt


def test_an_unusable_scene_reply_keeps_the_keyword_title(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    llm = FakeLLM({"scene_summary": [{"title": "", "summary": "The regatta starts at nine."}]})
    with _open(home, llm, working_capacity=1, promote_heat=3.0) as memory:
        _promote_a_segment(memory)
        segment = next(segment for segment in memory.inspect(user_id=USER).segments if "regatta" in segment.keywords)
        scenes = _scenes(memory, "regatta")
    assert segment.promoted_at and scenes == [f"{', '.join(segment.keywords[:3])}: {segment.summary}"]
    assert "scene_summary fell back" in _warnings(caplog) and "title" in _warnings(caplog)


def test_offline_scenes_are_titled_by_keywords(home: Path) -> None:
    with _open(home, NoLLM(), working_capacity=1, promote_heat=3.0) as memory:
        _promote_a_segment(memory)
        segment = next(segment for segment in memory.inspect(user_id=USER).segments if "regatta" in segment.keywords)
        scenes = _scenes(memory, "regatta")
    assert segment.promoted_at and scenes == [f"{', '.join(segment.keywords[:3])}: {segment.summary}"]


# -- 3. segment summaries -------------------------------------------------------------


def test_offline_keywords_say_what_not_who_or_how_nice() -> None:
    texts = [
        "Caroline: Wow, Mel, the pottery class sounds great!",
        "Mel: Thanks, Caroline! Pottery is really great, I love the kiln.",
        "Caroline: Great pottery, Mel. Was the kiln hot?",
    ]
    assert keywords(texts, 2, speakers={"Caroline", "Mel"}) == ("pottery", "kiln")
    assert {"caroline", "mel"} <= set(keywords(texts, 6))  # without speakers, their names lead


def test_llm_writes_segment_summaries_and_keywords(home: Path) -> None:
    reply = {"summary": "Ana asked when the Cascais regatta starts.", "keywords": ["Sailing", "regatta", "x" * 99, 7]}
    llm = FakeLLM({"segment_summary": [reply]})
    with _open(home, llm, working_capacity=1) as memory:
        _exchange(memory, "The sailing regatta in Cascais starts at nine.")
        _exchange(memory, "Something else entirely.")
        memory.flush()
        (segment,) = memory.inspect(user_id=USER).segments
    assert segment.summary == "Ana asked when the Cascais regatta starts."
    assert segment.keywords == ("sailing", "regatta")
    (call,) = llm.calls_for("segment_summary")
    assert call.json_schema == SEGMENT_SCHEMA and "a new segment" in call.prompt
    assert "- The sailing regatta in Cascais starts at nine.\n- Noted." in call.prompt


def test_segment_summaries_fold_new_turns_into_the_summary_so_far(home: Path) -> None:
    first = {"summary": "Regatta in Cascais at nine.", "keywords": ["regatta"]}
    llm = FakeLLM({"segment_summary": [first, {"summary": "Regatta at nine; bring sunscreen.", "keywords": []}]})
    with _open(home, llm, working_capacity=1, segment_similarity=-1.0) as memory:
        _exchange(memory, "The sailing regatta in Cascais starts at nine.")
        _exchange(memory, "For the regatta I should bring sunscreen.")
        _exchange(memory, "Anything else?")
        memory.flush()
        (segment,) = memory.inspect(user_id=USER).segments
    second_call = llm.calls_for("segment_summary")[1]
    assert "Regatta in Cascais at nine." in second_call.prompt and "sunscreen" in second_call.prompt
    assert "starts at nine" not in second_call.prompt  # old turns are not sent again
    assert segment.summary == "Regatta at nine; bring sunscreen."
    assert segment.keywords and "regatta" in segment.keywords  # no keywords in the reply: the offline ones


def test_a_segment_summary_extends_the_summary_of_every_turn_filed_so_far(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replies = [
        {"summary": "FIRST: the regatta in Cascais.", "keywords": ["regatta"]},
        {"summary": "FIRST and THIRD: we won.", "keywords": ["regatta"]},
        {"summary": "FIRST, THIRD and SECOND: windy.", "keywords": ["regatta"]},
    ]
    llm = FakeLLM({"segment_summary": replies})
    with _open(home, llm, working_capacity=100, segment_similarity=-1.0) as memory:
        store, hierarchy = memory.parts.store, memory.parts.hierarchy
        _exchange(memory, "We sailed to Cascais for the regatta.")
        first = store.working_seqs(USER)
        hierarchy.to_midterm(USER, first)
        _exchange(memory, "The regatta in Cascais was windy.")
        _exchange(memory, "We won the second race.")
        rest = [seq for seq in store.working_seqs(USER) if seq not in first]
        # Another worker files the third exchange into the segment right after this read.
        raced = after_first_read(monkeypatch, store, "active_segments", lambda: hierarchy.to_midterm(USER, rest[2:]))
        hierarchy.to_midterm(USER, rest[:2])
        [segment] = store.segments(USER, limit=10)
        assert sorted(store.segment_turn_seqs(segment.id)) == sorted([*first, *rest])
    last = llm.calls_for("segment_summary")[-1].prompt
    assert raced and "FIRST and THIRD: we won." in last, "the summary folded in is the one covering the third"
    assert segment.summary == "FIRST, THIRD and SECOND: windy." and segment.turn_count == 6


@pytest.mark.parametrize("reply", [{"summary": "", "keywords": ["x"]}, {"summary": "y" * 5000, "keywords": []}, "ok"])
def test_an_unusable_segment_summary_falls_back_to_the_extractive_one(
    home: Path, caplog: pytest.LogCaptureFixture, reply: Mapping[str, Any] | str
) -> None:
    with _open(home, FakeLLM({"segment_summary": [reply]}), working_capacity=1) as memory:
        _exchange(memory, "The sailing regatta in Cascais starts at nine.")
        _exchange(memory, "Something else entirely.")
        memory.flush()
        (segment,) = memory.inspect(user_id=USER).segments
    texts = ["The sailing regatta in Cascais starts at nine.", "Noted."]
    assert segment.summary == extractive_summary(texts, HashEmbedder().embed_documents(texts))
    assert segment.keywords == keywords(texts)
    assert "segment_summary fell back" in _warnings(caplog)


def test_offline_segment_summaries_are_extractive(home: Path) -> None:
    with _open(home, NoLLM(), working_capacity=1) as memory:
        _exchange(memory, "The sailing regatta in Cascais starts at nine.")
        _exchange(memory, "Something else entirely.")
        memory.flush()
        (segment,) = memory.inspect(user_id=USER).segments
    texts = ["The sailing regatta in Cascais starts at nine.", "Noted."]
    assert segment.summary == extractive_summary(texts, HashEmbedder().embed_documents(texts))
    assert segment.keywords == keywords(texts)


# -- 4. consolidation summaries -------------------------------------------------------


def _two_topics(memory: Memory) -> None:
    for n in range(4):
        _exchange(memory, f"The garden shed roof leaks near the window, repair attempt {n} failed.")
    for n in range(4):
        _exchange(memory, f"Quarterly invoice numbers for Acme Corp were wrong in batch {n}.")


def test_llm_writes_consolidation_summaries(home: Path) -> None:
    scripted = [{"summary": f"Summary {n}: Acme Corp and the garden shed."} for n in range(10)]
    llm = FakeLLM({"consolidate": scripted})
    with _open(home, llm, working_capacity=2) as memory:
        _two_topics(memory)
        made = memory.consolidate(user_id=USER)
        turns = {turn.id: turn.content for turn in memory.history(user_id=USER)}
    assert made and [item.summary for item in made] == [reply["summary"] for reply in scripted[: len(made)]]
    calls = llm.calls_for("consolidate")
    assert len(calls) == len(made) and all(call.json_schema == CONSOLIDATION_SCHEMA for call in calls)
    for item, call in zip(made, calls, strict=True):
        assert all(turns[turn_id] in call.prompt for turn_id in item.source_turn_ids)
        assert 0.0 <= item.tes <= 1.0


def test_the_model_reads_what_relative_dates_meant(home: Path) -> None:
    llm = FakeLLM({"consolidate": [{"summary": f"Summary {n}."} for n in range(10)]})
    with _open(home, llm, working_capacity=2) as memory:
        for n in range(4):
            memory.add(
                f"The garden shed roof leaked yesterday, repair attempt {n} failed.",
                user_id=USER,
                session_id="s1",
                timestamp=datetime(2023, 5, 8, 13, 0, tzinfo=UTC),
            )
        assert memory.consolidate(user_id=USER)
    prompts = [call.prompt for call in llm.calls_for("consolidate")]
    assert prompts and all("[yesterday = 7 May 2023]" in prompt for prompt in prompts)


def test_an_unusable_consolidation_reply_falls_back_to_an_extractive_summary(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    llm = FakeLLM({"consolidate": ["Here is a summary, not JSON."] * 10})
    with _open(home, llm, working_capacity=2) as memory:
        _two_topics(memory)
        made = memory.consolidate(user_id=USER)
        turns = {turn.id: turn.content for turn in memory.history(user_id=USER)}
    assert made
    for item in made:
        sources = [turns[turn_id] for turn_id in item.source_turn_ids]
        assert item.summary == extractive_summary(sources, HashEmbedder().embed_documents(sources))
    assert "consolidate fell back" in _warnings(caplog)


def test_offline_consolidation_is_extractive(home: Path) -> None:
    with _open(home, NoLLM(), working_capacity=2) as memory:
        _two_topics(memory)
        made = memory.consolidate(user_id=USER)
        turns = {turn.id: turn.content for turn in memory.history(user_id=USER)}
    assert made
    for item in made:
        sources = [turns[turn_id] for turn_id in item.source_turn_ids]
        assert item.summary == extractive_summary(sources, HashEmbedder().embed_documents(sources))


# -- 5. profile updates ---------------------------------------------------------------


def test_llm_updates_only_the_profile_keys_its_reply_supports(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    second = {
        "updates": [
            {"key": "Home City", "value": "Lisbon"},
            {"key": "diet", "value": "vegetarian"},  # unchanged: not written again
            {"key": "bio", "value": "word " * 40},  # too long
            {"key": "Bad key!", "value": "x"},
            {"value": "no key"},
        ]
    }
    llm = FakeLLM(
        {
            "extract_cells": [{"cells": []}, {"cells": []}],
            "profile_update": [{"updates": [{"key": "diet", "value": "vegetarian"}]}, second],
        }
    )
    with _open(home, llm) as memory:
        memory.add("I'm vegetarian.", user_id=USER)
        memory.add("I moved to Lisbon.", user_id=USER)
        memory.flush()
        profile = memory.profile(user_id=USER)
    assert profile == {"diet": "vegetarian", "home_city": "Lisbon"}
    first_call, second_call = llm.calls_for("profile_update")
    assert first_call.json_schema == PROFILE_SCHEMA and "(empty)" in first_call.prompt
    assert "- diet: vegetarian" in second_call.prompt and "I moved to Lisbon." in second_call.prompt
    assert "key is not a snake_case name" in _warnings(caplog)


def test_an_unusable_profile_reply_falls_back_to_the_rules(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    llm = FakeLLM({"profile_update": [{"updates": {"location": "Mars"}}]})
    with _open(home, llm) as memory:
        memory.add("I live in Porto.", user_id=USER)
        memory.flush()
        assert memory.profile(user_id=USER) == {"location": "Porto"}
    assert "profile_update fell back" in _warnings(caplog)


def test_offline_profile_updates_come_from_the_rules(home: Path) -> None:
    text = "My name is Ana. I live in Lisbon and I work at Tern. My favourite food is ramen."
    with _open(home, NoLLM()) as memory:
        memory.add(text, user_id=USER)
        memory.flush()
        profile = memory.profile(user_id=USER)
    assert profile == profile_updates(extract_cells(text)) and len(profile) >= 3


# -- 6. supersession ------------------------------------------------------------------


def test_llm_decides_supersession_among_same_attribute_candidates_only(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    likes = _cell("likes:hiking", "hiking", single_valued=False)
    llm = FakeLLM({"extract_cells": [{"cells": [_cell("location", "Porto")]}, {"cells": [likes]}]})
    with _open(home, llm) as memory:
        memory.add("I live in Porto.", user_id=USER)
        memory.add("I like hiking.", user_id=USER)
        memory.flush()
        by_attribute = {cell.attribute: cell for cell in memory.cells(user_id=USER)}
        porto, hiking = by_attribute["location"], by_attribute["likes:hiking"]
        # Multi-valued by the model's account, so the offline rule would keep Porto current.
        llm.script({"cells": [_cell("location", "Lisbon", single_valued=False)]}, purpose="extract_cells")
        llm.script({"supersede": [porto.id, hiking.id, "01NOTACANDIDATE", 7]}, purpose="supersede")
        memory.add("I moved to Lisbon.", user_id=USER)
        memory.flush()
        history = memory.cells(user_id=USER, attribute="location", include_superseded=True)
        current = {cell.value for cell in memory.cells(user_id=USER)}
    assert [(cell.value, cell.is_current) for cell in history] == [("Lisbon", True), ("Porto", False)]
    assert history[1].superseded_by == history[0].id
    assert current == {"Lisbon", "hiking"}
    (call,) = llm.calls_for("supersede")  # the first turn had no candidates: no call
    assert call.json_schema == SUPERSEDE_SCHEMA
    assert porto.id in call.prompt and "Porto" in call.prompt and "Lisbon" in call.prompt
    assert hiking.id not in call.prompt and "hiking" not in call.prompt
    assert "01NOTACANDIDATE" in _warnings(caplog)


def test_llm_can_keep_a_single_valued_cell_current(home: Path) -> None:
    llm = FakeLLM(
        {
            "extract_cells": [{"cells": [_cell("employer", "Tern")]}, {"cells": [_cell("employer", "Acme")]}],
            "supersede": [{"supersede": []}],  # a second job, not a change of job
        }
    )
    with _open(home, llm) as memory:
        memory.add("I work at Tern.", user_id=USER)
        memory.add("I also work at Acme on weekends.", user_id=USER)
        memory.flush()
        assert {cell.value for cell in memory.cells(user_id=USER, attribute="employer")} == {"Tern", "Acme"}


def test_an_unusable_supersession_reply_falls_back_to_the_single_valued_rule(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    llm = FakeLLM(
        {
            "extract_cells": [{"cells": [_cell("location", "Porto")]}, {"cells": [_cell("location", "Lisbon")]}],
            "supersede": [{"supersede": "all of them"}],
        }
    )
    with _open(home, llm) as memory:
        memory.add("I live in Porto.", user_id=USER)
        memory.add("I moved to Lisbon.", user_id=USER)
        memory.flush()
        assert [cell.value for cell in memory.cells(user_id=USER, attribute="location")] == ["Lisbon"]
    assert "supersede fell back" in _warnings(caplog)


def test_a_late_fact_is_history_at_once_without_asking_the_model(home: Path) -> None:
    llm = FakeLLM(
        # In the order the jobs run: the newer turn's first.
        {"extract_cells": [{"cells": [_cell("location", "Lisbon")]}, {"cells": [_cell("location", "Porto")]}]}
    )
    with _open(home, llm) as memory:
        day = datetime(2024, 1, 1, tzinfo=UTC)
        memory.add("I live in Porto.", user_id=USER, timestamp=day)
        memory.add("I live in Lisbon.", user_id=USER, timestamp=day + timedelta(days=30))
        earlier = memory.parts.store.claim_job(60)
        later = memory.parts.store.claim_job(60)
        memory.parts.hierarchy.run(later)  # two workers: the newer turn's job finishes first
        memory.parts.hierarchy.run(earlier)
        history = memory.cells(user_id=USER, attribute="location", include_superseded=True)
    assert [(cell.value, cell.is_current) for cell in history] == [("Lisbon", True), ("Porto", False)]
    assert history[1].superseded_by == history[0].id and history[1].valid_to == day + timedelta(days=30)
    assert llm.calls_for("supersede") == []  # a newer value is current: nothing for the model to decide


def test_offline_supersession_follows_the_single_valued_rule(home: Path) -> None:
    with _open(home, NoLLM()) as memory:
        for text in ("I live in Porto.", "I like hiking.", "I moved to Lisbon.", "I like jazz."):
            memory.add(text, user_id=USER)
        memory.flush()
        history = memory.cells(user_id=USER, attribute="location", include_superseded=True)
        current = {cell.value for cell in memory.cells(user_id=USER)}
    assert [(cell.value, cell.is_current) for cell in history] == [("Lisbon", True), ("Porto", False)]
    assert {"hiking", "jazz", "Lisbon"} <= current and "Porto" not in current


# -- failures -------------------------------------------------------------------------


def test_a_provider_error_mid_job_falls_back_and_the_job_completes(
    home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    llm = FakeLLM(
        {
            "extract_cells": [ProviderError("connection reset"), {"cells": [_cell("location", "Faro")]}],
            "profile_update": [{"updates": [{"key": "location", "value": "Porto"}]}, ProviderError("HTTP 503")],
            "segment_summary": [ProviderError("timed out")],
        }
    )
    with _open(home, llm, working_capacity=1) as memory:
        _exchange(memory, "I live in Porto.")
        _exchange(memory, "I moved to Faro.")
        memory.flush()
        report = memory.inspect(user_id=USER)
        history = memory.cells(user_id=USER, attribute="location", include_superseded=True)
    assert report.pending_jobs == 0
    assert [cell.value for cell in history] == ["Faro", "Porto"]  # rules for the first turn, the model's for the second
    assert report.profile == {"location": "Faro"}  # the model's, then the rules' from the model's cells
    (segment,) = report.segments
    assert segment.summary  # extractive, after the timeout
    warnings = _warnings(caplog)
    assert "connection reset" in warnings and "HTTP 503" in warnings and "timed out" in warnings
    assert not [record for record in caplog.records if record.name == "memstrata.worker"]  # no job failed


def test_fake_llm_is_an_llm_and_records_every_call() -> None:
    llm = FakeLLM(["plain", {"answer": 42}, ProviderError("down")])
    assert isinstance(llm, LLM) and llm.is_available
    assert llm.complete("hello", system="be brief") == "plain"
    completion = llm.generate([], json_schema={"type": "object"}, memory="block", purpose="extract_cells")
    assert completion.data == {"answer": 42} and completion.text == '{"answer": 42}'
    with pytest.raises(ProviderError, match="down"):
        llm.generate([])
    with pytest.raises(ProviderError, match="no scripted reply"):
        llm.generate([])
    assert [call.purpose for call in llm.calls] == ["complete", "extract_cells", "chat", "chat"]
    assert llm.calls[0].prompt == "hello" and llm.calls[0].system == "be brief"
    assert llm.calls[1].memory == "block" and llm.calls[1].json_schema == {"type": "object"}
    with pytest.raises(ValueError, match="purpose"):
        llm.script("more", purpose="chat")
