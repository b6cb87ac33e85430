"""The public ``Memory`` API end to end, backend by backend: what a user sees must not depend on the store."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from memstrata import ConfigError, IdConflict, InvalidInput, Memory, NotFound, Role, StorageError
from memstrata.retrieval import pipeline
from memstrata.storage.base import Job
from tests.inputs import distinct_words

T0 = datetime(2024, 3, 1, 12, tzinfo=UTC)
MODES = ("hybrid", "fulltext", "vector")


def _exchange(memory: Memory, text: str, reply: str = "Noted.", *, user: str = "ana", session: str = "s1") -> None:
    memory.add(
        [{"role": "user", "content": text}, {"role": "assistant", "content": reply}], user_id=user, session_id=session
    )


# -- writing and reading ---------------------------------------------------------------------


def test_add_get_and_idempotent_retries(memory: Memory) -> None:
    moment = datetime(2023, 7, 9, 23, 59, 58, 123456, tzinfo=UTC)
    [turn] = memory.add("I moved to Lisbon", user_id="ana", id="m1", timestamp=moment, metadata={"k": [1, "v"]})
    assert memory.get("m1", user_id="ana") == turn
    assert turn.created_at == moment and turn.metadata == {"k": [1, "v"]}
    assert memory.add("I moved to Lisbon", user_id="ana", id="m1") == [turn]
    with pytest.raises(IdConflict):
        memory.add("I moved to Porto", user_id="ana", id="m1")
    with pytest.raises(IdConflict):
        memory.add([{"content": "new one", "id": "m2"}, {"content": "changed", "id": "m1"}], user_id="ana")
    with pytest.raises(NotFound):
        memory.get("m2", user_id="ana")
    assert [t.id for t in memory.history(user_id="ana")] == ["m1"]
    with pytest.raises(NotFound):
        memory.get("m1", user_id="bob")


def test_history_orders_pages_and_scopes(memory: Memory) -> None:
    for minutes, (text, session) in enumerate([("first", "s1"), ("second", "s2"), ("third", "s1")]):
        memory.add(text, user_id="ana", session_id=session, timestamp=T0 + timedelta(minutes=minutes))
    memory.add("tied a", user_id="ana", session_id="s3", timestamp=T0)
    memory.add("tied b", user_id="ana", session_id="s3", timestamp=T0)
    assert [t.content for t in memory.history(user_id="ana")] == ["first", "tied a", "tied b", "second", "third"]
    assert [t.content for t in memory.history(user_id="ana", session_id="s1", newest_first=True)] == ["third", "first"]
    assert [t.content for t in memory.history(user_id="ana", limit=2, offset=1)] == ["tied a", "tied b"]


def test_search_modes_find_the_right_turn(memory: Memory) -> None:
    memory.add(
        [
            {"content": "I moved to Lisbon last spring"},
            {"content": "My favourite food is spicy ramen"},
            {"content": "The quarterly report is due on Friday"},
        ],
        user_id="ana",
    )
    for mode in MODES:
        hits = memory.search("spicy ramen", user_id="ana", mode=mode)
        assert hits[0].content == "My favourite food is spicy ramen", mode
        assert hits[0].tier == "episodic" and hits[0].turn is not None and hits[0].source_turn_ids == (hits[0].id,)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert set(memory.search("spicy ramen", user_id="ana")[0].ranks) == {"fulltext", "vector"}
    assert memory.search("Friday report", user_id="ana", mode="fulltext")[0].content == (
        "The quarterly report is due on Friday"
    )


def test_diversity_moves_a_repeat_below_something_new(memory: Memory) -> None:
    memory.add(
        [
            {"content": "I love spicy ramen"},
            {"content": "I love spicy ramen!"},
            {"content": "spicy tacos are my other love"},
            {"content": "The quarterly report is due on Friday"},
        ],
        user_id="ana",
    )
    plain = [hit.content for hit in memory.search("love spicy ramen", user_id="ana", limit=3)]
    assert set(plain[:2]) == {"I love spicy ramen", "I love spicy ramen!"}
    varied = [hit.content for hit in memory.search("love spicy ramen", user_id="ana", limit=3, diversity=0.5)]
    assert varied[0] == plain[0] and varied[1].rstrip("!") != varied[0].rstrip("!")
    assert [hit.content for hit in memory.search("love spicy ramen", user_id="ana", limit=3, diversity=0)] == plain
    for bad in (-0.1, 1.1, float("nan"), True, "0.5"):
        with pytest.raises(InvalidInput, match="diversity"):
            memory.search("ramen", user_id="ana", diversity=bad)  # type: ignore[arg-type]


def test_search_filters_agree_across_modes(memory: Memory) -> None:
    memory.add("coffee in the morning session one", user_id="ana", session_id="s1", agent_id="a1", timestamp=T0)
    memory.add(
        [{"role": "assistant", "content": "coffee reply from the assistant"}],
        user_id="ana",
        session_id="s1",
        agent_id="a1",
        timestamp=T0 + timedelta(hours=1),
    )
    memory.add("coffee talk in session two", user_id="ana", session_id="s2", agent_id="a2", timestamp=T0 + timedelta(1))
    memory.add("coffee without a session", user_id="ana", timestamp=T0 + timedelta(days=2))

    def contents(**kwargs: Any) -> set[str]:
        results: list[set[str]] = [
            {h.content for h in memory.search("coffee", user_id="ana", mode=mode, **kwargs)} for mode in MODES
        ]
        assert results[0] == results[1] == results[2], kwargs
        return results[0]

    assert len(contents()) == 4
    assert contents(session_id="s1") == {"coffee in the morning session one", "coffee reply from the assistant"}
    assert contents(agent_id="a2") == {"coffee talk in session two"}
    assert contents(roles=["assistant"]) == {"coffee reply from the assistant"}
    assert contents(roles=[Role.USER], session_id="s1") == {"coffee in the morning session one"}
    assert contents(after=T0 + timedelta(days=1)) == {"coffee talk in session two", "coffee without a session"}
    assert contents(before=T0 + timedelta(hours=1)) == {"coffee in the morning session one"}
    assert contents(session_id="nope") == set()


def test_a_search_narrowed_to_an_agent_or_a_session_ranks_turns_by_what_was_said_in_it(memory: Memory) -> None:
    reply = "Thanks, anything else I can help with?"
    said = [
        (reply, "s0", "support"),  # the control: nothing another agent said is near it
        ("Let us talk about the weather forecast for the weekend.", "s0", "support"),
        (reply, "s1", "support"),  # the same words, right before another agent's turn
        ("Diagnosis: chlamydia, prescribe doxycycline.", "s1", "medical"),
    ]
    for minute, (text, session, agent) in enumerate(said):
        memory.add(text, user_id="ana", session_id=session, agent_id=agent, timestamp=T0 + timedelta(minutes=minute))
    ids = [turn.id for turn in memory.history(user_id="ana")]
    control, target = ids[0], ids[2]
    for query in ("chlamydia", "chlamydia doxycycline"):
        # Only the medical agent said it: the support agent's search finds it in no text of its own.
        hits = memory.search(query, user_id="ana", agent_id="support", mode="fulltext")
        assert hits == [], query
    for scope in ({"agent_id": "support"}, {"session_id": "s1"}, {"session_id": "s0"}):
        # The same words rank the same whatever the query, as nothing in scope tells them apart:
        # what was said around one of them, outside the scope, does not count.
        orders = [
            [hit.id for hit in memory.search(query, user_id="ana", mode="vector", **scope) if hit.content == reply]  # type: ignore[arg-type]
            for query in ("chlamydia doxycycline", "syphilis penicillin")
        ]
        assert orders[0] == orders[1] and orders[0] in ([control, target], [control], [target]), scope


def test_a_date_the_query_names_brings_that_days_turns_forward(
    open_memory: Callable[..., Memory], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = open_memory(search_candidates=5)
    for day in range(12):  # turns full text prefers, none of them on the day asked about
        memory.add(
            "Did I go hiking? Hiking, hiking and more hiking",
            user_id="ana",
            session_id=f"s{day}",
            timestamp=T0 + timedelta(day),
        )
    [walk] = memory.add(
        "Where did I go? Hiking in the pine woods with my sister",
        user_id="ana",
        session_id="walk",
        timestamp=datetime(2023, 11, 9, 15, tzinfo=UTC),
    )
    for mode in MODES:
        dated = memory.search("Where did I go hiking on 9 November 2023?", user_id="ana", mode=mode, limit=5)
        assert dated[0].id == walk.id, mode
    for mode in ("hybrid", "fulltext"):  # without the date, the walk is not even a candidate
        undated = memory.search("Where did I go hiking?", user_id="ana", mode=mode, limit=5)
        assert walk.id not in {hit.id for hit in undated}, mode
    # The filters still hold: a named day outside them adds nothing.
    elsewhere = memory.search("hiking on 9 November 2023", user_id="ana", after=T0, limit=20)
    assert walk.id not in {hit.id for hit in elsewhere}
    within = memory.context("Where did I go hiking on 9 November 2023?", user_id="ana", token_budget=100)
    assert walk.id in {item.id for item in within.items}
    # Dates that hold more turns than the limit are not searched on their own.
    monkeypatch.setattr(pipeline, "DATED_TURNS_LIMIT", 0)
    broad = memory.search("Where did I go hiking on 9 November 2023?", user_id="ana", mode="fulltext", limit=5)
    assert walk.id not in {hit.id for hit in broad}


def test_an_unknown_time_zone_is_invalid_input_and_reads_nothing(memory: Memory) -> None:
    memory.add("a note", user_id="ana")
    for bad in ("Mars/Olympus", "", "../etc/passwd", "Europe", "UTC\x00", 5):
        with pytest.raises(InvalidInput, match="IANA"):
            memory.search("note", user_id="ana", timezone=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput, match="IANA"):
            memory.context("note", user_id="ana", timezone=bad)  # type: ignore[arg-type]


def test_a_relative_date_in_the_query_is_read_against_today(open_memory: Callable[..., Memory]) -> None:
    memory = open_memory(search_candidates=5)
    now = datetime.now(UTC)
    for day in range(12):  # turns full text prefers, said months ago
        memory.add(
            "Did I go hiking? Hiking, hiking and more hiking",
            user_id="ana",
            session_id=f"s{day}",
            timestamp=now - timedelta(days=200 - day),
        )
    [walk] = memory.add(
        "Where did I go? Hiking in the pine woods with my sister",
        user_id="ana",
        session_id="walk",
        timestamp=now - timedelta(days=3),
    )
    for mode in MODES:
        recent = memory.search("Where did I go hiking last week?", user_id="ana", mode=mode, limit=5)
        assert recent[0].id == walk.id, mode
    within = memory.context("Where did I go hiking last week?", user_id="ana", token_budget=100)
    assert walk.id in {item.id for item in within.items}


@pytest.mark.parametrize("per_call", [False, True], ids=["setting", "argument"])
@pytest.mark.parametrize("zone", ["America/Los_Angeles", "UTC"])
def test_dates_are_read_in_the_configured_time_zone(
    open_memory: Callable[..., Memory], zone: str, per_call: bool
) -> None:
    # Per call, the argument wins over a setting that reads these two turns the other way
    # (Tokyo puts them on UTC's days, Honolulu on Los Angeles's).
    other = "Asia/Tokyo" if zone != "UTC" else "Pacific/Honolulu"
    memory = open_memory(timezone=other) if per_call else open_memory(timezone=zone)
    asked = {"timezone": zone} if per_call else {}
    los_angeles = ZoneInfo("America/Los_Angeles")
    # 9 August late in Los Angeles is 10 August in UTC; 9 August early in UTC is 8 August there.
    [late] = memory.add(
        "Hiking in the pine woods with my sister yesterday",
        user_id="ana",
        timestamp=datetime(2022, 8, 9, 23, 30, tzinfo=los_angeles),
    )
    [early] = memory.add(
        "Hiking in the pine woods with my brother yesterday",
        user_id="ana",
        timestamp=datetime(2022, 8, 9, 3, tzinfo=UTC),
    )
    query = "Where did I go hiking on 9 August 2022?"
    said_that_day = late if zone != "UTC" else early
    for mode in MODES:
        assert memory.search(query, user_id="ana", mode=mode, **asked)[0].id == said_that_day.id, mode
    block = memory.context(query, user_id="ana", token_budget=200, verbatim=True, **asked).text
    if zone == "UTC":
        assert "[Wednesday 10 August 2022]\nuser: Hiking in the pine woods with my sister" in block
        assert "[yesterday = 9 August 2022]" in block and "[yesterday = 8 August 2022]" in block
    else:
        assert "[Tuesday 9 August 2022]\nuser: Hiking in the pine woods with my sister" in block
        assert "[Monday 8 August 2022]\nuser: Hiking in the pine woods with my brother" in block
        assert "[yesterday = 8 August 2022]" in block and "[yesterday = 7 August 2022]" in block


@pytest.mark.parametrize(
    "query",
    ['"', "NEAR(a b)", "a AND OR NOT b", "'; DROP TABLE turns; --", "%_%", "who is it", "laſt week, on 9 Auguſt 2022"],
)
def test_search_syntax_is_only_words(memory: Memory, query: str) -> None:
    memory.add("a plain note about NEAR and AND words, who is it", user_id="ana")
    for mode in MODES:
        assert isinstance(memory.search(query, user_id="ana", mode=mode), list)
    assert len(memory.history(user_id="ana")) == 1


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("ana@example.com", "my address is ana@example.com"),
        ("example", "my address is ana@example.com"),
        ("docs.python.org", "see https://docs.python.org/3/ for more"),
        ("python", "see https://docs.python.org/3/ for more"),
        ("/etc/hosts", "edit /etc/hosts please"),
        ("v2.4.1", "we shipped v2.4.1 today"),
        ("3.14", "pi is roughly 3.14 right"),
        ("report.pdf", "attached report.pdf for you"),
        ("-5 degrees", "it was -5 degrees"),
        ("username", "the placeholder <username> must be replaced"),
        ("snake_case", "names in snake_case please"),
    ],
)
def test_full_text_finds_words_joined_by_punctuation(memory: Memory, query: str, text: str) -> None:
    [turn] = memory.add(text, user_id="ana")
    memory.add("an unrelated note about tea", user_id="ana")
    assert [hit.id for hit in memory.search(query, user_id="ana", mode="fulltext")][:1] == [turn.id]


@pytest.mark.parametrize("word", ["İstanbul", "ΣΟΦΟΣ", "Straße", "ÉRIC", "Ωmega"])
def test_full_text_finds_a_word_by_itself_whatever_its_case(memory: Memory, word: str) -> None:
    [turn] = memory.add(f"a token {word} here", user_id="ana")
    assert [hit.id for hit in memory.search(word, user_id="ana", mode="fulltext")] == [turn.id]
    # Its own search terms go to a derived item's index too.
    assert memory.search(f"{word}?", user_id="ana", mode="fulltext")[0].id == turn.id


def test_users_are_isolated(memory: Memory) -> None:
    [ana] = memory.add("shared sentence about tea", user_id="ana")
    [bob] = memory.add("shared sentence about tea", user_id="bob")
    for mode in MODES:
        assert [h.id for h in memory.search("tea", user_id="ana", mode=mode)] == [ana.id]
        assert [h.id for h in memory.search("tea", user_id="bob", mode=mode)] == [bob.id]
        assert memory.search("tea", user_id="carol", mode=mode) == []
    with pytest.raises(NotFound):
        memory.delete(ana.id, user_id="bob")
    assert memory.forget(user_id="carol").turns == 0
    memory.delete(ana.id, user_id="ana")
    assert [h.id for h in memory.search("tea", user_id="bob")] == [bob.id]
    assert memory.search("tea", user_id="ana") == []


def test_delete_and_forget_remove_from_every_view(memory: Memory) -> None:
    [gone] = memory.add("the secret lighthouse code", user_id="ana", session_id="s1")
    memory.add("another lighthouse in session two", user_id="ana", session_id="s2")
    assert len(memory.search("lighthouse", user_id="ana")) == 2  # loads the vector index
    memory.delete(gone.id, user_id="ana")
    with pytest.raises(NotFound):
        memory.get(gone.id, user_id="ana")
    for mode in MODES:
        assert gone.id not in {h.id for h in memory.search("secret lighthouse", user_id="ana", mode=mode)}
    deletion = memory.forget(user_id="ana", session_id="s2")
    assert deletion.turns == 1 and deletion.session_id == "s2"
    assert memory.history(user_id="ana") == [] and memory.search("lighthouse", user_id="ana") == []


def test_vacuum_after_forget_shrinks_the_store_and_changes_no_answer(memory: Memory) -> None:
    for n in range(60):
        _exchange(memory, f"ana's long note {n}: " + "the garden needs water " * 40, user="ana")
        _exchange(memory, f"bob planted tulips in bed {n}", user="bob", session="s2")
    memory.flush()
    memory.forget(user_id="ana")
    before = {mode: memory.search("tulips bed 7", user_id="bob", mode=mode) for mode in MODES}
    history = memory.history(user_id="bob", limit=200)

    report = memory.vacuum()
    assert report.complete and report.seconds >= 0
    assert 0 < report.bytes_after < report.bytes_before
    assert {mode: memory.search("tulips bed 7", user_id="bob", mode=mode) for mode in MODES} == before
    assert memory.history(user_id="bob", limit=200) == history
    _exchange(memory, "bob waters the tulips", user="bob", session="s2")  # and it takes writes on
    assert len(memory.history(user_id="bob", limit=200)) == len(history) + 2


def test_a_second_memory_sees_the_first_ones_writes(open_memory: Callable[..., Memory]) -> None:
    first, second = open_memory(), open_memory()
    assert second.search("harbour", user_id="ana") == []
    [turn] = first.add("the harbour at dawn", user_id="ana")
    for mode in MODES:
        assert [h.id for h in second.search("harbour dawn", user_id="ana", mode=mode)] == [turn.id]
    first.delete(turn.id, user_id="ana")
    assert second.search("harbour dawn", user_id="ana", mode="fulltext") == []


# -- moving ---------------------------------------------------------------------------------


@pytest.mark.parametrize("embeddings", [False, True])
def test_export_import_round_trip(
    open_memory: Callable[..., Memory], tmp_path: Path, storage_url: str, embeddings: bool
) -> None:
    source = open_memory()
    source.add([{"content": "I live in Porto", "name": "Ana"}], user_id="ana", session_id="s", metadata={"x": 1})
    source.add("bob's own note", user_id="bob")
    report = source.export(tmp_path / "all.jsonl", embeddings=embeddings)
    assert (report.turns, report.embeddings) == (2, 2 if embeddings else 0)
    lines = (tmp_path / "all.jsonl").read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line) for line in lines)  # header, two turns, end line
    original = {turn.id: turn for user in ("ana", "bob") for turn in source.history(user_id=user)}
    source.forget(user_id="ana")
    source.forget(user_id="bob")
    imported = source.import_(tmp_path / "all.jsonl")
    assert (imported.turns, imported.skipped) == (2, 0)
    assert {turn.id: turn for user in ("ana", "bob") for turn in source.history(user_id=user)} == original
    assert source.import_(tmp_path / "all.jsonl").skipped == 2
    assert source.search("Porto", user_id="ana")[0].content == "I live in Porto"
    one = source.export(tmp_path / "bob.jsonl", user_id="bob")
    assert one.turns == 1


def test_an_export_imported_twice_is_skipped_the_second_time_whatever_the_store_does_to_numbers(
    open_memory: Callable[..., Memory], tmp_path: Path
) -> None:
    # Written by SQLite, which keeps 1e+23 as a float; PostgreSQL's jsonb hands it back as 10**23.
    header = {"kind": "memstrata-export", "version": 2, "embedding_model": "none"}
    turn = {
        "kind": "turn",
        "id": "n-1",
        "user_id": "ana",
        "role": "user",
        "content": "big numbers",
        "created_at": "2024-01-01T00:00:00+00:00",
        "metadata": {"n": 1e23, "m": [2.0, 1e300], "k": -0.0},
    }
    backup = tmp_path / "backup.jsonl"
    lines = (header, turn, {"kind": "end", "turns": 1})
    backup.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    memory = open_memory()
    assert memory.import_(backup).turns == 1
    assert memory.import_(backup).skipped == 1


# -- the tiers, through flush() ------------------------------------------------------------------


def test_tier_work_builds_cells_profile_patterns_graph_and_segments(open_memory: Callable[..., Memory]) -> None:
    memory = open_memory(working_capacity=2)
    _exchange(memory, "I live in Porto.")
    _exchange(memory, "I met Caroline and Melanie at the Lisbon Book Fair.")
    _exchange(memory, "Just give me the code, no explanation.")
    _exchange(memory, "Give me the code first please.")
    _exchange(memory, "I moved to Lisbon last month.")
    memory.flush()
    history = memory.cells(user_id="ana", attribute="location", include_superseded=True)
    assert [cell.value for cell in history] == ["Lisbon", "Porto"]
    assert history[1].superseded_by == history[0].id and history[0].is_current
    assert memory.profile(user_id="ana").get("location") == "Lisbon"
    patterns = memory.patterns(user_id="ana")
    assert patterns and patterns[0].count >= 2
    graph = memory.graph(user_id="ana", query="What does Caroline do?")
    assert "Caroline" in {node.name for node in graph.nodes}
    assert any("Caroline" in (edge.source, edge.target) for edge in graph.edges)
    report = memory.inspect(user_id="ana")
    assert len(report.working) == 4 and report.pending_jobs == 0
    assert report.counts["midterm_active"] + report.counts["midterm_archived"] >= 1
    assert report.counts["episodic"] == 10
    assert {"supersession"} <= {event.kind for event in report.events}
    hits = memory.search("Lisbon", user_id="ana", tiers=("longterm", "midterm"), limit=20)
    assert {"longterm", "midterm"} <= {hit.tier for hit in hits}
    assert all(hit.source_turn_ids for hit in hits)
    assert memory.inspect(user_id="bob").counts["episodic"] == 0


def test_the_graph_finds_names_that_start_with_a_letter_beyond_ascii(memory: Memory) -> None:
    memory.add("I had lunch with Élodie and Marta in Lisbon yesterday.", user_id="ana")
    memory.add("Élodie and Marta are planning a trip to Oslo with Øystein.", user_id="ana")
    memory.flush()
    graph = memory.graph(user_id="ana", query="Who is Élodie?")
    assert "Élodie" in {node.name for node in graph.nodes}
    assert any("Élodie" in (edge.source, edge.target) for edge in graph.edges)
    # Every name an edge touches is among the nodes.
    around = memory.graph(user_id="ana", query="Who is Marta?")
    assert {name for edge in around.edges for name in (edge.source, edge.target)} <= {n.name for n in around.nodes}


def test_visits_promote_segments_and_consolidation_summarises(open_memory: Callable[..., Memory]) -> None:
    memory = open_memory(working_capacity=1, promote_heat=3.0)
    _exchange(memory, "The sailing regatta in Cascais starts at nine.")
    _exchange(memory, "Unrelated: buy printer toner.")
    _exchange(memory, "Another unrelated thing about taxes.")
    memory.flush()
    for _ in range(3):
        memory.search("sailing regatta Cascais", user_id="ana")
        memory.flush()
    report = memory.inspect(user_id="ana")
    assert any(segment.visits >= 1 for segment in report.segments)
    assert report.counts["scenes"] >= 1 and "promotion" in {event.kind for event in report.events}
    for n in range(4):
        _exchange(memory, f"The garden shed roof leaks near the window, repair attempt {n} failed.")
    for n in range(4):
        _exchange(memory, f"Quarterly invoice numbers for Acme Corp were wrong in batch {n}.")
    made = memory.consolidate(user_id="ana")
    assert made and all(item.summary and item.source_turn_ids and 0 <= item.tes <= 1 for item in made)
    assert memory.consolidations(user_id="ana")[: len(made)] == sorted(made, key=lambda c: c.id, reverse=True)
    assert memory.consolidate(user_id="ana") == []


def test_deleting_and_forgetting_reach_the_tiers(open_memory: Callable[..., Memory]) -> None:
    memory = open_memory(working_capacity=2)
    _exchange(memory, "I live in Porto.")
    for n in range(4):
        _exchange(memory, f"Filler message {n}")
    memory.flush()
    source = memory.cells(user_id="ana")[0].source_turn_id
    memory.delete(source, user_id="ana")
    memory.flush()
    assert memory.cells(user_id="ana", include_superseded=True) == []
    assert not any("Porto" in hit.content for hit in memory.search("Porto", user_id="ana", tiers=("longterm",)))
    memory.consolidate(user_id="ana")
    memory.forget(user_id="ana")
    assert all(value == 0 for value in memory.inspect(user_id="ana").counts.values())


def test_a_fact_said_again_outlives_the_turn_that_said_it_first(memory: Memory) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    [first] = memory.add("I live in Porto, by the old bridge", user_id="ana", timestamp=start)
    [again] = memory.add("Yes, I live in Porto", user_id="ana", timestamp=start + timedelta(days=5))
    memory.add("And I live in Porto still", user_id="ana", timestamp=start + timedelta(days=9))
    memory.flush()
    [cell] = memory.cells(user_id="ana")
    assert cell.source_turn_id == first.id
    memory.delete(first.id, user_id="ana")  # no job needed: the fact moves in the same transaction
    [kept] = memory.cells(user_id="ana", include_superseded=True)
    # Valid from the first turn that still says it: the deleted turn's time goes with it.
    assert (kept.id, kept.value, kept.source_turn_id, kept.valid_from) == (cell.id, "Porto", again.id, again.created_at)
    assert "bridge" not in kept.content  # nothing of the deleted turn stays in the fact
    assert memory.profile(user_id="ana")["location"] == "Porto"
    found = [hit for hit in memory.search("Porto", user_id="ana", tiers=("longterm",)) if hit.tier == "longterm"]
    assert [hit.source_turn_ids for hit in found] == [(again.id,)]
    assert not [hit for hit in memory.search("bridge", user_id="ana", tiers=("longterm",)) if hit.tier == "longterm"]
    # Then to the next one, and the last turn that said it takes it along.
    memory.delete(again.id, user_id="ana")
    assert [c.value for c in memory.cells(user_id="ana")] == ["Porto"]
    for turn in memory.history(user_id="ana"):
        memory.delete(turn.id, user_id="ana")
    assert memory.cells(user_id="ana", include_superseded=True) == []
    assert "location" not in memory.profile(user_id="ana")


def test_deleting_a_change_of_value_leaves_the_value_a_later_turn_says_again(memory: Memory) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    memory.add("I live in Porto", user_id="ana", timestamp=start)
    [moved] = memory.add("I moved to Lisbon", user_id="ana", timestamp=start + timedelta(days=30))
    [again] = memory.add("I live in Lisbon", user_id="ana", timestamp=start + timedelta(days=60))
    memory.flush()
    memory.delete(moved.id, user_id="ana")
    history = memory.cells(user_id="ana", include_superseded=True)
    assert [(cell.value, cell.is_current) for cell in history] == [("Lisbon", True), ("Porto", False)]
    assert history[0].source_turn_id == again.id and history[1].superseded_by == history[0].id
    assert memory.profile(user_id="ana")["location"] == "Lisbon"
    assert [cell.value for cell in memory.cells(user_id="ana")] == ["Lisbon"]


def test_a_bulk_prune_hands_a_fact_to_a_turn_it_keeps_in_its_own_spelling(memory: Memory) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    memory.add("I live in PORTO, near the secret river", user_id="ana", timestamp=start)
    memory.add("I live in PORTO", user_id="ana", timestamp=start + timedelta(minutes=1))
    # One call, so the test stays quick; the deletion spans more than one chunk of 500.
    notes = [{"role": "user", "content": f"note number {n}"} for n in range(510)]
    memory.add(notes, user_id="ana", timestamp=start + timedelta(minutes=2))
    for text, minute in (("I live in Porto.", 700), ("I live in porto!", 800)):
        memory.add(text, user_id="ana", timestamp=start + timedelta(minutes=minute))
    memory.flush()
    [last] = memory.history(user_id="ana", newest_first=True, limit=1)
    memory.prune(user_id="ana", tier="episodic", keep_last=1)
    [kept] = memory.cells(user_id="ana", include_superseded=True)
    assert (kept.value, kept.source_turn_id, kept.valid_from) == ("porto", last.id, last.created_at)
    assert memory.profile(user_id="ana")["location"] == "porto"
    derived = [
        hit for hit in memory.search("secret river", user_id="ana", tiers=("longterm",)) if hit.tier != "episodic"
    ]
    assert derived == [] and "secret" not in kept.content and "PORTO" not in kept.content


def test_a_fact_said_again_keeps_no_other_fact_its_turns_said(memory: Memory) -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    [first] = memory.add("I live in Porto.", user_id="ana", timestamp=start)
    memory.add("I live in Porto. I work at Acme.", user_id="ana", timestamp=start + timedelta(days=1))
    memory.add("I work at Beta now.", user_id="ana", timestamp=start + timedelta(days=2))
    memory.flush()
    memory.prune(user_id="ana", tier="longterm", keep_last=0)  # the superseded Acme goes, as asked
    memory.delete(first.id, user_id="ana")
    memory.flush()
    cells = memory.cells(user_id="ana", include_superseded=True)
    assert sorted((cell.attribute, cell.value) for cell in cells) == [("employer", "Beta"), ("location", "Porto")]


def test_a_restatement_of_a_fact_deleted_meanwhile_stores_the_fact_from_its_turn(
    open_memory: Callable[..., Memory],
) -> None:
    memory = open_memory()
    [first] = memory.add("I live in Porto.", user_id="ana")
    memory.flush()
    [again] = memory.add("I live in Porto.", user_id="ana")
    store = memory.parts.store
    original = store.restate_cell

    def deleted_first(user_id: str, cell_id: str, turn_seq: int, value: str, content: str) -> bool:
        # Another process deletes the fact's turn between this job's read of the slot and its note.
        if store.cells(user_id, limit=None) and memory.history(user_id="ana")[0].id == first.id:
            memory.delete(first.id, user_id="ana")
        return original(user_id, cell_id, turn_seq, value, content)

    store.restate_cell = deleted_first  # type: ignore[method-assign]
    memory.flush()
    [cell] = memory.cells(user_id="ana")
    assert (cell.value, cell.source_turn_id) == ("Porto", again.id)


def test_prune_keeps_the_newest(memory: Memory) -> None:
    for n in range(5):
        memory.add(f"Message {n}", user_id="ana", timestamp=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=n))
    assert memory.prune(user_id="ana", tier="episodic", keep_last=3) == 2
    assert [t.content for t in memory.history(user_id="ana")] == ["Message 2", "Message 3", "Message 4"]
    assert len(memory.search("Message", user_id="ana", mode="vector", limit=10)) == 3
    assert "retention" in {event.kind for event in memory.inspect(user_id="ana").events}


def test_a_short_turn_between_long_ones_can_be_deleted(memory: Memory) -> None:
    # Deleting re-indexes the neighbours with each other's text: that must stay indexable.
    texts = [distinct_words(17_000, seed) for seed in range(3)] + ["short"]
    texts += [distinct_words(17_000, seed) for seed in range(3, 6)]
    for number, text in enumerate(texts):
        memory.add(text, user_id="ana", session_id="s", id=f"t{number}")
    memory.delete("t3", user_id="ana")
    assert [turn.id for turn in memory.history(user_id="ana")] == ["t0", "t1", "t2", "t4", "t5", "t6"]


def test_a_pasted_token_of_capitals_is_no_entity_and_the_rest_is_processed(memory: Memory) -> None:
    memory.add([{"content": "Z" + "A" * 3000}, {"content": "I live in Lisbon and work at Google."}], user_id="ana")
    memory.flush()
    assert memory.inspect(user_id="ana").pending_jobs == 0
    assert memory.profile(user_id="ana").get("location") == "Lisbon"
    assert all(len(entity.name) < 300 for entity in memory.inspect(user_id="ana").entities)


def test_deleting_a_scenes_turns_deletes_the_scene(open_memory: Callable[..., Memory]) -> None:
    memory = open_memory(working_capacity=1, promote_heat=0.5, segment_similarity=-1.0)
    for n in range(6):
        question = f"My diagnosis is Xyloma stage {n}. Can you explain it?"
        memory.add([{"content": question}, {"role": "assistant", "content": "Sure."}], user_id="u", session_id="s")
    memory.flush()
    for _ in range(5):  # visits heat the segment until it is promoted to a scene
        memory.search("Xyloma diagnosis", user_id="u")
        memory.flush()
    assert memory.inspect(user_id="u").counts["scenes"] >= 1
    for turn in memory.history(user_id="u", limit=100):
        memory.delete(turn.id, user_id="u")
    memory.flush()
    counts = memory.inspect(user_id="u").counts
    assert counts["scenes"] == 0 and counts["episodic"] == 0


def test_prune_refuses_a_negative_age_and_survives_huge_ones(memory: Memory) -> None:
    for n in range(3):
        memory.add(f"Message {n}", user_id="ana", timestamp=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=n))
    for bad in (timedelta(seconds=-60), 5, "90d"):
        with pytest.raises(InvalidInput, match="older_than"):
            memory.prune(user_id="ana", tier="episodic", older_than=bad)  # type: ignore[arg-type]
    assert memory.prune(user_id="ana", tier="episodic", older_than=timedelta(days=999_999_999)) == 0
    assert memory.prune(user_id="ana", tier="episodic", keep_last=2**70) == 0
    assert len(memory.history(user_id="ana")) == 3
    assert memory.history(user_id="ana", offset=2**63) == []
    with pytest.raises(InvalidInput, match="newest_first"):
        memory.history(user_id="ana", newest_first="no")  # type: ignore[arg-type]
    for limit in (-1, "x", 2**70):
        with pytest.raises(InvalidInput, match="limit"):
            memory.graph(user_id="ana", query="Message", limit=limit)  # type: ignore[arg-type]


def test_two_memories_flushing_at_once_run_each_job_once(open_memory: Callable[..., Memory]) -> None:
    first, second = open_memory(), open_memory()
    requests = ["Just give me the code, no explanation.", "Give me the code first please.", "Show me code for it"]
    for text in requests * 3:
        first.add(text, user_id="solo", session_id="s")
    first.flush()  # the reference: one worker alone
    for text in requests * 3:
        first.add(text, user_id="duo", session_id="s")
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def flush(memory: Memory) -> None:
        try:
            start.wait()
            memory.flush()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=flush, args=(memory,)) for memory in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    counts = {user: {p.key: p.count for p in second.patterns(user_id=user)} for user in ("solo", "duo")}
    assert counts["duo"] == counts["solo"] and counts["solo"]  # a job run twice would count its patterns twice
    assert second.inspect(user_id="duo").pending_jobs == 0


def test_the_background_worker_runs_jobs_without_flush(open_memory: Callable[..., Memory]) -> None:
    memory = open_memory(background=True, working_capacity=1)
    _exchange(memory, "I live in Porto.")
    deadline = time.monotonic() + 30
    while memory.profile(user_id="ana").get("location") != "Porto":
        assert time.monotonic() < deadline, "the background worker never ran"
        time.sleep(0.05)


def test_flushing_one_user_runs_the_queue_only_as_far_as_that_users_work(open_memory: Callable[..., Memory]) -> None:
    memory = open_memory(working_capacity=1)  # background=False: flush() runs the jobs itself
    _exchange(memory, "I live in Porto.")
    for text in ["I live in Lisbon.", "I work at Tern.", "I have a dog."]:
        memory.add([{"role": "user", "content": text}], user_id="bob", session_id="s")
    memory.flush(user_id="ana")
    assert memory.inspect(user_id="ana").pending_jobs == 0
    assert memory.profile(user_id="ana").get("location") == "Porto"
    assert memory.inspect(user_id="bob").pending_jobs > 0  # queued after Ana's: not Ana's caller's wait
    memory.flush()
    assert memory.inspect(user_id="bob").pending_jobs == 0


def test_a_passing_storage_error_does_not_end_a_flush(open_memory: Callable[..., Memory]) -> None:
    memory = open_memory(background=True, working_capacity=1)
    store = memory.parts.store
    counted = store.count_jobs
    failures = iter([StorageError("database is locked")])

    def count_jobs(user_id: str | None = None) -> int:
        error = next(failures, None)
        if error is not None:
            raise error
        return counted(user_id)

    _exchange(memory, "I live in Porto.")
    store.count_jobs = count_jobs  # type: ignore[method-assign]  # the next count, flush's own, fails once
    memory.flush(user_id="ana", timeout=60)
    assert next(failures, None) is None and memory.inspect(user_id="ana").pending_jobs == 0


def test_flushing_one_user_with_the_background_worker_waits_for_that_users_work(
    open_memory: Callable[..., Memory],
) -> None:
    memory = open_memory(background=True, working_capacity=1)
    _exchange(memory, "I live in Porto.")
    memory.flush(user_id="ana", timeout=60)
    assert memory.inspect(user_id="ana").pending_jobs == 0
    assert memory.profile(user_id="ana").get("location") == "Porto"


def test_flushing_one_user_with_the_background_worker_runs_that_users_work_first(
    open_memory: Callable[..., Memory], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = open_memory(background=True, working_capacity=1)
    run = memory.parts.worker._run
    started: list[str] = []

    def slow_for_bob(job: Job) -> None:  # Bob's backlog takes a while
        started.append(job.user_id)
        if job.user_id == "bob":
            time.sleep(0.3)
        run(job)

    monkeypatch.setattr(memory.parts.worker, "_run", slow_for_bob)
    for _ in range(6):  # queued before Ana's work
        memory.parts.store.enqueue_job("visit", "bob", {"searches": []})
    _exchange(memory, "I live in Porto.")
    memory.flush(user_id="ana", timeout=60)
    assert memory.profile(user_id="ana").get("location") == "Porto"
    # In queue order all six of Bob's would run first; only those the worker took before the
    # flush began (one, or two on a slow machine) may.
    assert "ana" in started and started.index("ana") <= 2, started
    memory.flush(timeout=60)
    assert memory.inspect(user_id="bob").pending_jobs == 0


def test_info_names_the_store_without_secrets(memory: Memory, storage_url: str) -> None:
    memory.add("hello", user_id="ana")
    info = memory.info()
    assert info["counts"]["turns"] == 1 and info["counts"]["users"] == 1
    assert info["counts"][f"vectors[{memory.embedder.model_id}]"] == 1
    assert "password" not in str(info["storage"])
    assert isinstance(info["size_bytes"], int) and info["size_bytes"] > 0


def test_server_side_vector_search_where_the_store_has_an_index(
    open_memory: Callable[..., Memory], storage_url: str
) -> None:
    if storage_url.startswith("sqlite"):
        with pytest.raises(ConfigError, match="vector_search"):
            open_memory(vector_search="server")
        return
    memory = open_memory(vector_search="server")
    memory.add("the lighthouse keeper waves", user_id="ana", session_id="a")
    memory.add("a quiet harbour at dusk", user_id="ana", session_id="b")
    memory.add("the lighthouse keeper waves", user_id="bo", session_id="a")
    hits = memory.search("lighthouse keeper", user_id="ana", mode="vector")
    assert hits[0].content == "the lighthouse keeper waves"
    assert all(hit.turn is not None and hit.turn.user_id == "ana" for hit in hits)
    assert memory.search("harbour", user_id="ana", mode="vector", session_id="b")[0].content.startswith("a quiet")


def test_derived_items_are_found_by_what_the_query_asks_not_whose_name_it_says(memory: Memory) -> None:
    said = [("Caroline", "I love jazz."), ("Caroline", "I love hiking in the hills."), ("Mel", "I love pottery.")]
    for name, text in said:
        memory.add([{"role": "user", "name": name, "content": text}], user_id="ana", session_id="s1")
    memory.flush()
    assert {cell.subject for cell in memory.cells(user_id="ana")} == {"Caroline", "Mel"}

    def facts(query: str) -> list[str]:
        hits = memory.search(query, user_id="ana", tiers=("longterm",))
        return [hit.content for hit in hits if hit.tier == "longterm"]

    # Each cell's text starts with its subject; the name alone would match every fact about Caroline.
    assert facts("What does Caroline think of jazz?") == ["Caroline · likes: jazz — I love jazz."]
    everything_about_caroline = [
        "Caroline · likes: hiking in the hills — I love hiking in the hills.",
        "Caroline · likes: jazz — I love jazz.",
    ]
    # Nothing but a name, or a name and stopwords: the name is all there is to search.
    assert sorted(facts("Caroline")) == sorted(facts("Who is Caroline?")) == everything_about_caroline
    # "say" asks what was said, not about what: the name is what is left to search by.
    assert sorted(facts("What did Caroline say?")) == everything_about_caroline
    assert facts("What did Caroline tell Mel about jazz?") == ["Caroline · likes: jazz — I love jazz."]


def test_a_deletion_by_another_process_does_not_empty_this_ones_results(open_memory: Callable[..., Memory]) -> None:
    server, cli = open_memory(), open_memory()
    for n in range(30):
        server.add(f"apple pie recipe {n}", user_id="ana", session_id="s1")
    tarts = {turn.id for n in range(10) for turn in server.add(f"apple tart idea {n}", user_id="ana", session_id="s2")}
    assert server.search("apple pie", user_id="ana", mode="vector")  # the vector index is loaded now
    cli.forget(user_id="ana", session_id="s1")
    for mode in ("vector", "hybrid"):
        hits = server.search("apple", user_id="ana", mode=mode, limit=5)
        assert len(hits) == 5 and {hit.id for hit in hits} <= tarts, mode
    cli.add("apple crumble", user_id="ana", session_id="s3")
    cli.delete(next(iter(tarts)), user_id="ana")
    block = server.context("apple", user_id="ana", token_budget=200)
    assert "tart" in block.text and "pie" not in block.text
