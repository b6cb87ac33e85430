"""VectorIndex: exact cosine search per user, checked against a numpy brute-force reference."""

from __future__ import annotations

import itertools
import logging

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.retrieval.vectors import VectorIndex

DIM = 16
F32 = npt.NDArray[np.float32]


def _unit(rng: np.random.Generator, rows: int, dim: int = DIM) -> F32:
    matrix = rng.standard_normal((rows, dim)).astype(np.float32)
    normalized: F32 = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)
    return normalized


def _seqs(values: list[int] | range) -> npt.NDArray[np.int64]:
    return np.asarray(list(values), dtype=np.int64)


def _check_against_reference(
    result: list[tuple[int, float]], seqs: npt.NDArray[np.int64], vectors: F32, query: F32, limit: int
) -> None:
    reference = {
        int(s): float(v) for s, v in zip(seqs, vectors.astype(np.float64) @ query.astype(np.float64), strict=True)
    }
    expected_count = min(limit, len(reference))
    assert len(result) == expected_count
    returned = [seq for seq, _ in result]
    assert len(set(returned)) == len(returned)
    scores = [score for _, score in result]
    # best first
    assert all(a >= b for a, b in itertools.pairwise(scores))
    for seq, score in result:
        assert score == pytest.approx(reference[seq], abs=1e-5)
    # the returned items are the top ones (up to float32 rounding on near-ties)
    best = sorted(reference.values(), reverse=True)[:expected_count]
    assert scores == pytest.approx(best, abs=1e-5)
    if expected_count:
        worst_kept = min(scores)
        for seq, value in reference.items():
            if seq not in returned:
                assert value <= worst_kept + 1e-5
    # and in exactly the reference order wherever the reference scores are clearly apart
    order = sorted(reference, key=lambda s: (-reference[s], s))[:expected_count]
    for position, (mine, theirs) in enumerate(zip(returned, order, strict=True)):
        if mine != theirs:
            assert reference[mine] == pytest.approx(reference[theirs], abs=1e-5), position


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    rows=st.integers(min_value=0, max_value=600),
    limit=st.integers(min_value=1, max_value=700),
    batches=st.integers(min_value=1, max_value=4),
)
def test_search_matches_brute_force_cosine(seed: int, rows: int, limit: int, batches: int) -> None:
    rng = np.random.default_rng(seed)
    vectors = _unit(rng, rows)
    seqs = rng.permutation(np.arange(1, rows + 1, dtype=np.int64) * 3)
    index = VectorIndex(DIM)
    for part_seqs, part_vectors in zip(np.array_split(seqs, batches), np.array_split(vectors, batches), strict=True):
        index.extend("ana", part_seqs, part_vectors, high_water=int(part_seqs.max(initial=0)))
    query = _unit(rng, 1)[0]
    _check_against_reference(index.search("ana", query, limit), seqs, vectors, query, limit)


def test_best_first_on_a_known_example() -> None:
    index = VectorIndex(2)
    angles = np.array([0.0, 0.3, 1.2, 3.0, -0.6])
    vectors = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    index.extend("ana", _seqs([10, 11, 12, 13, 14]), vectors, high_water=5)
    result = index.search("ana", np.array([1.0, 0.0], np.float32), 5)
    assert [seq for seq, _ in result] == [10, 11, 14, 12, 13]
    assert result[0][1] == pytest.approx(1.0)
    assert result[-1][1] == pytest.approx(np.cos(3.0))
    assert [seq for seq, _ in index.search("ana", np.array([1.0, 0.0], np.float32), 2)] == [10, 11]


def test_exact_ties_break_by_seq() -> None:
    index = VectorIndex(2)
    same = np.tile(np.array([[1.0, 0.0]], np.float32), (4, 1))
    index.extend("ana", _seqs([9, 3, 7, 5]), same, high_water=1)
    assert [seq for seq, _ in index.search("ana", np.array([1.0, 0.0], np.float32), 4)] == [3, 5, 7, 9]


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    rows=st.integers(min_value=1, max_value=300),
    limit=st.integers(min_value=1, max_value=50),
)
def test_allowed_mask_restricts_to_the_allowed_seqs(seed: int, rows: int, limit: int) -> None:
    rng = np.random.default_rng(seed)
    vectors = _unit(rng, rows)
    seqs = np.arange(1, rows + 1, dtype=np.int64)
    index = VectorIndex(DIM)
    index.extend("ana", seqs, vectors, high_water=rows)
    mask = rng.random(rows) < 0.3
    allowed = np.concatenate([seqs[mask], np.array([10_000, 10_001], np.int64)])  # unknown seqs are harmless
    query = _unit(rng, 1)[0]
    result = index.search("ana", query, limit, allowed)
    assert {seq for seq, _ in result} <= set(seqs[mask].tolist())
    _check_against_reference(result, seqs[mask], vectors[mask], query, limit)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), rows=st.integers(min_value=1, max_value=200))
def test_searching_within_several_subsets_equals_searching_each(seed: int, rows: int) -> None:
    rng = np.random.default_rng(seed)
    seqs = np.arange(1, rows + 1, dtype=np.int64)
    index = VectorIndex(DIM)
    index.extend("ana", seqs, _unit(rng, rows), high_water=rows)
    query = _unit(rng, 1)[0]
    subsets = [None, seqs[rng.random(rows) < 0.2], np.zeros(0, np.int64)]
    found = index.search_within("ana", query, 7, subsets)
    assert found == [index.search("ana", query, 7, subset) for subset in subsets]
    assert index.search_within("bob", query, 7, subsets) == [[], [], []]


def test_empty_allowed_gives_nothing() -> None:
    index = VectorIndex(DIM)
    index.extend("ana", _seqs([1, 2]), _unit(np.random.default_rng(0), 2), high_water=2)
    assert index.search("ana", _unit(np.random.default_rng(1), 1)[0], 5, np.zeros(0, np.int64)) == []


def test_remove_forgets_only_those_seqs() -> None:
    rng = np.random.default_rng(1)
    vectors = _unit(rng, 20)
    index = VectorIndex(DIM)
    index.extend("ana", _seqs(range(1, 21)), vectors, high_water=20)
    index.remove("ana", _seqs([3, 7, 999]))
    result = index.search("ana", vectors[2], 100)
    assert {seq for seq, _ in result} == set(range(1, 21)) - {3, 7}
    index.remove("nobody", _seqs([1]))  # unknown user: no-op
    index.remove("ana", _seqs([]))
    assert len(index.search("ana", vectors[0], 100)) == 18
    # the surviving vectors still belong to their seqs
    assert index.search("ana", vectors[9], 1)[0][0] == 10


def test_drop_one_user_or_everyone() -> None:
    rng = np.random.default_rng(2)
    index = VectorIndex(DIM)
    index.extend("ana", _seqs([1, 2]), _unit(rng, 2), high_water=2)
    index.extend("bob", _seqs([3]), _unit(rng, 1), high_water=3)
    index.drop("ana")
    assert index.high_water("ana") is None
    assert index.search("ana", _unit(rng, 1)[0], 5) == []
    assert len(index.search("bob", _unit(rng, 1)[0], 5)) == 1
    index.drop("ana")  # dropping twice is fine
    index.drop()
    assert index.high_water("bob") is None
    assert index.search("bob", _unit(rng, 1)[0], 5) == []


def test_extend_replaces_a_known_seq() -> None:
    index = VectorIndex(2)
    index.extend("ana", _seqs([1, 2]), np.array([[1, 0], [0, 1]], np.float32), high_water=2)
    index.extend("ana", _seqs([1]), np.array([[0, -1]], np.float32), high_water=3)
    result = index.search("ana", np.array([1.0, 0.0], np.float32), 10)
    assert sorted(seq for seq, _ in result) == [1, 2]
    assert dict(result)[1] == pytest.approx(0.0)
    assert index.search("ana", np.array([0.0, -1.0], np.float32), 1) == [(1, pytest.approx(1.0))]


def test_growth_past_the_initial_capacity_keeps_everything() -> None:
    rng = np.random.default_rng(3)
    index = VectorIndex(DIM)
    all_vectors = []
    for start in range(0, 1000, 170):
        block = _unit(rng, 170)
        all_vectors.append(block)
        index.extend("ana", _seqs(range(start, start + 170)), block, high_water=start + 170)
    vectors = np.concatenate(all_vectors)
    seqs = np.arange(0, len(vectors), dtype=np.int64)
    query = _unit(rng, 1)[0]
    _check_against_reference(index.search("ana", query, 2000), seqs, vectors, query, 2000)
    for i in (0, 255, 256, 511, 999):
        assert index.search("ana", vectors[i], 1)[0][0] == i


def test_a_reserve_makes_room_once_for_a_load_in_chunks() -> None:
    rng = np.random.default_rng(4)
    vectors = _unit(rng, 1000)
    index = VectorIndex(DIM)
    for start in range(0, 1000, 300):
        chunk = slice(start, min(1000, start + 300))
        index.extend("ana", _seqs(range(chunk.start, chunk.stop)), vectors[chunk], high_water=chunk.stop, reserve=1000)
        assert index.rows() == 1000  # the room of all of them from the first chunk on, and no more
    query = _unit(rng, 1)[0]
    _check_against_reference(index.search("ana", query, 50), np.arange(1000, dtype=np.int64), vectors, query, 50)


def test_high_water_tracking() -> None:
    index = VectorIndex(DIM)
    assert index.high_water("ana") is None
    index.extend("ana", _seqs([]), np.zeros((0, DIM), np.float32), high_water=0)
    assert index.high_water("ana") is None  # nothing there yet: no room taken, the next search looks again
    assert index.search("ana", _unit(np.random.default_rng(0), 1)[0], 5) == []
    index.extend("ana", _seqs([1]), _unit(np.random.default_rng(0), 1), high_water=10)
    assert index.high_water("ana") == 10
    index.extend("ana", _seqs([2]), _unit(np.random.default_rng(1), 1), high_water=5)
    assert index.high_water("ana") == 10  # never goes backwards
    index.extend("ana", _seqs([]), np.zeros((0, DIM), np.float32), high_water=12)
    assert index.high_water("ana") == 12
    index.remove("ana", _seqs([1]))
    assert index.high_water("ana") == 12
    assert index.high_water("bob") is None


def test_users_are_isolated() -> None:
    index = VectorIndex(2)
    index.extend("ana", _seqs([1]), np.array([[1.0, 0.0]], np.float32), high_water=1)
    index.extend("bob", _seqs([2]), np.array([[1.0, 0.0]], np.float32), high_water=2)
    index.extend("bob", _seqs([1]), np.array([[0.0, 1.0]], np.float32), high_water=3)  # same seq, other user
    query = np.array([1.0, 0.0], np.float32)
    assert index.search("ana", query, 10) == [(1, pytest.approx(1.0))]
    assert [seq for seq, _ in index.search("bob", query, 10)] == [2, 1]
    assert index.high_water("ana") == 1 and index.high_water("bob") == 3
    index.remove("bob", _seqs([1]))
    assert index.search("ana", query, 10) == [(1, pytest.approx(1.0))]
    assert index.search("carol", query, 10) == []
    assert index.search("ana", query, 10, _seqs([2])) == []


def test_zero_or_negative_limit_returns_nothing() -> None:
    index = VectorIndex(2)
    index.extend("ana", _seqs([1]), np.array([[1.0, 0.0]], np.float32), high_water=1)
    assert index.search("ana", np.array([1.0, 0.0], np.float32), 0) == []
    assert index.search("ana", np.array([1.0, 0.0], np.float32), -3) == []


# -- neighbour blending -------------------------------------------------------------------


def _unit_rows(count: int, dimension: int = 8, seed: int = 3) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(count, dimension)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_blending_finds_the_turn_after_a_matching_one() -> None:
    rows = np.eye(4, 8, dtype=np.float32)
    plain, blended = VectorIndex(8), VectorIndex(8, neighbour_weights=(0.3,))
    for index in (plain, blended):
        index.extend("ana", np.array([1, 2, 3, 4]), rows, 4)
    query = rows[1]
    assert [seq for seq, _ in plain.search("ana", query, 4)][:1] == [2]
    assert {seq for seq, score in plain.search("ana", query, 4) if score > 0} == {2}
    found = dict(blended.search("ana", query, 4))
    assert max(found, key=lambda seq: found[seq]) == 2
    assert found[1] > 0 and found[3] > 0 and found[4] == pytest.approx(0.0, abs=1e-6)
    # Searching turns by their own vectors only, as a search narrowed to an agent or a session does.
    own = blended.search_within("ana", query, 4, [None, np.array([1, 3])], own_only=True)
    assert own == [plain.search("ana", query, 4), plain.search("ana", query, 4, np.array([1, 3]))]


def test_incremental_loading_blends_like_loading_at_once() -> None:
    rows = _unit_rows(50)
    seqs = np.arange(10, 60, dtype=np.int64)
    whole, piecewise = VectorIndex(8, neighbour_weights=(0.3,)), VectorIndex(8, neighbour_weights=(0.3,))
    whole.extend("ana", seqs, rows, 50)
    for start in range(0, 50, 7):
        piecewise.extend("ana", seqs[start : start + 7], rows[start : start + 7], start + 7)
    query = _unit_rows(1, seed=9)[0]
    assert _scores(whole.search("ana", query, 50)) == pytest.approx(_scores(piecewise.search("ana", query, 50)))


def test_out_of_order_loading_and_removal_keep_turn_order() -> None:
    rows = _unit_rows(6)
    seqs = np.array([1, 2, 3, 4, 5, 6], dtype=np.int64)
    reference, shuffled = VectorIndex(8, neighbour_weights=(0.5, 0.2)), VectorIndex(8, neighbour_weights=(0.5, 0.2))
    reference.extend("ana", seqs[[0, 1, 3, 4, 5]], rows[[0, 1, 3, 4, 5]], 6)
    shuffled.extend("ana", seqs[3:], rows[3:], 6)
    shuffled.extend("ana", seqs[:3], rows[:3], 6)
    shuffled.remove("ana", np.array([3]))
    query = _unit_rows(1, seed=5)[0]
    assert _scores(shuffled.search("ana", query, 6)) == pytest.approx(_scores(reference.search("ana", query, 6)))


def _scores(found: list[tuple[int, float]]) -> dict[int, float]:
    return dict(found)


def test_two_neighbour_distances_reach_two_turns_away() -> None:
    rows = np.eye(5, 8, dtype=np.float32)
    index = VectorIndex(8, neighbour_weights=(0.4, 0.2))
    index.extend("ana", np.arange(1, 6), rows, 5)
    found = dict(index.search("ana", rows[0], 5))
    assert found[1] > found[2] > found[3] > 0 and found[4] == pytest.approx(0.0, abs=1e-6)


def test_a_batch_read_before_a_removal_is_ignored() -> None:
    index = VectorIndex(8)
    rows = _unit_rows(3)
    index.extend("ana", np.array([1]), rows[:1], 1)
    before = index.generation("ana")
    index.drop("ana")  # a forget committed while a search was reading the store
    index.extend("ana", np.array([1, 2, 3]), rows, 3, before)
    assert index.high_water("ana") is None and index.search("ana", rows[0], 3) == []
    current = index.generation("ana")
    index.extend("ana", np.array([2, 3]), rows[1:], 3, current)
    index.remove("ana", np.array([2]))
    index.extend("ana", np.array([2]), rows[1:2], 3, current)  # overtaken by the removal
    assert [seq for seq, _ in index.search("ana", rows[2], 3)] == [3]
    everyone = index.generation("ana")
    index.drop()
    assert index.generation("ana") != everyone


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    rows=st.integers(min_value=1, max_value=40),
    weights=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=3),
    batch=st.integers(min_value=1, max_value=40),
)
def test_blended_scores_equal_the_explicit_blend(seed: int, rows: int, weights: list[float], batch: int) -> None:
    """Scores come from the rows' own cosines; they must equal max(own, normalize(blend)·q)."""
    rng = np.random.default_rng(seed)
    vectors = _unit(rng, rows)
    query = _unit(rng, 1)[0]
    blended = vectors.astype(np.float64).copy()
    for distance, weight in enumerate(weights, start=1):
        if distance < rows:
            blended[distance:] += weight * vectors[:-distance]
            blended[: rows - distance] += weight * vectors[distance:]
    norms = np.linalg.norm(blended, axis=1, keepdims=True)
    blended /= np.where(norms == 0, 1.0, norms)
    expected = np.maximum(vectors.astype(np.float64) @ query, blended @ query)
    index = VectorIndex(DIM, neighbour_weights=weights)
    seqs = _seqs(range(1, rows + 1))
    for start in range(0, rows, batch):
        index.extend("ana", seqs[start : start + batch], vectors[start : start + batch], start + batch)
    found = dict(index.search("ana", query, rows))
    assert [found[int(seq)] for seq in seqs] == pytest.approx(expected.tolist(), abs=1e-5)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    rows=st.integers(min_value=1, max_value=30),
    weights=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=3),
    half=st.booleans(),
    data=st.data(),
)
def test_a_run_of_rows_blends_as_the_rows_gathered_one_by_one(
    seed: int, rows: int, weights: list[float], half: bool, data: st.DataObject
) -> None:
    """Loading and coding blend runs of rows from one read; any other set of rows is gathered row by row."""
    index = VectorIndex(DIM, neighbour_weights=weights, approximate_from=1 if half else None)
    index.extend("ana", _seqs(range(1, rows + 1)), _unit(np.random.default_rng(seed), rows), rows)
    block = index._blocks["ana"]
    assert block.vectors.dtype == (np.uint16 if half else np.float32)  # bfloat16 bits when coded
    low = data.draw(st.integers(min_value=0, max_value=rows - 1))
    high = data.draw(st.integers(min_value=low + 1, max_value=rows))
    run = np.arange(low, high)
    gathered = index._blended_locked(block, run[::-1])[::-1]  # reversed: not a run, so gathered
    for normalized in (False, True):
        assert index._blended_locked(block, run, normalized=normalized) == pytest.approx(
            index._blended_locked(block, run[::-1], normalized=normalized)[::-1], abs=1e-6
        )
    assert index._blended_locked(block, run) == pytest.approx(gathered, abs=1e-6)


def test_names_without_vectors_take_no_room_and_removals_still_overtake_loads() -> None:
    index = VectorIndex(DIM)
    for n in range(1000):  # searches and forgets of users who have nothing here
        index.extend(f"nobody-{n}", _seqs([]), np.zeros((0, DIM), np.float32), high_water=0, generation=(0, 0))
        index.remove(f"gone-{n}", _seqs([1]))
        index.drop(f"gone-{n}")
    assert index._blocks == {} and index._generations == {}
    # A load read before a removal of a user this index never held is still ignored.
    before = index.generation("new")
    index.remove("new", _seqs([1]))
    index.extend("new", _seqs([1]), _unit(np.random.default_rng(0), 1), high_water=1, generation=before)
    assert index.high_water("new") is None
    # ... and for a user it holds, the count is theirs alone: another user's load goes on.
    index.extend("ana", _seqs([1]), _unit(np.random.default_rng(0), 1), high_water=1)
    other = index.generation("bea")
    index.remove("ana", _seqs([1]))
    index.extend("bea", _seqs([2]), _unit(np.random.default_rng(1), 1), high_water=2, generation=other)
    assert index.high_water("bea") == 2


def test_past_its_row_limit_the_index_unloads_the_users_searched_least_recently() -> None:
    index = VectorIndex(DIM, max_rows=150)  # a block holds room for at least 64 rows
    rng = np.random.default_rng(3)
    for user in ("ana", "bea"):
        index.extend(user, _seqs([1, 2]), _unit(rng, 2), high_water=2)
    assert index.rows() == 128
    assert index.search("ana", _unit(rng, 1)[0], 1)  # ana is now the most recently used
    index.extend("cid", _seqs([3]), _unit(rng, 1), high_water=3)
    assert (index.high_water("ana"), index.high_water("bea"), index.high_water("cid")) == (2, None, 3)
    assert index.search("bea", _unit(rng, 1)[0], 1) == []  # unloaded: the next catch-up reads the store again
    # A load of ana's read before she was unloaded does not come back.
    stale = index.generation("ana")
    index.extend("dan", _seqs([4]), _unit(rng, 1), high_water=4)  # pushes ana out now
    index.extend("ana", _seqs([1, 2]), _unit(rng, 2), high_water=2, generation=stale)
    assert index.high_water("ana") is None
    # A user held by a search (from its catch-up to its scan) is not unloaded by another's load.
    with index.pinned("cid"):
        index.extend("eve", _seqs([5]), _unit(rng, 1), high_water=5)
        assert index.high_water("cid") == 3 and index.high_water("dan") is None
    # The user being loaded stays, however large; a block grows by a quarter, not by doubling.
    index.extend("fay", _seqs(list(range(10, 1010))), _unit(rng, 1000), high_water=1010)
    assert index.high_water("fay") == 1010 and index.rows() == 1000
    index.extend("fay", _seqs([2000]), _unit(rng, 1), high_water=2000)
    assert index.rows() == 1250


def test_users_reloaded_after_being_unloaded_for_room_are_counted_and_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    index = VectorIndex(DIM, max_rows=100)  # room for one user's 64-row block
    rng = np.random.default_rng(4)
    with caplog.at_level(logging.WARNING, logger="memstrata.vectors"):
        index.extend("ana", _seqs([1]), _unit(rng, 1), high_water=1)
        index.extend("bea", _seqs([2]), _unit(rng, 1), high_water=2)  # unloads ana: a first load, no warning
        assert not caplog.records
        for _ in range(3):  # the two take turns
            index.extend("ana", _seqs([1]), _unit(rng, 1), high_water=1)
            index.extend("bea", _seqs([2]), _unit(rng, 1), high_water=2)
    assert index.stats() == {"rows": 64, "limit": 100, "users": 1, "unloads": 7, "reloads": 6, "approximate_users": 0}
    assert len(caplog.records) == 1  # once per WARN_EVERY_SECONDS, not once per reload
    assert "raise vector_cache_rows" in caplog.records[0].getMessage()
    # A user dropped (forgotten, pruned) or a whole rebuild loads anew: no reload to count or warn about.
    assert index.stats()["users"] == 1 and "ana" not in index._blocks  # bea holds the room, ana was unloaded
    index.drop("ana")
    index.extend("ana", _seqs([1]), _unit(rng, 1), high_water=1)  # unloads bea
    assert index.stats()["reloads"] == 6
    index.drop()
    index.extend("bea", _seqs([2]), _unit(rng, 1), high_water=2)
    assert index.stats()["reloads"] == 6 and len(caplog.records) == 1
