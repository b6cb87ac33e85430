"""The public Memory API end to end on real SQLite files with the deterministic hash embedder."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memstrata import (
    IdConflict,
    InvalidInput,
    Memory,
    MemstrataError,
    NotFound,
    Role,
    SearchFilters,
    StorageError,
    Turn,
)
from memstrata.config import DATABASE_FILE_NAME
from memstrata.embeddings.base import normalize_rows
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.retrieval.periods import Period, Span
from memstrata.retrieval.query import asked_periods, joined
from memstrata.storage import open_store
from memstrata.validation import check_text
from tests.inputs import nested

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def _count(memory: Memory) -> int:
    return int(memory.info()["counts"]["turns"])


def _ids(hits: list[Any]) -> list[str]:
    return [hit.id for hit in hits]


def _seed_two_users(memory: Memory) -> tuple[Turn, Turn]:
    [ana] = memory.add("I adopted a grey cat called Pixel", user_id="ana")
    [bob] = memory.add("My bicycle has a flat tyre", user_id="bob")
    return ana, bob


# -- add ------------------------------------------------------------------------------


def test_add_string_returns_one_user_turn(memory: Memory) -> None:
    [turn] = memory.add("I live in Lisbon", user_id="ana")
    assert turn.role is Role.USER
    assert turn.content == "I live in Lisbon"
    assert turn.user_id == "ana"
    assert turn.session_id is None and turn.agent_id is None and turn.name is None
    assert turn.metadata == {}
    assert turn.importance is None
    assert len(turn.id) == 26
    assert turn.created_at.tzinfo is not None
    assert abs(datetime.now(UTC) - turn.created_at) < timedelta(hours=1)
    assert memory.get(turn.id, user_id="ana") == turn
    assert _count(memory) == 1


def test_add_list_of_dicts_keeps_roles_names_scope_and_metadata(memory: Memory) -> None:
    turns = memory.add(
        [
            {"role": "user", "content": "What's the weather?", "name": "ana", "metadata": {"lang": "en", "k": 1}},
            {"role": "assistant", "content": "Sunny and warm.", "metadata": {"k": 2}},
            {"role": "tool", "content": "weather(lisbon) -> 24C", "name": "weather"},
        ],
        user_id="ana",
        session_id="s1",
        agent_id="helper",
        metadata={"source": "chat", "k": 0},
        timestamp="2024-03-01T14:00:00+02:00",
        importance=0.75,
    )
    assert [t.role for t in turns] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert [t.name for t in turns] == ["ana", None, "weather"]
    assert [t.content for t in turns] == ["What's the weather?", "Sunny and warm.", "weather(lisbon) -> 24C"]
    assert turns[0].metadata == {"source": "chat", "lang": "en", "k": 1}
    assert turns[1].metadata == {"source": "chat", "k": 2}
    assert turns[2].metadata == {"source": "chat", "k": 0}
    for turn in turns:
        assert turn.session_id == "s1" and turn.agent_id == "helper" and turn.user_id == "ana"
        assert turn.created_at == T0
        assert turn.created_at.utcoffset() == timedelta(0)
        assert turn.importance == 0.75
    assert len({t.id for t in turns}) == 3
    assert memory.history(user_id="ana") == turns


def test_add_honours_an_aware_datetime_to_the_microsecond(memory: Memory) -> None:
    moment = datetime(2023, 7, 9, 23, 59, 58, 123456, tzinfo=timezone(timedelta(hours=-7)))
    [turn] = memory.add("late night note", user_id="ana", timestamp=moment)
    assert turn.created_at == moment
    stored = memory.get(turn.id, user_id="ana")
    assert stored.created_at == moment
    assert stored.created_at.microsecond == 123456


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(moment=datetime(999, 12, 31, 23, 59), offset_minutes=0)
@given(
    moment=st.datetimes(min_value=datetime(1, 1, 3), max_value=datetime(9999, 12, 29)),
    offset_minutes=st.integers(min_value=-(23 * 60), max_value=23 * 60),
)
def test_any_accepted_timestamp_reads_back_unchanged(memory: Memory, moment: datetime, offset_minutes: int) -> None:
    aware = moment.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))
    [turn] = memory.add("a note with a date", user_id="dates", timestamp=aware)
    assert memory.get(turn.id, user_id="dates").created_at == aware


def test_turn_dated_before_year_1000_does_not_break_reading(memory: Memory) -> None:
    [old] = memory.add("an ancient chronicle", user_id="ana", timestamp=datetime(999, 6, 1, tzinfo=UTC))
    memory.add("a modern note", user_id="ana", timestamp=T0)
    assert memory.get(old.id, user_id="ana").created_at == datetime(999, 6, 1, tzinfo=UTC)
    history = memory.history(user_id="ana")
    assert [t.content for t in history] == ["an ancient chronicle", "a modern note"]
    assert memory.search("chronicle", user_id="ana")[0].id == old.id


def test_the_latest_accepted_time_reads_in_every_time_zone(memory: Memory) -> None:
    [turn] = memory.add("a note from the far future", user_id="ana", timestamp="9999-12-30T23:00:00Z")
    memory.add("a note from long ago", user_id="ana", timestamp="0001-01-02T00:00:00Z")
    for zone in ("Pacific/Kiritimati", "Etc/GMT+12", "Asia/Tokyo"):
        assert memory.search("far future", user_id="ana", timezone=zone)[0].id == turn.id
        assert "far future" in memory.context("far future", user_id="ana", timezone=zone).text


BAD_ADDS: list[tuple[str, Callable[[Memory], object]]] = [
    ("empty text", lambda m: m.add("", user_id="ana")),
    ("whitespace text", lambda m: m.add("  \n\t ", user_id="ana")),
    ("NUL", lambda m: m.add("a\x00b", user_id="ana")),
    ("surrogate", lambda m: m.add("bad \ud800 text", user_id="ana")),
    ("too long", lambda m: m.add("x" * 2_000_001, user_id="ana")),
    ("bad role", lambda m: m.add([{"role": "robot", "content": "beep"}], user_id="ana")),
    ("no user", lambda m: m.add("hello", user_id=None)),  # type: ignore[arg-type]
    ("empty user", lambda m: m.add("hello", user_id="")),
    ("blank user", lambda m: m.add("hello", user_id="   ")),
    ("int user", lambda m: m.add("hello", user_id=42)),  # type: ignore[arg-type]
    ("empty session", lambda m: m.add("hello", user_id="ana", session_id="")),
    ("naive timestamp", lambda m: m.add("hello", user_id="ana", timestamp=datetime(2024, 1, 1))),
    ("naive iso", lambda m: m.add("hello", user_id="ana", timestamp="2024-01-01T00:00:00")),
    ("garbage timestamp", lambda m: m.add("hello", user_id="ana", timestamp="last tuesday")),
    ("metadata object", lambda m: m.add("hello", user_id="ana", metadata={"o": object()})),
    ("metadata nan", lambda m: m.add("hello", user_id="ana", metadata={"x": float("nan")})),
    ("unknown key", lambda m: m.add([{"role": "user", "content": "hi", "extra": 1}], user_id="ana")),
    ("duplicate ids", lambda m: m.add([{"content": "a", "id": "d"}, {"content": "b", "id": "d"}], user_id="ana")),
    ("id= with several", lambda m: m.add([{"content": "a"}, {"content": "b"}], user_id="ana", id="x")),
    ("importance", lambda m: m.add("hello", user_id="ana", importance=2)),
    ("huge importance", lambda m: m.add("hello", user_id="ana", importance=10**400)),
    ("deep metadata", lambda m: m.add("hello", user_id="ana", metadata=nested(300))),
    ("last day of the calendar", lambda m: m.add("hello", user_id="ana", timestamp="9999-12-31T23:00:00Z")),
    ("first day of the calendar", lambda m: m.add("hello", user_id="ana", timestamp="0001-01-01T12:00:00Z")),
    ("empty list", lambda m: m.add([], user_id="ana")),
    ("more messages than max_messages_per_add", lambda m: m.add([{"content": "x"}] * 1_001, user_id="ana")),
    ("metadata over max_metadata_bytes", lambda m: m.add("hello", user_id="ana", metadata={"x": "y" * 70_000})),
    (
        "a message's metadata over max_metadata_bytes",
        lambda m: m.add([{"content": "a"}, {"content": "b", "metadata": {"x": "y" * 70_000}}], user_id="ana"),
    ),
    (
        "the call's and a message's metadata together over max_metadata_bytes",
        lambda m: m.add(
            [{"content": "a", "metadata": {"mine": "y" * 40_000}}], user_id="ana", metadata={"shared": "z" * 40_000}
        ),
    ),
    # The last message is bad: the good first one must not be stored either.
    ("bad second message", lambda m: m.add([{"content": "fine"}, {"content": ""}], user_id="ana")),
]


@pytest.mark.parametrize("call", [c for _, c in BAD_ADDS], ids=[n for n, _ in BAD_ADDS])
def test_bad_add_raises_invalid_input_and_changes_nothing(memory: Memory, call: Callable[[Memory], object]) -> None:
    memory.add("an existing memory", user_id="ana")
    before = memory.info()["counts"]
    with pytest.raises(InvalidInput) as info:
        call(memory)
    assert isinstance(info.value, ValueError)
    assert memory.info()["counts"] == before
    assert [t.content for t in memory.history(user_id="ana")] == ["an existing memory"]


def test_the_limit_on_messages_per_add_is_named_and_can_be_raised(home: Path) -> None:
    messages = [{"content": f"note {n}"} for n in range(11)]
    with Memory(home, embedder=HashEmbedder(), background=False, max_messages_per_add=10) as memory:
        with pytest.raises(InvalidInput, match=r"11 messages in one call, over the limit of 10 .*max_messages_per_add"):
            memory.add(messages, user_id="ana")
        assert _count(memory) == 0
        assert len(memory.add(messages[:10], user_id="ana")) == 10
    with Memory(home, embedder=HashEmbedder(), background=False, max_messages_per_add=11) as memory:
        assert len(memory.add(messages, user_id="ana")) == 11 and _count(memory) == 21


def test_the_limit_on_metadata_counts_its_json_bytes_as_stored(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False, max_metadata_bytes=100) as memory:
        over = {"k": "é" * 46}  # {"k": "…"} is 9 bytes of JSON around 46 two-byte letters
        assert len(json.dumps(over, ensure_ascii=False).encode()) == 101
        with pytest.raises(InvalidInput, match=r"101 bytes of JSON, over the limit of 100 .*max_metadata_bytes"):
            memory.add("hello", user_id="ana", metadata=over)
        with pytest.raises(InvalidInput, match=r"messages\[1\]\.metadata"):
            memory.add([{"content": "a"}, {"content": "b", "metadata": over}], user_id="ana")
        with pytest.raises(InvalidInput, match=r"messages\[0\]\.metadata with the call's metadata"):
            memory.add([{"content": "a", "metadata": {"a": "x" * 50}}], user_id="ana", metadata={"b": "y" * 50})
        assert _count(memory) == 0
        [turn] = memory.add("hello", user_id="ana", metadata={"k": "é" * 45})
        assert turn.metadata == {"k": "é" * 45}


BAD_READS: list[tuple[str, Callable[[Memory], object]]] = [
    ("roles not a list", lambda m: m.search("a", user_id="ana", roles=5)),  # type: ignore[arg-type]
    ("a tier that is a list", lambda m: m.search("a", user_id="ana", tiers=[["longterm"]])),  # type: ignore[list-item]
    ("tiers as one string", lambda m: m.search("a", user_id="ana", tiers="longterm")),
    ("surrogate subject", lambda m: m.cells(user_id="ana", subject="\ud800")),
    ("blank attribute", lambda m: m.cells(user_id="ana", attribute="  ")),
    ("text timeout", lambda m: m.flush(timeout="x")),  # type: ignore[arg-type]
    ("negative timeout", lambda m: m.flush(timeout=-1)),
]


@pytest.mark.parametrize("call", [c for _, c in BAD_READS], ids=[n for n, _ in BAD_READS])
def test_bad_read_arguments_raise_invalid_input(memory: Memory, call: Callable[[Memory], object]) -> None:
    memory.add("an existing memory", user_id="ana")
    with pytest.raises(InvalidInput):
        call(memory)


def test_no_tiers_is_the_same_as_none(memory: Memory) -> None:
    memory.add("an existing memory", user_id="ana")
    assert memory.search("memory", user_id="ana", tiers=None) == memory.search("memory", user_id="ana")  # type: ignore[arg-type]


def test_max_text_bytes_override_applies(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), max_text_bytes=10) as memory:
        memory.add("0123456789", user_id="ana")
        with pytest.raises(InvalidInput, match="over the limit"):
            memory.add("0123456789a", user_id="ana")
        assert _count(memory) == 1


# -- idempotency -----------------------------------------------------------------------


def test_retry_with_id_kwarg_returns_same_turn_without_duplicating(memory: Memory) -> None:
    [first] = memory.add("Book the dentist for Tuesday", user_id="ana", id="msg-1", session_id="s")
    [again] = memory.add("Book the dentist for Tuesday", user_id="ana", id="msg-1", session_id="s")
    assert again == first
    assert _count(memory) == 1
    assert len(memory.search("dentist", user_id="ana")) == 1


def test_retry_with_per_message_ids_is_idempotent(memory: Memory) -> None:
    messages = [
        {"role": "user", "content": "Remember my locker code", "id": "m1"},
        {"role": "assistant", "content": "Sure, what is it?", "id": "m2"},
    ]
    first = memory.add(messages, user_id="ana")
    again = memory.add(messages, user_id="ana")
    assert again == first
    assert [t.id for t in first] == ["m1", "m2"]
    assert _count(memory) == 2


def test_partial_retry_stores_only_the_new_message(memory: Memory) -> None:
    memory.add([{"content": "first", "id": "m1"}], user_id="ana")
    turns = memory.add([{"content": "first", "id": "m1"}, {"content": "second", "id": "m2"}], user_id="ana")
    assert [t.id for t in turns] == ["m1", "m2"]
    assert _count(memory) == 2


@pytest.mark.parametrize(
    "conflicting",
    [
        {"messages": "different text", "user_id": "ana"},
        {"messages": [{"role": "assistant", "content": "same text", "id": "k"}], "user_id": "ana"},
        {"messages": [{"content": "same text", "id": "k", "name": "zed"}], "user_id": "ana"},
        {"messages": "same text", "user_id": "ana", "session_id": "other"},
        {"messages": "same text", "user_id": "bob"},
    ],
    ids=["content", "role", "name", "session", "user"],
)
def test_same_id_with_a_different_message_conflicts_and_changes_nothing(
    memory: Memory, conflicting: dict[str, Any]
) -> None:
    [original] = memory.add("same text", user_id="ana", id="k")
    before = memory.info()["counts"]
    kwargs = dict(conflicting)
    messages = kwargs.pop("messages")
    if isinstance(messages, str):
        kwargs["id"] = "k"
    with pytest.raises(IdConflict):
        memory.add(messages, **kwargs)
    assert memory.info()["counts"] == before
    assert memory.get("k", user_id="ana") == original
    with pytest.raises(NotFound):
        memory.get("k", user_id="bob")


def test_conflict_in_a_batch_stores_none_of_it(memory: Memory) -> None:
    memory.add("taken", user_id="ana", id="taken")
    with pytest.raises(IdConflict):
        memory.add([{"content": "brand new", "id": "new"}, {"content": "not the same", "id": "taken"}], user_id="ana")
    assert _count(memory) == 1
    with pytest.raises(NotFound):
        memory.get("new", user_id="ana")


# -- search ---------------------------------------------------------------------------


def test_search_finds_the_right_turn(memory: Memory) -> None:
    memory.add(
        [
            {"content": "I moved to Lisbon last spring"},
            {"content": "My favourite food is spicy ramen"},
            {"content": "The quarterly report is due on Friday"},
        ],
        user_id="ana",
    )
    for mode in ("hybrid", "fulltext", "vector"):
        hits = memory.search("spicy ramen", user_id="ana", mode=mode)
        assert hits, mode
        assert hits[0].content == "My favourite food is spicy ramen", mode
        assert hits[0].tier == "episodic"
        assert hits[0].turn is not None and hits[0].turn.id == hits[0].id
        assert hits[0].source_turn_ids == (hits[0].id,)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert set(memory.search("spicy ramen", user_id="ana", mode="fulltext")[0].ranks) == {"fulltext"}
    assert set(memory.search("spicy ramen", user_id="ana", mode="vector")[0].ranks) == {"vector"}
    assert set(memory.search("spicy ramen", user_id="ana")[0].ranks) == {"fulltext", "vector"}


def test_the_reranker_scores_turns_with_the_configured_fusion_constant(home: Path) -> None:
    # Derived items keep their fused score, so turns must use the same k to stay comparable.
    with Memory(home, embedder=HashEmbedder(), background=False, rrf_k=5) as memory:
        memory.add(
            [{"content": "My favourite food is spicy ramen"}, {"content": "The report is due on Friday"}], user_id="ana"
        )
        [top] = memory.search("spicy ramen", user_id="ana", limit=1)
    assert top.ranks == {"fulltext": 1, "vector": 1}
    assert top.score > 1.5 / 6  # the two rank weights (average 1) at 1 / (5 + 1); k = 60 gives under 0.1


def test_search_limit(memory: Memory) -> None:
    memory.add([{"content": f"note number {i} about apples"} for i in range(15)], user_id="ana")
    assert len(memory.search("apples", user_id="ana", limit=5)) == 5
    assert len(memory.search("apples", user_id="ana", limit=50)) == 15
    with pytest.raises(InvalidInput):
        memory.search("apples", user_id="ana", limit=0)


def test_invalid_mode_raises(memory: Memory) -> None:
    with pytest.raises(InvalidInput, match="mode"):
        memory.search("x", user_id="ana", mode="semantic")


@pytest.mark.parametrize("query", ["", "   ", "a\x00", "\ud800"])
def test_invalid_query_raises_invalid_input(memory: Memory, query: str) -> None:
    with pytest.raises(InvalidInput):
        memory.search(query, user_id="ana")


def test_search_with_missing_user_raises(memory: Memory) -> None:
    with pytest.raises(InvalidInput):
        memory.search("x", user_id="")
    with pytest.raises(InvalidInput):
        memory.search("x", user_id=None)  # type: ignore[arg-type]


def test_search_filters(memory: Memory) -> None:
    memory.add("coffee in the morning session one", user_id="ana", session_id="s1", agent_id="a1", timestamp=T0)
    memory.add(
        [{"role": "assistant", "content": "coffee reply from the assistant"}],
        user_id="ana",
        session_id="s1",
        agent_id="a1",
        timestamp=T0 + timedelta(hours=1),
    )
    memory.add(
        "coffee talk in session two", user_id="ana", session_id="s2", agent_id="a2", timestamp=T0 + timedelta(days=1)
    )
    memory.add("coffee without a session", user_id="ana", timestamp=T0 + timedelta(days=2))

    def contents(**kwargs: Any) -> set[str]:
        results = set()
        for mode in ("hybrid", "fulltext", "vector"):
            found = {h.content for h in memory.search("coffee", user_id="ana", mode=mode, **kwargs)}
            if results:
                assert found == results, (mode, kwargs)
            results = found
        return results

    assert len(contents()) == 4
    assert contents(session_id="s1") == {"coffee in the morning session one", "coffee reply from the assistant"}
    assert contents(agent_id="a2") == {"coffee talk in session two"}
    assert contents(roles=["assistant"]) == {"coffee reply from the assistant"}
    assert contents(roles=[Role.USER], session_id="s1") == {"coffee in the morning session one"}
    assert contents(after=T0 + timedelta(days=1)) == {"coffee talk in session two", "coffee without a session"}
    assert contents(before=T0 + timedelta(hours=1)) == {"coffee in the morning session one"}
    assert contents(after="2024-03-01T13:00:00+00:00", before="2024-03-02T14:00:00+01:00") == {
        "coffee reply from the assistant",
        "coffee talk in session two",
    }
    assert contents(session_id="nope") == set()
    with pytest.raises(InvalidInput):
        memory.search("coffee", user_id="ana", roles=["robot"])
    with pytest.raises(InvalidInput):
        memory.search("coffee", user_id="ana", after=datetime(2024, 1, 1))


HOSTILE_QUERIES = [
    '"',
    '""',
    "*",
    "NEAR(a b)",
    "a AND OR NOT b",
    "-x",
    "col:val",
    "content:secret",
    "((((",
    "))",
    "'; DROP TABLE turns; --",
    "^",
    "^start",
    "a* b*",
    "{content}: x",
    "x NEAR/2 y",
    "AND",
    "OR",
    "NOT",
    "?",
    "\\",
    "%_%",
    "turns_fts MATCH 'x'",
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_search_syntax_in_queries_never_raises(memory: Memory, query: str) -> None:
    memory.add("a plain note about NEAR and AND words, col val x", user_id="ana")
    for mode in ("hybrid", "fulltext", "vector"):
        hits = memory.search(query, user_id="ana", mode=mode)
        assert isinstance(hits, list)
    assert _count(memory) == 1
    assert memory.history(user_id="ana")[0].content.startswith("a plain note")


def test_operator_words_are_searched_as_words(memory: Memory) -> None:
    memory.add("we met NEAR the station", user_id="ana", session_id="s1")
    memory.add("nothing relevant here", user_id="ana", session_id="s2")
    hits = memory.search("NEAR(station)", user_id="ana", mode="fulltext")
    assert [h.content for h in hits] == ["we met NEAR the station"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=60))
def test_search_never_raises_on_arbitrary_text(memory: Memory, query: str) -> None:
    try:
        check_text(query, "query", max_bytes=1_000_000)
    except InvalidInput:
        return
    if not memory.history(user_id="ana"):
        memory.add([{"content": c} for c in ("alpha beta", "gamma delta", "ünïcødé 日本語 text")], user_id="ana")
    for mode in ("hybrid", "fulltext", "vector"):
        hits = memory.search(query, user_id="ana", mode=mode, limit=5)
        assert all(h.turn is not None and h.turn.user_id == "ana" for h in hits)


# -- scope isolation ---------------------------------------------------------------------


def test_other_users_data_never_visible(memory: Memory) -> None:
    ana, bob = _seed_two_users(memory)
    for mode in ("hybrid", "fulltext", "vector"):
        bob_hits = memory.search(ana.content, user_id="bob", mode=mode, limit=100)
        assert ana.id not in _ids(bob_hits)
        assert all(h.turn is not None and h.turn.user_id == "bob" for h in bob_hits)
        assert ana.id in _ids(memory.search(ana.content, user_id="ana", mode=mode))
    assert memory.history(user_id="bob") == [bob]
    assert memory.history(user_id="ana") == [ana]
    assert memory.history(user_id="carol") == []
    with pytest.raises(NotFound):
        memory.get(ana.id, user_id="bob")
    with pytest.raises(NotFound):
        memory.delete(ana.id, user_id="bob")
    assert memory.get(ana.id, user_id="ana") == ana
    assert ana.id in _ids(memory.search("grey cat", user_id="ana"))


def test_user_without_data_sees_nothing_even_for_exact_text(memory: Memory) -> None:
    ana, _ = _seed_two_users(memory)
    for mode in ("hybrid", "fulltext", "vector"):
        assert memory.search(ana.content, user_id="carol", mode=mode) == []


def test_isolation_with_identical_content(memory: Memory) -> None:
    [ana] = memory.add("shared sentence about tea", user_id="ana")
    [bob] = memory.add("shared sentence about tea", user_id="bob")
    for mode in ("hybrid", "fulltext", "vector"):
        assert _ids(memory.search("tea", user_id="ana", mode=mode)) == [ana.id]
        assert _ids(memory.search("tea", user_id="bob", mode=mode)) == [bob.id]
    memory.delete(ana.id, user_id="ana")
    assert _ids(memory.search("tea", user_id="bob")) == [bob.id]


def test_forget_cannot_reach_another_user(memory: Memory) -> None:
    ana, bob = _seed_two_users(memory)
    deletion = memory.forget(user_id="carol")
    assert deletion.turns == 0
    assert memory.history(user_id="ana") == [ana]
    assert memory.history(user_id="bob") == [bob]


# -- get / delete ---------------------------------------------------------------------------


def test_get_unknown_id_raises_not_found(memory: Memory) -> None:
    with pytest.raises(NotFound) as info:
        memory.get("01ARZ3NDEKTSV4RRFFQ69G5FAV", user_id="ana")
    assert isinstance(info.value, KeyError)
    assert isinstance(info.value, MemstrataError)
    with pytest.raises(InvalidInput):
        memory.get("", user_id="ana")


def test_delete_removes_from_search_history_and_get(memory: Memory) -> None:
    [keep] = memory.add("my sister lives in Porto", user_id="ana")
    [gone] = memory.add("my brother lives in Braga", user_id="ana")
    assert gone.id in _ids(memory.search("brother Braga", user_id="ana"))
    memory.delete(gone.id, user_id="ana")
    for mode in ("hybrid", "fulltext", "vector"):
        assert gone.id not in _ids(memory.search("brother Braga", user_id="ana", mode=mode))
    assert memory.history(user_id="ana") == [keep]
    with pytest.raises(NotFound):
        memory.get(gone.id, user_id="ana")
    with pytest.raises(NotFound):
        memory.delete(gone.id, user_id="ana")
    assert _count(memory) == 1


def test_delete_then_reuse_the_id(memory: Memory) -> None:
    memory.add("first version", user_id="ana", id="x")
    memory.delete("x", user_id="ana")
    [turn] = memory.add("second version", user_id="ana", id="x")
    assert memory.get("x", user_id="ana") == turn
    assert _ids(memory.search("second version", user_id="ana")) == ["x"]


# -- history ---------------------------------------------------------------------------------


def test_history_order_and_pagination(memory: Memory) -> None:
    # Added out of order; history sorts by time.
    for i in (3, 0, 4, 1, 2):
        memory.add(f"message {i}", user_id="ana", timestamp=T0 + timedelta(minutes=i))
    contents = [t.content for t in memory.history(user_id="ana")]
    assert contents == [f"message {i}" for i in range(5)]
    assert [t.content for t in memory.history(user_id="ana", limit=2)] == ["message 0", "message 1"]
    assert [t.content for t in memory.history(user_id="ana", limit=2, offset=2)] == ["message 2", "message 3"]
    assert [t.content for t in memory.history(user_id="ana", limit=2, offset=4)] == ["message 4"]
    assert memory.history(user_id="ana", offset=5) == []
    newest = [t.content for t in memory.history(user_id="ana", newest_first=True)]
    assert newest == [f"message {i}" for i in reversed(range(5))]
    assert [t.content for t in memory.history(user_id="ana", newest_first=True, limit=2, offset=1)] == [
        "message 3",
        "message 2",
    ]


def test_history_ties_keep_insertion_order(memory: Memory) -> None:
    turns = memory.add([{"content": f"same time {i}"} for i in range(5)], user_id="ana", timestamp=T0)
    assert memory.history(user_id="ana") == turns
    assert memory.history(user_id="ana", newest_first=True) == list(reversed(turns))


def test_history_by_session_and_agent(memory: Memory) -> None:
    memory.add("s1 a", user_id="ana", session_id="s1", agent_id="x")
    memory.add("s2 b", user_id="ana", session_id="s2", agent_id="y")
    assert [t.content for t in memory.history(user_id="ana", session_id="s1")] == ["s1 a"]
    assert [t.content for t in memory.history(user_id="ana", agent_id="y")] == ["s2 b"]
    assert memory.history(user_id="ana", session_id="s1", agent_id="y") == []


@pytest.mark.parametrize("kwargs", [{"limit": 0}, {"limit": 10_001}, {"offset": -1}, {"offset": True}, {"offset": 1.5}])
def test_history_bad_paging_raises(memory: Memory, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        memory.history(user_id="ana", **kwargs)


# -- forget -----------------------------------------------------------------------------------


def test_forget_user_removes_everything_of_that_user_only(memory: Memory) -> None:
    memory.add("ana likes hiking in the mountains", user_id="ana", session_id="s1")
    memory.add("ana likes hiking on weekends", user_id="ana", session_id="s2")
    [bob] = memory.add("bob likes hiking too", user_id="bob")
    assert memory.search("hiking", user_id="ana")  # loads ana's vectors into the index
    deletion = memory.forget(user_id="ana")
    assert deletion.turns == 2 and deletion.user_id == "ana" and deletion.session_id is None
    for mode in ("hybrid", "fulltext", "vector"):
        assert memory.search("hiking", user_id="ana", mode=mode) == []
        assert _ids(memory.search("hiking", user_id="bob", mode=mode)) == [bob.id]
    assert memory.history(user_id="ana") == []
    counts = memory.info()["counts"]
    assert counts["turns"] == 1
    assert counts["users"] == 1
    assert counts[f"vectors[{memory.embedder.model_id}]"] == 1


def test_forget_one_session_only(memory: Memory) -> None:
    memory.add("session one talks about trains", user_id="ana", session_id="s1")
    [kept] = memory.add("session two talks about trains", user_id="ana", session_id="s2")
    [other] = memory.add("bob session one trains", user_id="bob", session_id="s1")
    assert memory.search("trains", user_id="ana")
    deletion = memory.forget(user_id="ana", session_id="s1")
    assert deletion.turns == 1 and deletion.session_id == "s1"
    assert memory.history(user_id="ana") == [kept]
    for mode in ("hybrid", "fulltext", "vector"):
        assert _ids(memory.search("trains", user_id="ana", mode=mode)) == [kept.id]
    assert memory.history(user_id="bob") == [other]


def test_forget_requires_a_user(memory: Memory) -> None:
    memory.add("x", user_id="ana")
    with pytest.raises(InvalidInput):
        memory.forget(user_id="")
    assert _count(memory) == 1


# -- export / import ---------------------------------------------------------------------------


def _populate(memory: Memory) -> list[Turn]:
    turns = memory.add(
        [
            {"role": "user", "content": "I'm allergic to peanuts", "name": "ana", "metadata": {"tags": ["health"]}},
            {"role": "assistant", "content": "Noted: no peanuts.", "metadata": {"confidence": 0.9, "nested": {"a": 1}}},
        ],
        user_id="ana",
        session_id="s1",
        agent_id="chef",
        timestamp=datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        importance=0.9,
        metadata={"channel": "web"},
    )
    turns += memory.add("Ünïcode ✓ and emoji 🥜 survive", user_id="ana", id="custom-id")
    turns += memory.add("bob's only memory", user_id="bob", timestamp=datetime(2020, 1, 1, 0, 0, 0, 1, tzinfo=UTC))
    return turns


def _all_turns(memory: Memory) -> list[Turn]:
    return [t for user in ("ana", "bob") for t in memory.history(user_id=user, limit=10_000)]


@pytest.mark.parametrize("embeddings", [False, True])
def test_export_import_round_trip_is_lossless(memory: Memory, tmp_path: Path, embeddings: bool) -> None:
    originals = _populate(memory)
    target = tmp_path / "export.jsonl"
    report = memory.export(target, embeddings=embeddings)
    assert report.turns == 4
    assert report.embeddings == (4 if embeddings else 0)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["export.jsonl", "home"]  # no partial file left
    lines = target.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["kind"] == "memstrata-export"
    assert json.loads(lines[-1]) == {"kind": "end", "turns": 4}
    assert all(("embedding" in json.loads(line)) == embeddings for line in lines[1:-1])

    with Memory(tmp_path / "other", embedder=HashEmbedder()) as fresh:
        imported = fresh.import_(target)
        assert (imported.turns, imported.skipped) == (4, 0)
        assert imported.embeddings == (4 if embeddings else 0)
        copied = _all_turns(fresh)
        assert copied == _all_turns(memory)
        by_id = {t.id: t for t in copied}
        for original in originals:
            twin = by_id[original.id]
            for field in (
                "id",
                "user_id",
                "agent_id",
                "session_id",
                "role",
                "name",
                "content",
                "metadata",
                "importance",
                "created_at",
            ):
                assert getattr(twin, field) == getattr(original, field), field
            assert twin.created_at.microsecond == original.created_at.microsecond
        counts = fresh.info()["counts"]
        assert counts["turns"] == 4
        assert counts[f"vectors[{fresh.embedder.model_id}]"] == 4
        assert fresh.search("peanuts allergy", user_id="ana", mode="vector")
        # The turn that says it ranks first; its neighbour matches through its context.
        assert _ids(fresh.search("allergic", user_id="ana", mode="fulltext"))[0] == originals[0].id

        again = fresh.import_(target)
        assert (again.turns, again.skipped) == (0, 4)
        assert fresh.info()["counts"]["turns"] == 4


def test_export_of_one_user(memory: Memory, tmp_path: Path) -> None:
    _populate(memory)
    report = memory.export(tmp_path / "bob.jsonl", user_id="bob")
    assert report.turns == 1
    with Memory(tmp_path / "other", embedder=HashEmbedder()) as fresh:
        fresh.import_(tmp_path / "bob.jsonl")
        assert fresh.history(user_id="ana") == []
        assert fresh.history(user_id="bob") == memory.history(user_id="bob")


def test_import_of_vectors_from_another_model_reembeds(memory: Memory, tmp_path: Path) -> None:
    _populate(memory)
    memory.export(tmp_path / "e.jsonl", embeddings=True)
    with Memory(tmp_path / "other", embedder=HashEmbedder(dimension=32)) as fresh:
        report = fresh.import_(tmp_path / "e.jsonl")
        assert (report.turns, report.embeddings) == (4, 0)
        assert fresh.info()["counts"]["vectors[hash-bow-32]"] == 4
        assert fresh.search("peanuts", user_id="ana", mode="vector")


def test_an_export_that_fails_part_way_leaves_no_partial_file(
    memory: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _populate(memory)
    stored = memory.parts.store.iterate

    def breaks_after_one(user_id: str | None) -> Any:
        yield next(iter(stored(user_id)))
        raise StorageError("the store went away")

    monkeypatch.setattr(memory.parts.store, "iterate", breaks_after_one)
    (tmp_path / "out").mkdir()
    with pytest.raises(StorageError, match="went away"):
        memory.export(tmp_path / "out" / "e.jsonl")
    assert list((tmp_path / "out").iterdir()) == []


def test_an_export_cut_short_at_a_line_boundary_is_refused_and_older_files_still_import(
    memory: Memory, tmp_path: Path
) -> None:
    _populate(memory)
    whole = tmp_path / "whole.jsonl"
    memory.export(whole)
    lines = whole.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:3]), encoding="utf-8")  # parses as well as a whole file would
    appended = tmp_path / "appended.jsonl"
    appended.write_text("".join(lines + lines[1:2]), encoding="utf-8")
    miscounted = tmp_path / "miscounted.jsonl"
    miscounted.write_text("".join(lines[:3] + lines[-1:]), encoding="utf-8")
    # A file written before end lines existed (format version 1) has none and needs none.
    older = tmp_path / "older.jsonl"
    older.write_text("".join([lines[0].replace('"version": 2', '"version": 1'), *lines[1:-1]]), encoding="utf-8")
    with Memory(tmp_path / "other", embedder=HashEmbedder()) as fresh:
        with pytest.raises(InvalidInput, match="stops after 2 turns without its end line: it was cut short"):
            fresh.import_(cut)
        with pytest.raises(InvalidInput, match="line 7: a record after the end line"):
            fresh.import_(appended)
        with pytest.raises(InvalidInput, match="the end line counts 4 turns, but the file holds 2"):
            fresh.import_(miscounted)
        assert fresh.info()["counts"]["turns"] == 0
        assert fresh.import_(older).turns == 4


def test_an_import_reads_a_byte_order_mark_and_names_a_repeated_id(memory: Memory, tmp_path: Path) -> None:
    _populate(memory)
    target = tmp_path / "e.jsonl"
    memory.export(target)
    lines = target.read_text(encoding="utf-8").splitlines(keepends=True)
    marked = tmp_path / "bom.jsonl"
    marked.write_text("\ufeff" + "".join(lines), encoding="utf-8")
    twice = tmp_path / "twice.jsonl"
    twice.write_text("".join([*lines[:-1], lines[1], '{"kind": "end", "turns": 5}\n']), encoding="utf-8")
    with Memory(tmp_path / "other", embedder=HashEmbedder()) as fresh:
        first = json.loads(lines[1])["id"]
        with pytest.raises(InvalidInput, match=f"line 6: turn id '{first}' is listed twice \\(first on line 2\\)"):
            fresh.import_(twice)
        assert fresh.import_(marked).turns == 4


def test_an_import_line_that_differs_from_the_stored_turn_is_a_conflict_not_skipped(
    memory: Memory, tmp_path: Path
) -> None:
    memory.add(
        [{"role": "user", "content": "hello", "id": "m-1", "metadata": {"v": 1}}],
        user_id="ana",
        timestamp="2024-01-01T00:00:00Z",
    )
    target = tmp_path / "e.jsonl"
    memory.export(target)
    text = target.read_text(encoding="utf-8")
    assert memory.import_(target).skipped == 1  # the stored turn as exported is already present
    for changed in (text.replace('{"v": 1}', '{"v": 2}'), text.replace("2024-01-01", "2020-05-05")):
        target.write_text(changed, encoding="utf-8")
        with pytest.raises(IdConflict, match=r"'m-1' in .* names a different message"):
            memory.import_(target)
    (stored,) = memory.history(user_id="ana")
    assert stored.metadata == {"v": 1} and stored.created_at.year == 2024


@pytest.mark.parametrize(("stored", "imported"), [("true", "1"), ("0", "false"), ("[true]", "[1.0]")])
def test_an_import_telling_a_flag_from_a_number_is_a_conflict(
    memory: Memory, tmp_path: Path, stored: str, imported: str
) -> None:
    memory.add(
        [{"role": "user", "content": "hello", "id": "m-1", "metadata": {"pinned": json.loads(stored)}}],
        user_id="ana",
        timestamp="2024-01-01T00:00:00Z",
    )
    target = tmp_path / "e.jsonl"
    memory.export(target)
    text = target.read_text(encoding="utf-8")
    target.write_text(text.replace(f'{{"pinned": {stored}}}', f'{{"pinned": {imported}}}'), encoding="utf-8")
    assert target.read_text(encoding="utf-8") != text
    with pytest.raises(IdConflict, match="names a different message"):
        memory.import_(target)


def test_an_export_never_replaces_memstratas_own_files(memory: Memory, tmp_path: Path) -> None:
    memory.add("keep me", user_id="ana")
    home = memory.settings.data_dir
    database = home / "memstrata.db"
    before = database.read_bytes()[:16]
    for target in (database, home / "memstrata.db-wal", home / "memstrata.toml", home / "costs.jsonl"):
        with pytest.raises(InvalidInput, match="one of memstrata's own files"):
            memory.export(target)
    link = tmp_path / "link.jsonl"
    link.symlink_to(database)
    with pytest.raises(InvalidInput, match="one of memstrata's own files"):
        memory.export(link)
    assert database.read_bytes()[:16] == before == b"SQLite format 3\x00"
    assert [turn.content for turn in memory.history(user_id="ana")] == ["keep me"]


def test_an_export_never_replaces_a_store_named_by_a_relative_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Memory(tmp_path / "home", embedder=HashEmbedder(), storage_url="sqlite:///rel.db") as memory:
        memory.add("keep me", user_id="ana")
        for target in ("rel.db", "./rel.db-wal"):
            with pytest.raises(InvalidInput, match="one of memstrata's own files"):
                memory.export(target)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)  # the store is still the file named where it was opened
        with pytest.raises(InvalidInput, match="one of memstrata's own files"):
            memory.export(tmp_path / "rel.db")
        assert memory.export("rel.db").turns == 1  # a file of that name here is not the store
        assert [turn.content for turn in memory.history(user_id="ana")] == ["keep me"]
    assert (tmp_path / "rel.db").read_bytes()[:16] == b"SQLite format 3\x00"


def test_an_export_round_trip_keeps_vectors_bit_for_bit(memory: Memory, tmp_path: Path) -> None:
    for n in range(30):  # enough vectors that some are not at unit length exactly in float64
        memory.add([{"role": "user", "content": f"message {n} about Porto and cats"}], user_id="ana")
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    memory.export(first, embeddings=True)
    with Memory(tmp_path / "other", embedder=HashEmbedder()) as fresh:
        fresh.import_(first)
        fresh.export(second, embeddings=True)
    assert second.read_bytes() == first.read_bytes()


def test_two_exports_to_one_path_at_once_each_write_a_whole_file(memory: Memory, tmp_path: Path) -> None:
    for n in range(300):
        memory.add(f"message {n}", user_id="ana")
    target = tmp_path / "out.jsonl"
    barrier = threading.Barrier(2)
    reports: list[Any] = []

    def export() -> None:
        barrier.wait()
        reports.append(memory.export(target))

    threads = [threading.Thread(target=export) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [report.turns for report in reports] == [300, 300]
    with Memory(tmp_path / "other", embedder=HashEmbedder()) as fresh:
        assert fresh.import_(target).turns == 300
    assert sorted(path.name for path in tmp_path.iterdir()) == ["home", "other", "out.jsonl"]


def test_an_export_keeps_the_permissions_of_the_file_it_replaces_and_starts_private(
    memory: Memory, tmp_path: Path
) -> None:
    memory.add("my bank PIN is 1234", user_id="ana")
    fresh, kept = tmp_path / "new.jsonl", tmp_path / "kept.jsonl"
    kept.write_text("old\n")
    kept.chmod(0o640)
    memory.export(fresh)
    memory.export(kept)
    assert fresh.stat().st_mode & 0o777 == 0o600
    assert kept.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("values", [[1e-30, 0.0, 0.0, 0.0], [1e20, 1e20, 1e20, 1e20], [3e38, -3e38, 0.0, 0.0]])
def test_an_imported_vector_of_any_finite_size_is_stored_at_unit_length(
    memory: Memory, tmp_path: Path, values: list[float]
) -> None:
    memory.add("one turn", user_id="ana")
    source = tmp_path / "e.jsonl"
    memory.export(source, embeddings=True)
    header, record, end = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    vector = np.zeros(record["embedding"]["dimension"], dtype="<f4")
    vector[: len(values)] = values
    record["embedding"]["vector"] = base64.b64encode(vector.tobytes()).decode()
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("".join(json.dumps(line) + "\n" for line in (header, record, end)), encoding="utf-8")
    with Memory(tmp_path / "other", embedder=HashEmbedder()) as fresh:
        assert fresh.import_(tampered).embeddings == 1
        fresh.export(tmp_path / "again.jsonl", embeddings=True)
    [stored] = [json.loads(line) for line in (tmp_path / "again.jsonl").read_text(encoding="utf-8").splitlines()[1:-1]]
    unit = np.frombuffer(base64.b64decode(stored["embedding"]["vector"]), dtype="<f4")
    assert np.all(np.isfinite(unit)) and np.linalg.norm(unit) == pytest.approx(1.0, abs=1e-5)


def test_an_imported_vector_is_stored_at_unit_length(memory: Memory, tmp_path: Path) -> None:
    _populate(memory)
    source = tmp_path / "e.jsonl"
    memory.export(source, embeddings=True)
    header, *records = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    vector = np.frombuffer(base64.b64decode(records[0]["embedding"]["vector"]), dtype="<f4") * 1000
    records[0]["embedding"]["vector"] = base64.b64encode(vector.astype("<f4").tobytes()).decode()
    tampered = tmp_path / "tampered.jsonl"
    tampered.write_text("".join(json.dumps(line) + "\n" for line in [header, *records]), encoding="utf-8")
    with Memory(tmp_path / "other", embedder=HashEmbedder()) as fresh:
        assert fresh.import_(tampered).embeddings == 4
        fresh.export(tmp_path / "again.jsonl", embeddings=True)
        stored = [
            json.loads(line) for line in (tmp_path / "again.jsonl").read_text(encoding="utf-8").splitlines()[1:-1]
        ]
    norms = [np.linalg.norm(np.frombuffer(base64.b64decode(r["embedding"]["vector"]), dtype="<f4")) for r in stored]
    assert norms == pytest.approx([1.0] * 4, abs=1e-5)


def _write_export_with_bad_middle_line(memory: Memory, tmp_path: Path, bad: str) -> Path:
    _populate(memory)
    source = tmp_path / "good.jsonl"
    memory.export(source)
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) == 6  # header, 4 turns, end line
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join([*lines[:3], bad + "\n", *lines[3:]]), encoding="utf-8")
    return broken


def _bad_turn_line(**changes: Any) -> str:
    record = {
        "kind": "turn",
        "id": "bad-1",
        "user_id": "ana",
        "agent_id": None,
        "session_id": None,
        "role": "user",
        "name": None,
        "content": "valid",
        "created_at": "2024-01-01T00:00:00.000000+00:00",
        "metadata": {},
        "importance": None,
    }
    record.update(changes)
    return json.dumps(record)


@pytest.mark.parametrize(
    "bad",
    [
        '{"kind": "turn", "id": ',
        "not json at all",
        _bad_turn_line(content=""),
        _bad_turn_line(content="   "),
        _bad_turn_line(role="robot"),
        _bad_turn_line(created_at="2024-01-01T00:00:00"),
        _bad_turn_line(created_at=None),
        _bad_turn_line(user_id=""),
        _bad_turn_line(importance=7),
        _bad_turn_line(kind="mystery"),
        _bad_turn_line(embedding={"model_id": "m", "dimension": 3, "vector": "not base64!"}),
        "[1, 2, 3]",
        _bad_turn_line()[:-1] + ', "content": "other"}',
        _bad_turn_line(metadata={"a": 1}).replace('"metadata": {"a": 1}', '"metadata": {"a": 1, "a": 2}'),
        '{"kind": "turn", "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}",
        _bad_turn_line(colour="red"),
        _bad_turn_line(embedding={"model_id": "m", "dimension": 1, "vector": "AACAPw==", "norm": 1}),
        _bad_turn_line(metadata={"x": "y" * 70_000}),
    ],
    ids=[
        "truncated",
        "text",
        "empty",
        "blank",
        "role",
        "naive",
        "no-time",
        "no-user",
        "importance",
        "kind",
        "embedding",
        "array",
        "a key twice",
        "a metadata key twice",
        "nested too deeply",
        "an unknown key",
        "an unknown embedding key",
        "metadata over max_metadata_bytes",
    ],
)
def test_import_with_one_bad_line_imports_nothing(memory: Memory, tmp_path: Path, bad: str) -> None:
    broken = _write_export_with_bad_middle_line(memory, tmp_path, bad)
    with Memory(tmp_path / "other", embedder=HashEmbedder()) as fresh:
        with pytest.raises(InvalidInput, match="line 4"):
            fresh.import_(broken)
        assert fresh.info()["counts"]["turns"] == 0


def test_an_import_line_with_an_unknown_key_is_refused_like_an_add(memory: Memory, tmp_path: Path) -> None:
    broken = _write_export_with_bad_middle_line(memory, tmp_path, _bad_turn_line(colour="red", tags=[]))
    with Memory(tmp_path / "other", embedder=HashEmbedder()) as fresh:
        with pytest.raises(InvalidInput, match=r"line 4: a turn line has unknown keys \['colour', 'tags'\]"):
            fresh.import_(broken)
        assert _count(fresh) == 0


def test_an_import_names_the_line_whose_metadata_is_over_the_limit(memory: Memory, tmp_path: Path) -> None:
    broken = _write_export_with_bad_middle_line(memory, tmp_path, _bad_turn_line(metadata={"x": "y" * 200}))
    with Memory(tmp_path / "other", embedder=HashEmbedder(), max_metadata_bytes=200) as fresh:
        with pytest.raises(InvalidInput, match=r"line 4: metadata is 209 bytes of JSON, over the limit of 200"):
            fresh.import_(broken)
        assert _count(fresh) == 0


def test_import_with_a_duplicated_id_imports_nothing(memory: Memory, tmp_path: Path) -> None:
    _populate(memory)
    source = tmp_path / "good.jsonl"
    memory.export(source)
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "dup.jsonl").write_text("".join([*lines, lines[1]]), encoding="utf-8")
    with Memory(tmp_path / "other", embedder=HashEmbedder()) as fresh:
        with pytest.raises(InvalidInput):
            fresh.import_(tmp_path / "dup.jsonl")
        assert fresh.info()["counts"]["turns"] == 0


def test_import_conflicting_with_stored_turn_imports_nothing(memory: Memory, tmp_path: Path) -> None:
    _populate(memory)
    memory.export(tmp_path / "e.jsonl")
    with Memory(tmp_path / "other", embedder=HashEmbedder()) as fresh:
        fresh.add("something else entirely", user_id="ana", id="custom-id")
        with pytest.raises(IdConflict):
            fresh.import_(tmp_path / "e.jsonl")
        assert fresh.info()["counts"]["turns"] == 1


def test_an_import_in_batches_checks_every_id_before_its_first_batch(memory: Memory, tmp_path: Path) -> None:
    _populate(memory)  # custom-id is the third of four turns
    memory.export(tmp_path / "e.jsonl")
    with Memory(tmp_path / "other", embedder=HashEmbedder(), max_messages_per_add=1) as fresh:
        fresh.add("something else entirely", user_id="ana", id="custom-id")
        with pytest.raises(IdConflict):
            fresh.import_(tmp_path / "e.jsonl")
        assert _count(fresh) == 1


@pytest.mark.parametrize(
    "content",
    [
        "",
        "\n\n",
        '{"kind": "something-else", "version": 1}\n',
        '{"kind": "memstrata-export", "version": 99}\n',
        '{"kind": "memstrata-export", "version": "1"}\n',
        "id,user_id,content\n1,ana,hello\n",
        _bad_turn_line() + "\n",
    ],
    ids=["empty", "blank", "other-kind", "future-version", "string-version", "csv", "no-header"],
)
def test_non_export_file_raises_invalid_input(memory: Memory, tmp_path: Path, content: str) -> None:
    path = tmp_path / "not-an-export.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InvalidInput):
        memory.import_(path)
    assert _count(memory) == 0


def test_import_of_binary_or_missing_file_raises_invalid_input(memory: Memory, tmp_path: Path) -> None:
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff\xfe\x00\x81garbage")
    with pytest.raises(InvalidInput):
        memory.import_(binary)
    with pytest.raises(InvalidInput):
        memory.import_(tmp_path / "missing.jsonl")
    assert _count(memory) == 0


def test_import_of_a_directory_raises_a_memstrata_error(memory: Memory, tmp_path: Path) -> None:
    with pytest.raises(MemstrataError):
        memory.import_(tmp_path)


def test_export_to_an_unwritable_place_raises_storage_error(memory: Memory, tmp_path: Path) -> None:
    memory.add("x", user_id="ana")
    with pytest.raises(StorageError):
        memory.export(tmp_path / "no" / "such" / "dir" / "e.jsonl")


def test_an_export_through_a_symlink_writes_the_file_it_points_at(memory: Memory, tmp_path: Path) -> None:
    memory.add("x", user_id="ana")
    (tmp_path / "real").mkdir()
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "real" / "backup.jsonl")
    report = memory.export(link)
    assert link.is_symlink() and (tmp_path / "real" / "backup.jsonl").is_file()
    assert report.path == str(link) and report.turns == 1  # reported as given
    assert sorted(path.name for path in tmp_path.iterdir()) == ["home", "link.jsonl", "real"]  # no partial file left


@pytest.mark.parametrize("target", ["", " ", ".", "/", "fifo", "folder", 5, None])
def test_an_export_path_that_is_no_regular_file_is_invalid_input(
    memory: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: object
) -> None:
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "fifo")  # replaced by a rename, its reader would get nothing
    (tmp_path / "folder").mkdir()
    memory.add("x", user_id="ana")
    with pytest.raises(InvalidInput, match="export path"):
        memory.export(target)  # type: ignore[arg-type]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fifo", "folder", "home"]
    assert (tmp_path / "fifo").is_fifo()


def test_an_export_the_file_system_refuses_is_a_storage_error_and_leaves_nothing(
    memory: Memory, tmp_path: Path
) -> None:
    memory.add("x", user_id="ana")
    (tmp_path / "afile").write_text("not a folder")
    with pytest.raises(StorageError, match="Not a directory"):
        memory.export(tmp_path / "afile" / "x.jsonl")
    longest = "b" * (255 - len(".jsonl")) + ".jsonl"  # fits, but not with the partial file's suffix
    with pytest.raises(StorageError, match="cannot write the export"):
        memory.export(tmp_path / longest)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["afile", "home"]


def test_an_export_through_a_symlink_loop_is_invalid_input(memory: Memory, tmp_path: Path) -> None:
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(loop)
    memory.add("x", user_id="ana")
    with pytest.raises(InvalidInput, match="cannot be followed"):
        memory.export(loop)
    assert loop.is_symlink()


@pytest.mark.parametrize("source", ["", None, 5])
def test_an_import_path_that_is_no_path_is_invalid_input(memory: Memory, source: object) -> None:
    with pytest.raises(InvalidInput, match="file to import"):
        memory.import_(source)  # type: ignore[arg-type]


# -- lifecycle ------------------------------------------------------------------------------------


def test_reopen_keeps_data_and_search(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder()) as first:
        [turn] = first.add("the spare key is under the blue flowerpot", user_id="ana", metadata={"k": "v"})
        first.add("unrelated note about taxes", user_id="ana")
    with Memory(home, embedder=HashEmbedder()) as second:
        assert second.get(turn.id, user_id="ana") == turn
        assert second.info()["counts"]["turns"] == 2
        for mode in ("hybrid", "fulltext", "vector"):
            assert second.search("blue flowerpot key", user_id="ana", mode=mode)[0].id == turn.id
        [new] = second.add("the car is parked on level three", user_id="ana")
        assert second.search("parked car", user_id="ana")[0].id == new.id


def test_memory_opened_on_a_db_file_path(tmp_path: Path) -> None:
    database = tmp_path / "custom" / "mine.db"
    with Memory(database, embedder=HashEmbedder()) as memory:
        memory.add("stored in a named file", user_id="ana")
        assert memory.info()["storage"] == str(database.resolve())
    assert database.is_file()
    with Memory(database, embedder=HashEmbedder()) as memory:
        assert memory.search("named file", user_id="ana")


CLOSED_CALLS: list[tuple[str, Callable[[Memory, Path], object]]] = [
    ("add", lambda m, p: m.add("x", user_id="ana")),
    ("search", lambda m, p: m.search("x", user_id="ana")),
    ("get", lambda m, p: m.get("x", user_id="ana")),
    ("history", lambda m, p: m.history(user_id="ana")),
    ("delete", lambda m, p: m.delete("x", user_id="ana")),
    ("forget", lambda m, p: m.forget(user_id="ana")),
    ("export", lambda m, p: m.export(p / "e.jsonl")),
    ("import", lambda m, p: m.import_(p / "e.jsonl")),
    ("info", lambda m, p: m.info()),
    ("reindex", lambda m, p: m.reindex()),
]


@pytest.mark.parametrize("call", [c for _, c in CLOSED_CALLS], ids=[n for n, _ in CLOSED_CALLS])
def test_methods_after_close_raise_storage_error(
    home: Path, tmp_path: Path, call: Callable[[Memory, Path], object]
) -> None:
    memory = Memory(home, embedder=HashEmbedder())
    memory.add("x", user_id="ana", id="x")
    memory.close()
    memory.close()  # closing twice is harmless
    with pytest.raises(StorageError):
        call(memory, tmp_path)


def test_catch_up_reindexes_for_a_new_model_on_open(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(dimension=384)) as first:
        turns = first.add([{"content": f"travel plan number {i} to Kyoto"} for i in range(5)], user_id="ana")
        turns += first.add("bob goes to Oslo", user_id="bob")
        assert first.info()["counts"]["vectors[hash-bow-384]"] == 6
    with Memory(home, embedder=HashEmbedder(dimension=64)) as second:
        counts = second.info()["counts"]
        assert counts["vectors[hash-bow-64]"] == 6
        assert counts["turns"] == 6
        assert second.info()["dimension"] == 64
        assert second.reindex() == 0  # nothing left to do
        hits = second.search("travel plan Kyoto", user_id="ana", mode="vector", limit=10)
        assert {h.id for h in hits} == {t.id for t in turns[:5]}
        assert _ids(second.search("Oslo", user_id="bob", mode="vector")) == [turns[5].id]


def test_finds_inside_the_named_dates_join_their_retrievers_list_by_score() -> None:
    rankings = {
        "fulltext": [(("turn", 1), 9.0), (("turn", 2), 5.0), (("turn", 3), 4.0)],
        "fulltext:dated": [(("turn", 7), 4.5), (("turn", 3), 4.0), (("turn", 8), 1.0)],
        "vector": [(("turn", 2), 0.9)],
        "derived": [(("derived", 1), 3.0)],
    }
    assert joined(rankings) == {
        "fulltext": [(("turn", n), score) for n, score in ((1, 9.0), (2, 5.0), (7, 4.5), (3, 4.0), (8, 1.0))],
        "vector": [(("turn", 2), 0.9)],
        "derived": [(("derived", 1), 3.0)],
    }
    # Each list and its dated finds are cut to the depth before they are joined.
    assert joined(rankings, 1)["fulltext"] == [(("turn", 1), 9.0), (("turn", 7), 4.5)]


def test_a_query_asks_about_the_dates_it_names_and_its_past_relative_phrases() -> None:
    today = date(2023, 5, 10)  # a Wednesday
    tomorrow = date(2023, 5, 11)
    assert asked_periods("What did I say last week?", today) == (Span(date(2023, 5, 1), today, tomorrow),)
    # A named day is what "last weekend" counts back from; a yearless one anchors nothing.
    assert asked_periods("What did I do last weekend, on 10 April 2023?", today) == (Period(2023, (4,), 10),)
    assert asked_periods("What did I do last weekend before 10 April 2023?", today) == ()
    assert asked_periods("What did I do yesterday before 2023?", today) == ()
    assert asked_periods("What did I say yesterday about the trip in June?", today) == (
        Period(None, (6,)),
        Span(date(2023, 5, 9), today, tomorrow),
    )
    assert asked_periods("What did I do yesterday? And yesterday?", today) == (Span(date(2023, 5, 9), today, tomorrow),)
    assert asked_periods("What will I do next week or tomorrow?", today) == ()
    assert asked_periods("What did I do " + ", ".join(f"{n} days ago" for n in range(1, 20)), today) == ()


def test_forget_drops_the_users_visits_not_yet_queued(tmp_path: Path) -> None:
    with Memory(tmp_path / "home", embedder=HashEmbedder(), background=False) as memory:
        memory.add("sailing in Cascais", user_id="ana")
        memory.flush()
        assert memory.search("sailing", user_id="ana")  # a visit, held until a batch is queued
        memory.forget(user_id="ana")
    with Memory(tmp_path / "home", embedder=HashEmbedder(), background=False) as reopened:
        assert reopened.parts.store.count_jobs("ana") == 0


def test_forgetting_one_session_keeps_the_visits_to_the_rest(tmp_path: Path) -> None:
    with Memory(tmp_path / "home", embedder=HashEmbedder(), background=False) as memory:
        memory.add("sailing in Cascais", user_id="ana", session_id="s1")
        memory.add("sailing in Porto", user_id="ana", session_id="s2")
        memory.flush()
        assert memory.search("sailing", user_id="ana")
        memory.forget(user_id="ana", session_id="s1")
    with Memory(tmp_path / "home", embedder=HashEmbedder(), background=False) as reopened:
        assert reopened.parts.store.count_jobs("ana") == 1  # the visit, queued on close


def test_a_memory_that_fails_to_open_closes_the_store_it_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memstrata.facade.parts as module

    opened: list[Any] = []

    def recording(*args: Any, **kwargs: Any) -> Any:
        store = open_store(*args, **kwargs)
        opened.append(store)
        return store

    monkeypatch.setattr(module, "open_store", recording)
    with pytest.raises(MemstrataError, match="model"):  # an LLM provider without a model
        Memory(tmp_path / "home", embedder=HashEmbedder(), llm_provider="openai", llm_base_url="http://127.0.0.1:9")
    [store] = opened
    with pytest.raises(StorageError, match="closed"):
        store.get_by_ids(["x"])


def test_closing_a_memory_closes_the_model_client_it_built(tmp_path: Path) -> None:
    memory = Memory(
        tmp_path / "home",
        embedder=HashEmbedder(),
        llm_provider="openai",
        llm_model="m",
        llm_base_url="http://127.0.0.1:9",
    )
    client = memory.llm._remote.http  # type: ignore[attr-defined]
    client._http()  # a pooled connection set up, as the first call would
    memory.close()
    assert client._client is None


def test_with_record_visits_off_reads_never_change_the_memory(tmp_path: Path) -> None:
    with Memory(tmp_path / "home", embedder=HashEmbedder(), background=False, record_visits=False) as memory:
        memory.add("sailing in Cascais", user_id="ana")
        memory.flush()
        for _ in range(20):
            assert memory.search("sailing", user_id="ana")
            assert memory.context("sailing", user_id="ana").items
    with Memory(tmp_path / "home", embedder=HashEmbedder(), background=False) as reopened:
        assert reopened.parts.store.count_jobs("ana") == 0


def test_forget_after_the_tier_work_leaves_no_row_of_the_user_and_keeps_the_audit_under_a_hash(memory: Memory) -> None:
    for text in (
        "Please, I live in Lisbon and I work as a nurse at Santa Maria. Thanks!",
        "Please remind me: my sister Marta visits Lisbon next month. Thanks!",
        "I love hiking in Sintra with Marta; we go every weekend.",
    ):
        memory.add(
            [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted, Ana."}],
            user_id="ana",
            session_id="s1",
        )
    memory.add("bob likes hiking too", user_id="bob")
    memory.flush()
    memory.consolidate(user_id="ana")
    memory.forget(user_id="ana")
    connection = sqlite3.connect(memory.settings.data_dir / DATABASE_FILE_NAME)
    try:
        keyed = [
            str(row[0])
            for row in connection.execute(
                "SELECT m.name FROM sqlite_master m JOIN pragma_table_info(m.name) p"
                " WHERE m.type = 'table' AND p.name = 'user_id'"
            )
        ]
        assert {"cells", "entities", "patterns", "pattern_observations", "segments", "derived"} <= set(keyed)
        left = {
            table: connection.execute(f"SELECT count(*) FROM {table} WHERE user_id = 'ana'").fetchone()[0]
            for table in keyed
        }
    finally:
        connection.close()
    assert {table: count for table, count in left.items() if count} == {}
    # The audit log stays (ids and counts) under a salted hash of her id, and holds none of her words.
    audit = memory.inspect(user_id="ana").events
    assert "forget" in {event.kind for event in audit}
    said = " ".join(json.dumps(dict(event.detail)) for event in audit).casefold()
    assert not any(word in said for word in ("lisbon", "marta", "nurse", "hiking", "sintra", "please"))


def test_a_search_or_context_narrowed_by_a_filter_covers_turns_only(memory: Memory) -> None:
    memory.add("My favourite colour is blue.", user_id="ana", session_id="s1", agent_id="coder")
    memory.add("We should plan the release next week.", user_id="ana", session_id="s2", agent_id="planner")
    memory.flush()
    assert any(hit.tier == "longterm" for hit in memory.search("favourite colour", user_id="ana", tiers=["longterm"]))
    for narrowing in ({"session_id": "s2"}, {"roles": ["assistant"]}, {"agent_id": "planner"}):
        hits = memory.search("favourite colour", user_id="ana", tiers=["longterm"], **narrowing)  # type: ignore[arg-type]
        assert {hit.tier for hit in hits} <= {"episodic"}, narrowing
    # A context for one agent leaves out facts and summaries (the profile, the user's, stays).
    block = memory.context("What is my favourite colour?", user_id="ana", agent_id="planner")
    assert {item.kind for item in block.items} & {"cell", "consolidation", "scene", "midterm"} == set()


def test_users_unloaded_from_a_full_vector_index_are_found_again(tmp_path: Path) -> None:
    with Memory(tmp_path / "home", embedder=HashEmbedder(), background=False, vector_cache_rows=300) as memory:
        for user in ("ana", "bea", "cid"):
            for text in (f"{user} keeps bees on the roof", f"{user} plays the cello"):
                memory.add(text, user_id=user)
        for _ in range(2):
            for user in ("ana", "bea", "cid"):
                hits = memory.search("bees roof", user_id=user, mode="vector", limit=1)
                assert [hit.content for hit in hits] == [f"{user} keeps bees on the roof"]
                assert memory.parts.index.rows() <= 300


def test_searches_from_many_threads_find_their_users_while_the_vector_index_unloads_others(tmp_path: Path) -> None:
    users = ("ana", "bea", "cid", "dan")
    with Memory(tmp_path / "home", embedder=HashEmbedder(), background=False, vector_cache_rows=100) as memory:
        for user in users:  # each user's block (64 rows at least) leaves room for no second one
            for text in (f"{user} keeps bees on the roof", f"{user} plays the cello"):
                memory.add(text, user_id=user)
        start, missed = threading.Barrier(len(users)), []

        def search(user: str) -> None:
            start.wait()
            for _ in range(25):
                if not memory.search("bees roof", user_id=user, mode="vector", limit=1):
                    missed.append(user)

        threads = [threading.Thread(target=search, args=(user,)) for user in users]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert missed == []


def test_a_segment_promoted_to_a_scene_outlives_pruning_so_forgetting_its_turns_deletes_the_scene(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    settings: dict[str, Any] = {"background": False, "working_capacity": 1, "promote_heat": 0.1}
    with Memory(home, embedder=HashEmbedder(), **settings) as memory:
        for text in ("My PIN is 4417 and I live in Porto with Xiomara.", "Porto Xiomara PIN 4417 again."):
            memory.add(
                [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}],
                user_id="ana",
                session_id="s1",
            )
        memory.flush()
        memory.search("Porto PIN 4417 Xiomara", user_id="ana")  # visits warm the segment into a scene
        memory.flush()
        segments = [segment.id for segment in memory.parts.store.segments("ana")]
        with sqlite3.connect(home / DATABASE_FILE_NAME) as connection:
            assert connection.execute("SELECT COUNT(*) FROM scenes").fetchone() == (1,)
        memory.parts.store.archive_segments("ana", segments, {"heat": 0.0})  # as eviction would
        assert memory.prune(user_id="ana", tier="midterm", keep_last=0) == 0  # the promoted one stays
        assert memory.forget(user_id="ana", session_id="s1").turns == 4
    with sqlite3.connect(home / DATABASE_FILE_NAME) as connection:
        assert connection.execute("SELECT COUNT(*) FROM scenes").fetchone() == (0,)
        assert connection.execute("SELECT COUNT(*) FROM segments").fetchone() == (0,)


def test_pruning_leaves_no_copy_of_the_deleted_text_in_the_database_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        memory.add(
            "My PIN is 4417, codeword quixotic, and I live in Porto.", user_id="ana", timestamp="2020-01-01T00:00:00Z"
        )
        for n in range(30):
            memory.add(f"an ordinary note number {n}", user_id="ana")
        memory.flush()
        assert memory.prune(user_id="ana", tier="episodic", older_than=timedelta(days=365)) == 1
        for name in (DATABASE_FILE_NAME, DATABASE_FILE_NAME + "-wal"):
            path = home / name
            # Not b"4417" alone: a stored time's microseconds ("18.444179") can hold those digits.
            data = path.read_bytes() if path.exists() else b""
            assert b"PIN is 4417" not in data and b"quixot" not in data, name


@pytest.mark.parametrize("shown_as", ["Caro", "Caroline Smith"])
def test_a_question_finds_a_speaker_shown_under_another_form_of_the_name(memory: Memory, shown_as: str) -> None:
    said = [
        ("Mel", "I grow roses in my garden."),
        (shown_as, "The garden out back has tomatoes now."),
        ("Mel", "I grow herbs in the garden club."),
    ]
    stored = memory.add([{"role": "user", "name": name, "content": text} for name, text in said], user_id="u")
    for mode in ("hybrid", "fulltext"):
        hits = memory.search("What does Caroline grow in the garden?", user_id="u", mode=mode, limit=3)
        assert hits[0].id == stored[1].id, (mode, [hit.content for hit in hits])


def test_a_search_finds_each_thought_sent_as_several_messages_once_before_its_other_pieces(home: Path) -> None:
    pieces = ["so i finally did it", "signed up for the pottery class", "the pottery class starts next week"]
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        asked = [{"role": "assistant", "content": "How was your week?"}]
        memory.add(asked, user_id="u", session_id="s", timestamp="2025-03-01T10:00:00Z")
        messages = [{"role": "user", "content": piece} for piece in pieces]
        stored = memory.add(messages, user_id="u", session_id="s", timestamp="2025-03-01T10:01:00Z")
        later = memory.add("Nice, pottery is fun", user_id="u", session_id="s", timestamp="2025-03-01T10:09:00Z")
        hits = memory.search("pottery class", user_id="u", limit=5)
        assert hits[0].id in {stored[1].id, stored[2].id} and hits[1].id == later[0].id
        burst = {turn.id for turn in stored}
        # The burst's other pieces come after every other hit.
        assert [hit.id in burst for hit in hits] == [True, False, False, True, True]
        assert all(hit.content == hit.turn.content and len(hit.source_turn_ids) == 1 for hit in hits if hit.turn)
    with Memory(home, embedder=HashEmbedder(), background=False, join_bursts=False) as memory:
        hits = memory.search("pottery class", user_id="u", limit=3)
        assert {stored[1].id, stored[2].id} <= {hit.id for hit in hits}  # no piece is moved back


def test_a_piece_of_a_burst_is_found_by_meaning_through_the_pieces_before_it(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        memory.add("signed up for the pottery class", user_id="u", session_id="s", timestamp="2025-03-01T10:00:00Z")
        piece = memory.add("starts next week", user_id="u", session_id="s", timestamp="2025-03-01T10:00:20Z")[0]
        others = ["the weather is nice", "the yoga class was full at noon", "my dance class is on sundays", "it rained"]
        for hour, chat in enumerate(others):
            memory.add(chat, user_id="u", session_id="s", timestamp=f"2025-03-01T1{hour + 1}:00:00Z")

        def rank_of_piece(opened: Memory) -> int:
            hits = opened.search("pottery class", user_id="u", mode="vector", limit=6)
            return next(hit.ranks["vector"] for hit in hits if hit.id == piece.id)

        assert rank_of_piece(memory) == 2  # after the piece that names it, before every other message
        added = memory.parts.store.vectors_for(memory.embedder.model_id, [2])[2]
    with Memory(home, embedder=HashEmbedder(dimension=256), background=False) as reindexed:  # another model: reindexed
        assert rank_of_piece(reindexed) == 2
    texts = ["starts next week", "signed up for the pottery class\nstarts next week"]
    alone, joined = HashEmbedder().embed_documents(texts)
    assert np.allclose(added, normalize_rows((alone + joined)[None])[0])  # the mean of the piece's and the burst's


def test_a_deleted_message_leaves_no_trace_in_the_vectors_of_its_bursts_later_pieces(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        secret = memory.add("my diagnosis is lymphoma", user_id="u", session_id="s", timestamp="2025-03-01T10:00:00Z")
        memory.add("please keep it between us", user_id="u", session_id="s", timestamp="2025-03-01T10:00:20Z")
        memory.add("see you", user_id="u", session_id="s", timestamp="2025-03-01T11:00:00Z")
        before = memory.parts.store.vectors_for(memory.embedder.model_id, [2])[2]
        memory.delete(secret[0].id, user_id="u")
        after = memory.parts.store.vectors_for(memory.embedder.model_id, [2])[2]
        alone = HashEmbedder().embed_documents(["please keep it between us"])[0]
        assert not np.allclose(before, alone) and np.allclose(after, alone)
        memory.add("a new burst", user_id="u", session_id="t", timestamp="2025-03-02T10:00:00Z")
        memory.add("goes on", user_id="u", session_id="t", timestamp="2025-03-02T10:00:10Z")
        assert memory.prune(user_id="u", tier="episodic", keep_last=1) == 3
        kept = memory.history(user_id="u")
        assert [turn.content for turn in kept] == ["goes on"]
        (seq,) = [int(s) for s in memory.parts.store.filtered_seqs("u", SearchFilters())]
        vector = memory.parts.store.vectors_for(memory.embedder.model_id, [seq])[seq]
        assert np.allclose(vector, HashEmbedder().embed_documents(["goes on"])[0])


def test_reindex_embeds_a_burst_as_add_did_with_another_users_messages_in_between(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        said = [("u", "signed up for pottery", 0), ("v", "hello there", 5), ("u", "starts soon", 10)]
        for user, text, second in said:
            memory.add(text, user_id=user, session_id="s", timestamp=f"2025-03-01T10:00:{second:02d}Z")
        added = memory.parts.store.vectors_for(memory.embedder.model_id, [3])[3]
    other = HashEmbedder(dimension=256)
    with Memory(home, embedder=other, background=False) as reindexed:  # another model: every turn embedded again
        again = reindexed.parts.store.vectors_for(other.model_id, [3])[3]
    for embedder, vector in ((HashEmbedder(), added), (other, again)):
        alone, joined = embedder.embed_documents(["starts soon", "signed up for pottery\nstarts soon"])
        assert np.allclose(vector, normalize_rows((alone + joined)[None])[0])
