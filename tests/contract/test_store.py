"""The ``Store`` protocol, backend by backend: turns, seqs, full-text, vectors, deletion, durability of reads."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from memstrata import IdConflict, Role, Scope, SearchFilters, StorageError, Turn
from memstrata.storage.base import ServerSideVectors, TierStore

MODEL = "contract-model"
DIM = 4
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _turn(
    turn_id: str,
    content: str,
    user_id: str = "ana",
    *,
    session_id: str | None = None,
    agent_id: str | None = None,
    role: Role = Role.USER,
    name: str | None = None,
    minutes: int = 0,
) -> Turn:
    return Turn(
        id=turn_id,
        user_id=user_id,
        role=role,
        content=content,
        created_at=T0 + timedelta(minutes=minutes),
        session_id=session_id,
        agent_id=agent_id,
        name=name,
    )


def _vectors(count: int, offset: int = 0) -> np.ndarray:
    return np.roll(np.eye(count, DIM, dtype=np.float32), offset, axis=1)


def _match(store: TierStore, words: str, user_id: str = "ana", filters: SearchFilters | None = None) -> list[int]:
    expression = " OR ".join(f'"{word}"' for word in words.split())
    return [seq for seq, _ in store.fulltext(expression, user_id, filters or SearchFilters(), 10)]


# -- turns ----------------------------------------------------------------------------------


def test_seqs_grow_in_commit_order_and_never_come_back(store: TierStore) -> None:
    first = store.insert_turns([_turn("a", "one"), _turn("b", "two")], None, MODEL)
    assert first == sorted(first) and len(set(first)) == 2
    store.delete("b", "ana")
    [later] = store.insert_turns([_turn("c", "three")], None, MODEL)
    assert later > max(first)
    [reused] = store.insert_turns([_turn("b", "two again")], None, MODEL)
    assert reused > later


def test_the_store_clock_runs_forward_near_this_machines_time(store: TierStore) -> None:
    # The test's database runs on this machine, so its clock is this one's; in production it
    # is the database server's, which every process sharing the store reads alike.
    before = time.time()
    first = store.clock()
    time.sleep(0.01)
    second = store.clock()
    assert before - 1 < first < second < time.time() + 1


def test_turn_round_trips_exactly(store: TierStore) -> None:
    turn = Turn(
        id="full",
        user_id="ana",
        agent_id="agent",
        session_id="s",
        role=Role.TOOL,
        name="calc",
        content="2 + 2 = 4 — ünïcødé 日本語",
        created_at=datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC),
        metadata={"nested": {"list": [1, 2.5, None, True]}, "é": "ü", "big": 2**53 + 1},
        importance=0.25,
    )
    [seq] = store.insert_turns([turn], None, MODEL)
    assert store.get_by_ids(["full"]) == {"full": turn}
    assert store.get_by_ids(["full"])["full"].created_at.utcoffset() == timedelta(0)
    assert store.get_by_seqs([seq], "ana") == {seq: turn}
    assert list(store.iterate("ana")) == [(seq, turn)]
    assert list(store.iterate()) == [(seq, turn)]


def test_reads_are_confined_to_the_user(store: TierStore) -> None:
    [ana, bob] = store.insert_turns([_turn("a", "secret recipe"), _turn("b", "my recipe", "bob")], None, MODEL)
    assert store.get_by_ids(["a", "b"], "ana").keys() == {"a"}
    assert store.get_by_ids(["a", "b"]).keys() == {"a", "b"}
    assert store.get_by_seqs([ana, bob], "bob").keys() == {bob}
    assert store.delete("a", "bob") is None
    assert store.forget(Scope("carol")) == 0
    assert [seq for seq, _ in store.iterate("bob")] == [bob]
    assert store.history(Scope("ana"), limit=10) == [store.get_by_ids(["a"])["a"]]


def test_identical_retry_is_skipped_and_a_different_message_conflicts(store: TierStore) -> None:
    [seq] = store.insert_turns([_turn("a", "original")], _vectors(1), MODEL)
    assert store.insert_turns([_turn("a", "original")], _vectors(1), MODEL) == [seq]
    with pytest.raises(IdConflict):
        store.insert_turns([_turn("new", "fresh"), _turn("a", "changed")], _vectors(2), MODEL)
    with pytest.raises(IdConflict):
        store.insert_turns([_turn("a", "original", user_id="bob")], None, MODEL)
    assert store.get_by_ids(["new", "a"]).keys() == {"a"}
    assert store.counts() == {"turns": 1, "users": 1, "sessions": 1, f"vectors[{MODEL}]": 1}


def test_history_orders_by_time_then_insertion_and_pages(store: TierStore) -> None:
    store.insert_turns(
        [
            _turn("late", "late", minutes=5, session_id="s1"),
            _turn("early", "early", minutes=1, session_id="s2", agent_id="x"),
            _turn("tie1", "tie one", minutes=3, session_id="s1"),
            _turn("tie2", "tie two", minutes=3, session_id="s1"),
        ],
        None,
        MODEL,
    )

    def ids(scope: Scope, **kwargs: object) -> list[str]:
        return [turn.id for turn in store.history(scope, **kwargs)]  # type: ignore[arg-type]

    assert ids(Scope("ana"), limit=10) == ["early", "tie1", "tie2", "late"]
    assert ids(Scope("ana"), limit=10, newest_first=True) == ["late", "tie2", "tie1", "early"]
    assert ids(Scope("ana"), limit=2, offset=1) == ["tie1", "tie2"]
    assert ids(Scope("ana", session_id="s1"), limit=10) == ["tie1", "tie2", "late"]
    assert ids(Scope("ana", agent_id="x"), limit=10) == ["early"]
    assert ids(Scope("bob"), limit=10) == []


def test_iterate_pages_through_many_turns_in_seq_order(store: TierStore) -> None:
    turns = [_turn(f"t{n:04d}", f"note {n}", user_id="ana" if n % 3 else "bob") for n in range(2100)]
    seqs = store.insert_turns(turns, None, MODEL)
    assert [seq for seq, _ in store.iterate()] == seqs
    assert [turn.id for _, turn in store.iterate("bob")] == [turn.id for turn in turns if turn.user_id == "bob"]


# -- full-text ------------------------------------------------------------------------------


def test_fulltext_stems_ranks_and_follows_deletes(store: TierStore) -> None:
    [keeper, harbour, both] = store.insert_turns(
        [
            _turn("a", "the lighthouse keeper", session_id="s1"),
            _turn("b", "a quiet harbour", session_id="s2"),
            _turn("c", "the harbour lighthouse keepers watch the harbour", session_id="s3"),
        ],
        None,
        MODEL,
    )
    assert sorted(_match(store, "keeper")) == sorted([keeper, both])  # stemming: keepers ~ keeper
    assert _match(store, "harbour lighthouse")[0] == both  # the turn matching more terms ranks first
    scores = [score for _, score in store.fulltext('"harbour" OR "lighthouse"', "ana", SearchFilters(), 10)]
    assert scores == sorted(scores, reverse=True) and all(score > 0 for score in scores)
    assert _match(store, "submarine") == []
    store.delete("c", "ana")
    assert _match(store, "harbour") == [harbour]
    store.forget(Scope("ana"))
    assert _match(store, "lighthouse") == []


def test_fulltext_weighs_a_rare_term_above_a_common_one(store: TierStore) -> None:
    common = [_turn(f"c{n}", f"coffee number {n}", session_id=f"c{n}") for n in range(6)]
    store.insert_turns([*common, _turn("twice", "coffee, more coffee", session_id="twice")], None, MODEL)
    [heron] = store.insert_turns(
        [_turn("heron", "yesterday by the river I finally saw a grey heron", session_id="river")], None, MODEL
    )
    # BM25's idf: the one turn naming a heron outranks a short turn that says "coffee" twice.
    assert _match(store, "coffee heron")[0] == heron
    store.insert_turns([_turn("other", "a heron and a heron", user_id="bob", session_id="b")], None, MODEL)
    assert _match(store, "coffee heron")[0] == heron  # PostgreSQL counts per user; FTS5 counts the whole table


def test_fulltext_finds_a_turn_by_its_neighbours_in_the_session(store: TierStore) -> None:
    [question, answer, elsewhere] = store.insert_turns(
        [
            _turn("q", "Where is the lighthouse?", session_id="s"),
            _turn("a", "On the northern cape.", session_id="s", role=Role.ASSISTANT),
            _turn("x", "Unrelated words", session_id="other"),
        ],
        None,
        MODEL,
    )
    assert _match(store, "lighthouse") == [question, answer]  # its own words outrank its neighbour's
    assert _match(store, "cape") == [answer, question]
    assert _match(store, "unrelated") == [elsewhere]  # another session is no neighbour
    [follow_up, goodbye] = store.insert_turns(
        [_turn("f", "Is it still lit?", session_id="s"), _turn("g", "Goodbye then", session_id="s")], None, MODEL
    )
    assert _match(store, "lit")[0] == follow_up
    assert set(_match(store, "lit")) == {question, answer, follow_up, goodbye}  # two turns either side
    assert set(_match(store, "goodbye")) == {answer, follow_up, goodbye}  # three turns away is too far
    store.delete("q", "ana")
    assert _match(store, "lighthouse") == []
    store.delete("f", "ana")
    assert set(_match(store, "goodbye")) == {answer, goodbye}
    store.rebuild_fulltext()
    assert set(_match(store, "goodbye")) == {answer, goodbye} and _match(store, "lighthouse") == []


def test_fulltext_indexes_the_speaker_name(store: TierStore) -> None:
    [seq, _] = store.insert_turns(
        [_turn("a", "I adopted a cat", name="Caroline"), _turn("b", "Nice cat", name="Melanie")], None, MODEL
    )
    assert _match(store, "caroline") == [seq]


def test_fulltext_keeps_stopwords_searchable_and_respects_limit(store: TierStore) -> None:
    store.insert_turns([_turn(f"t{n}", f"who is it number {n}") for n in range(5)], None, MODEL)
    assert len(_match(store, "who is it")) == 5
    assert len(store.fulltext('"number"', "ana", SearchFilters(), 3)) == 3


def test_fulltext_is_confined_to_the_user_and_filters(store: TierStore) -> None:
    seqs = store.insert_turns(
        [
            _turn("a", "coffee in session one", session_id="s1", agent_id="a1", minutes=0),
            _turn("b", "coffee reply", session_id="s1", agent_id="a1", role=Role.ASSISTANT, minutes=60),
            _turn("c", "coffee in session two", session_id="s2", agent_id="a2", minutes=60 * 24),
            _turn("d", "coffee from bob", user_id="bob"),
        ],
        None,
        MODEL,
    )
    a, b, c, d = seqs

    def found(**filters: object) -> set[int]:
        return set(_match(store, "coffee", filters=SearchFilters(**filters)))  # type: ignore[arg-type]

    assert found() == {a, b, c}
    assert set(_match(store, "coffee", "bob")) == {d}
    assert found(session_id="s1") == {a, b}
    assert found(agent_id="a2") == {c}
    assert found(roles=(Role.ASSISTANT,)) == {b}
    assert found(roles=(Role.USER, Role.ASSISTANT), session_id="s1") == {a, b}
    assert found(after=T0 + timedelta(minutes=60)) == {b, c}
    assert found(before=T0 + timedelta(minutes=60)) == {a}
    assert set(store.filtered_seqs("ana", SearchFilters(session_id="s1")).tolist()) == {a, b}
    assert store.filtered_seqs("ana", SearchFilters(roles=(Role.TOOL,))).tolist() == []
    assert len(store.filtered_seqs("ana", SearchFilters(session_id="s1"), limit=1)) == 1
    assert set(store.filtered_seqs("ana", SearchFilters(session_id="s1"), limit=5).tolist()) == {a, b}


@pytest.mark.parametrize("hostile", ['"', '""', "*", "NEAR(a b)", "'; DROP TABLE turns; --", "^x", "a:b", "((", "%_%"])
def test_fulltext_treats_quoted_syntax_as_words(store: TierStore, hostile: str) -> None:
    store.insert_turns([_turn("a", "a plain note about NEAR and AND words")], None, MODEL)
    escaped = hostile.replace('"', '""')
    assert isinstance(store.fulltext(f'"{escaped}"', "ana", SearchFilters(), 5), list)
    assert store.counts()["turns"] == 1


def test_rebuild_fulltext_keeps_search_working(store: TierStore) -> None:
    [seq] = store.insert_turns([_turn("a", "the northern lights")], None, MODEL)
    store.rebuild_fulltext()
    assert _match(store, "northern") == [seq]


# -- vectors --------------------------------------------------------------------------------


def test_vectors_after_catches_up_by_increasing_ids(store: TierStore) -> None:
    seqs = store.insert_turns([_turn("a", "one"), _turn("b", "two", user_id="bob")], _vectors(2), MODEL)
    batch = store.vectors_after(MODEL, "ana", 0)
    assert batch.seqs.tolist() == [seqs[0]]
    np.testing.assert_array_equal(batch.vectors, _vectors(2)[:1])
    assert batch.vectors.dtype == np.float32
    assert store.vectors_after(MODEL, "ana", batch.high_water).seqs.tolist() == []
    [seq_c] = store.insert_turns([_turn("c", "three")], _vectors(3)[2:], MODEL)
    later = store.vectors_after(MODEL, "ana", batch.high_water)
    assert later.seqs.tolist() == [seq_c] and later.high_water > batch.high_water
    empty = store.vectors_after("unknown-model", "ana", 0)
    assert empty.seqs.tolist() == [] and empty.high_water == 0


def test_vectors_after_reads_a_chunk_at_a_time_and_counts_a_users_vectors(store: TierStore) -> None:
    turns = [_turn(f"t{index}", f"turn {index}") for index in range(5)]
    seqs = store.insert_turns([*turns, _turn("b", "two", user_id="bob")], _vectors(6), MODEL)
    assert store.vector_count(MODEL, "ana") == 5 and store.vector_count(MODEL, "bob") == 1
    assert store.vector_count("unknown-model", "ana") == 0
    first = store.vectors_after(MODEL, "ana", 0, 2)
    second = store.vectors_after(MODEL, "ana", first.high_water, 2)
    rest = store.vectors_after(MODEL, "ana", second.high_water, 2)
    assert [first.seqs.tolist(), second.seqs.tolist(), rest.seqs.tolist()] == [seqs[:2], seqs[2:4], seqs[4:5]]
    np.testing.assert_array_equal(np.concatenate([first.vectors, second.vectors, rest.vectors]), _vectors(6)[:5])
    assert store.vectors_after(MODEL, "ana", 0, None).seqs.tolist() == seqs[:5]


def test_replaced_vectors_come_after_the_high_water(store: TierStore) -> None:
    [seq] = store.insert_turns([_turn("a", "one")], _vectors(1), MODEL)
    high_water = store.vectors_after(MODEL, "ana", 0).high_water
    store.put_vectors(MODEL, [seq], _vectors(1, offset=2))
    batch = store.vectors_after(MODEL, "ana", high_water)
    assert batch.seqs.tolist() == [seq]
    np.testing.assert_array_equal(batch.vectors[0], _vectors(1, offset=2)[0])
    np.testing.assert_array_equal(store.vectors_for(MODEL, [seq])[seq], _vectors(1, offset=2)[0])


def test_missing_vectors_are_found_and_filled(store: TierStore) -> None:
    seqs = store.insert_turns([_turn("a", "one"), _turn("b", "two", user_id="bob")], None, MODEL)
    assert store.count_missing_vectors(MODEL) == 2
    assert [(seq, turn.content) for seq, turn in store.turns_missing_vectors(MODEL, 10)] == [
        (seqs[0], "one"),
        (seqs[1], "two"),
    ]
    assert len(store.turns_missing_vectors(MODEL, 1)) == 1
    store.put_vectors(MODEL, seqs, _vectors(2))
    assert store.count_missing_vectors(MODEL) == 0 and store.turns_missing_vectors(MODEL, 10) == []
    store.put_vectors(MODEL, [seqs[0], 999_999], _vectors(2))  # a vanished turn is skipped
    store.put_vectors("other-model", seqs, _vectors(2, offset=1))
    assert store.counts() == {
        "turns": 2,
        "users": 2,
        "sessions": 2,
        f"vectors[{MODEL}]": 2,
        "vectors[other-model]": 2,
    }
    assert store.vectors_for(MODEL, [*seqs, 999_999]).keys() == set(seqs)
    assert store.vectors_after("other-model", "bob", 0).seqs.tolist() == [seqs[1]]


def test_deleting_turns_drops_their_vectors(store: TierStore) -> None:
    seqs = store.insert_turns([_turn("a", "one"), _turn("b", "two", session_id="s")], _vectors(2), MODEL)
    assert store.delete("a", "ana") == seqs[0]
    assert store.vectors_for(MODEL, seqs).keys() == {seqs[1]}
    assert store.forget(Scope("ana", session_id="s")) == 1
    assert store.vectors_for(MODEL, seqs) == {}
    assert store.vectors_after(MODEL, "ana", 0).seqs.tolist() == []
    assert store.counts() == {"turns": 0, "users": 0, "sessions": 0}


def test_nearest_when_the_store_ranks_vectors_itself(store: TierStore) -> None:
    if not isinstance(store, ServerSideVectors):
        pytest.skip("this backend ranks vectors in process (Memory's VectorIndex)")
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((60, DIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    users = ["ana" if n % 4 else "bob" for n in range(60)]
    seqs = store.insert_turns([_turn(f"t{n}", f"n{n}", users[n]) for n in range(60)], matrix, MODEL)
    query = matrix[5]
    mine = [n for n in range(60) if users[n] == "ana"]
    exact = sorted(mine, key=lambda n: -float(matrix[n] @ query))
    found = store.nearest(MODEL, "ana", query, 5)
    assert [seq for seq, _ in found][:1] == [seqs[5]]
    assert len(found) == 5 and all(seqs.index(seq) in mine for seq, _ in found)
    assert [round(score, 4) for _, score in found] == sorted((round(s, 4) for _, s in found), reverse=True)
    assert {seq for seq, _ in found} == {seqs[n] for n in exact[:5]}
    allowed = [seqs[n] for n in exact[3:10]]
    assert [seq for seq, _ in store.nearest(MODEL, "ana", query, 3, allowed)] == allowed[:3]
    assert store.nearest(MODEL, "ana", query, 3, []) == []
    assert len(store.nearest(MODEL, "bob", query, 100)) == 15
    assert store.nearest(MODEL, "carol", query, 5) == []
    assert store.nearest("unknown-model", "ana", query, 5) == []


# -- concurrency and lifecycle ---------------------------------------------------------------


def test_a_second_store_sees_committed_writes(open_tier_store: Callable[[], TierStore]) -> None:
    writer, reader = open_tier_store(), open_tier_store()
    [seq] = writer.insert_turns([_turn("a", "shared thought")], _vectors(1), MODEL)
    assert reader.get_by_seqs([seq], "ana")[seq].content == "shared thought"
    assert reader.vectors_after(MODEL, "ana", 0).seqs.tolist() == [seq]
    assert reader.delete("a", "ana") == seq
    assert writer.get_by_ids(["a"]) == {}


def test_a_closed_store_raises_storage_error(open_tier_store: Callable[[], TierStore]) -> None:
    store = open_tier_store()
    store.insert_turns([_turn("a", "x")], None, MODEL)
    store.close()
    with pytest.raises(StorageError):
        store.counts()
    with pytest.raises(StorageError):
        store.insert_turns([_turn("b", "y")], None, MODEL)
    reopened = open_tier_store()
    assert reopened.get_by_ids(["a"])["a"].content == "x"
