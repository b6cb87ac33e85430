"""VectorIndex from ``approximate_from`` rows: coded scans rescored exactly, checked against the exact index."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.retrieval import approximate
from memstrata.retrieval import vectors as vectors_module
from memstrata.retrieval.approximate import CodeScan, from_bfloat16, rescored_count, supports, to_bfloat16
from memstrata.retrieval.vectors import MIN_CODED_ROWS, VectorIndex

F32 = npt.NDArray[np.float32]
# bfloat16 storage rounds a cosine by up to about this much.
HALF = 4e-3


def _unit(matrix: npt.NDArray[np.float64]) -> F32:
    unit: F32 = (matrix / np.linalg.norm(matrix, axis=-1, keepdims=True)).astype(np.float32)
    return unit


def _low_rank(rng: np.random.Generator, rows: int, dim: int, rank: int, noise: float) -> tuple[F32, F32]:
    """Vectors (and queries) mostly inside a ``rank``-dimensional subspace, as embeddings are."""
    basis = rng.standard_normal((rank, dim))
    vectors = _unit(rng.standard_normal((rows, rank)) @ basis + noise * rng.standard_normal((rows, dim)))
    queries = _unit(rng.standard_normal((40, rank)) @ basis + noise * rng.standard_normal((40, dim)))
    return vectors, queries


def _same_ranking(approximate: list[tuple[int, float]], exact: list[tuple[int, float]]) -> None:
    """The same turns in the same order, but where bfloat16 rounding can swap near-ties."""
    assert len(approximate) == len(exact)
    exact_scores = dict(exact)
    for (mine, my_score), (theirs, their_score) in zip(approximate, exact, strict=True):
        assert my_score == pytest.approx(their_score, abs=HALF)
        if mine != theirs:
            assert mine not in exact_scores or exact_scores[mine] == pytest.approx(their_score, abs=2 * HALF)


def _pair(
    dim: int, weights: tuple[float, ...] = (0.4, 0.2), *, approximate_from: int = 1, rescored_rows: int = 1
) -> tuple[VectorIndex, VectorIndex]:
    exact = VectorIndex(dim, neighbour_weights=weights)
    approximate = VectorIndex(
        dim, neighbour_weights=weights, approximate_from=approximate_from, rescored_rows=rescored_rows
    )
    return exact, approximate


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    rows=st.integers(min_value=MIN_CODED_ROWS, max_value=1_600),
    batches=st.integers(min_value=1, max_value=4),
    weights=st.sampled_from([(), (0.4, 0.2), (0.3,)]),
    own_only=st.booleans(),
    limit=st.integers(min_value=1, max_value=30),
)
def test_rescoring_every_row_ranks_as_the_exact_index(
    seed: int, rows: int, batches: int, weights: tuple[float, ...], own_only: bool, limit: int
) -> None:
    # With room to rescore every row, only the bookkeeping is checked: batches out of order,
    # deleted rows whose codes stay, the blend, subsets.
    rng = np.random.default_rng(seed)
    vectors = _unit(rng.standard_normal((rows, 16)))
    seqs = rng.permutation(np.arange(1, rows + 1, dtype=np.int64) * 2)
    exact, approximate = _pair(16, weights, approximate_from=rows // 2, rescored_rows=rows)
    for part in np.array_split(np.arange(rows), batches):
        for index in (exact, approximate):
            index.extend("u", seqs[part], vectors[part], int(part[-1]) if len(part) else 0)
    removed = seqs[rng.random(rows) < 0.05]
    for index in (exact, approximate):
        index.remove("u", removed)
    allowed = [None, seqs[rng.random(rows) < 0.5], seqs[:3]]
    for query in _unit(rng.standard_normal((3, 16))):
        mine = approximate.search_within("u", query, limit, allowed, own_only=own_only)
        theirs = exact.search_within("u", query, limit, allowed, own_only=own_only)
        for found, expected in zip(mine, theirs, strict=True):
            _same_ranking(found, expected)
            assert not set(removed) & {seq for seq, _ in found}


def test_below_the_size_a_user_is_searched_exactly_and_from_it_through_codes() -> None:
    rng = np.random.default_rng(3)
    vectors = _unit(rng.standard_normal((3_000, 16)))
    index = VectorIndex(16, approximate_from=2_000)
    index.extend("u", np.arange(1, 2_000, dtype=np.int64), vectors[:1_999], 1_999)
    assert index._blocks["u"].approximation is None and index._blocks["u"].vectors.dtype == np.float32
    index.extend("u", np.arange(2_000, 3_001, dtype=np.int64), vectors[1_999:], 3_000)
    block = index._blocks["u"]
    assert block.approximation is not None and block.vectors.dtype == np.uint16
    assert len(block.approximation.own) == 3_000
    found = index.search("u", vectors[2_500], 1)
    assert found[0][0] == 2_501 and found[0][1] == pytest.approx(1.0, abs=HALF)
    assert index.stats()["approximate_users"] == 1


def test_a_load_with_room_reserved_past_the_size_is_half_precision_from_its_first_chunk() -> None:
    rng = np.random.default_rng(4)
    vectors = _unit(rng.standard_normal((100, 16)))
    index = VectorIndex(16, approximate_from=1_000)
    index.extend("u", np.arange(1, 101, dtype=np.int64), vectors, 100, reserve=5_000)
    block = index._blocks["u"]
    assert block.vectors.dtype == np.uint16 and len(block.vectors) == 5_000
    assert block.approximation is None  # too few rows to train on yet: searched exactly meanwhile
    assert index.search("u", vectors[40], 1)[0][0] == 41


def test_a_load_in_chunks_codes_its_rows_once_all_have_come() -> None:
    rng = np.random.default_rng(5)
    vectors = _unit(rng.standard_normal((12_000, 16)))
    seqs = np.arange(1, 12_001, dtype=np.int64)
    index = VectorIndex(16, approximate_from=1_000)
    for low in (0, 4_000):
        index.extend("u", seqs[low : low + 4_000], vectors[low : low + 4_000], low + 4_000, reserve=12_000)
        assert index._blocks["u"].approximation is None  # searched exactly meanwhile
    assert index.search("u", vectors[10], 1)[0][0] == 11
    index.extend("u", seqs[8_000:], vectors[8_000:], 12_000, reserve=12_000)
    approximation = index._blocks["u"].approximation
    assert approximation is not None and len(approximation.own) == 12_000
    assert approximation.own.lists == 54  # √(12,000 / 4): sized for every row, not the first chunk's 4,000
    assert index.search("u", vectors[11_000], 1)[0][0] == 11_001


def test_small_rescoring_keeps_the_exact_top_ten_of_low_rank_vectors() -> None:
    # 20,000 rows of 128 dimensions, 200 rescored (1%) per scan.
    rng = np.random.default_rng(6)
    vectors, queries = _low_rank(rng, 20_000, 128, 48, 0.3)
    seqs = np.arange(1, 20_001, dtype=np.int64)
    exact, approximate = _pair(128, approximate_from=10_000, rescored_rows=200)
    for index in (exact, approximate):
        index.extend("u", seqs, vectors, 20_000)
    for own_only in (False, True):
        kept = 0
        for query in queries:
            mine = {seq for seq, _ in approximate.search("u", query, 5, own_only=own_only)}
            kept += len(mine & {seq for seq, _ in exact.search("u", query, 5, own_only=own_only)})
        assert kept / (5 * len(queries)) >= 0.95, own_only


def test_a_turn_found_only_by_its_neighbours_is_found_through_the_coded_blends() -> None:
    rng = np.random.default_rng(8)
    vectors = _unit(rng.standard_normal((4_000, 64)))
    query = _unit(rng.standard_normal(64))
    vectors[1_999] = vectors[2_001] = query  # the turns around 2,000 say what is asked, 2,000 something else
    vectors[2_000] = _unit((vectors[2_000] - (vectors[2_000] @ query) * query).astype(np.float64))
    seqs = np.arange(1, 4_001, dtype=np.int64)
    exact, approximate = _pair(64)  # 120 candidates a scan: only the scan of blends finds it
    for index in (exact, approximate):
        index.extend("u", seqs, vectors, 4_000)
    expected = [seq for seq, _ in exact.search("u", query, 3)]
    assert expected[2] == 2_001  # row 2,000, by its neighbourhood only
    assert [seq for seq, _ in approximate.search("u", query, 3)] == expected


def test_the_latest_turns_are_found_by_their_blend_before_it_is_coded() -> None:
    rng = np.random.default_rng(9)
    vectors = _unit(rng.standard_normal((2_000, 256)))
    query = _unit(rng.standard_normal(256))
    vectors[-3] = vectors[-2] = query  # the last turn says something else after two that say what is asked
    vectors[-1] = _unit((vectors[-1] - (vectors[-1] @ query) * query).astype(np.float64))
    seqs = np.arange(1, 2_001, dtype=np.int64)
    exact, approximate = _pair(256)
    for index in (exact, approximate):
        index.extend("u", seqs, vectors, 2_000)
    block = approximate._blocks["u"]
    assert block.approximation is not None and block.approximation.blended_through == 1_998
    expected = exact.search("u", query, 4)
    assert 2_000 in dict(expected)  # by the turns before it
    found = approximate.search("u", query, 4)
    _same_ranking(found, expected)  # 1,998 and 1,999 say the same: a tie bfloat16 rounding may swap
    assert 2_000 in dict(found)


def test_deleted_turns_are_never_found_and_many_deletions_rebuild_the_codes() -> None:
    rng = np.random.default_rng(10)
    vectors = _unit(rng.standard_normal((2_000, 16)))
    seqs = np.arange(1, 2_001, dtype=np.int64)
    index = VectorIndex(16, neighbour_weights=(0.4, 0.2), approximate_from=1, rescored_rows=1)
    index.extend("u", seqs, vectors, 2_000)
    index.remove("u", np.asarray([501], np.int64))
    assert 501 not in {seq for seq, _ in index.search("u", vectors[500], 10)}
    codes = index._blocks["u"].approximation
    index.remove("u", seqs[1_000:1_100])  # 100 rows, 500 codes stale: past a tenth of the rows
    assert index._blocks["u"].approximation is not codes
    rebuilt = index._blocks["u"].approximation
    assert rebuilt is not None and len(rebuilt.own) == 1_899 and rebuilt.stale == 0


def test_a_replaced_vector_is_found_by_its_new_code() -> None:
    rng = np.random.default_rng(5)
    vectors = _unit(rng.standard_normal((2_000, 16)))
    index = VectorIndex(16, neighbour_weights=(0.4, 0.2), approximate_from=1, rescored_rows=1)
    index.extend("u", np.arange(1, 2_001, dtype=np.int64), vectors, 2_000)
    replacement = _unit(rng.standard_normal((1, 16)))
    index.extend("u", np.asarray([7], np.int64), replacement, 2_000)  # out of order: the block is re-sorted
    assert index.search("u", replacement[0], 1, own_only=True)[0][0] == 7
    assert index.search("u", vectors[30], 1, own_only=True)[0][0] == 31


def test_code_scans_refuse_what_they_cannot_code() -> None:
    assert supports(384) and supports(16) and not supports(6)
    with pytest.raises(ValueError, match="cannot be coded"):
        CodeScan(6, np.ones((10, 6), np.float32))
    with pytest.raises(ValueError, match="at least 16 vectors"):
        CodeScan(16, np.zeros((0, 16), np.float32))
    assert VectorIndex(6, approximate_from=1).approximate_from is None  # such vectors stay exact
    assert rescored_count(1) == approximate.RESCORED_ROWS
    assert rescored_count(10_000, 5) == 10_000 * approximate.RESCORED_PER_RESULT


def test_a_scan_reads_the_lists_nearest_the_query_in_proportion_to_the_candidates_asked() -> None:
    import faiss

    rng = np.random.default_rng(12)
    vectors = _unit(rng.standard_normal((20_000, 16)))
    scan = CodeScan(16, vectors, len(vectors))
    scan.add(np.arange(1, 20_001, dtype=np.int64) * 3, vectors)
    assert scan.lists == 70  # about √(20,000 / 4)
    stats = faiss.cvar.indexIVF_stats
    stats.reset()
    positions, labels = scan.best(vectors[5], 20)
    # 20 candidates: the lists holding about 64 × 20 codes, 5 of 70 (a tenth of the codes, about).
    assert stats.nlist == 5 and stats.ndis < 2_000
    assert len(positions) == 20 and 5 in positions and 18 in labels  # the query's own row, by its label
    assert np.array_equal(labels, (positions + 1) * 3)
    stats.reset()
    positions, _ = scan.best(vectors[5], 400)  # 64 × 400 codes are more than it holds: every list
    assert stats.nlist == 70 and stats.ndis == 20_000 and len(positions) == 400


def test_bfloat16_halves_the_memory_and_rounds_to_nearest() -> None:
    rng = np.random.default_rng(11)
    vectors = _unit(rng.standard_normal((500, 384)))
    halves = to_bfloat16(vectors)
    assert halves.dtype == np.uint16 and halves.nbytes * 2 == vectors.nbytes
    back = from_bfloat16(halves)
    assert np.all(np.abs(back - vectors) <= np.abs(vectors) * 2.0**-8)  # half a unit in the last of 8 bits
    assert np.array_equal(from_bfloat16(to_bfloat16(back)), back)  # what bfloat16 holds comes back exactly
    assert np.abs(back @ vectors[0] - vectors @ vectors[0]).max() < HALF


class _GatedScan(CodeScan):
    """A CodeScan whose first ``add`` waits for ``release``, after saying so through ``entered``."""

    entered = threading.Event()
    release = threading.Event()

    def add(self, seqs: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        if not _GatedScan.entered.is_set():
            _GatedScan.entered.set()
            assert _GatedScan.release.wait(30), "the test never released the build"
        super().add(seqs, vectors)


def _gated(monkeypatch: pytest.MonkeyPatch) -> type[_GatedScan]:
    monkeypatch.setattr(_GatedScan, "entered", threading.Event())
    monkeypatch.setattr(_GatedScan, "release", threading.Event())
    monkeypatch.setattr(vectors_module, "CodeScan", _GatedScan)
    return _GatedScan


def _in_thread(work: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_codes_are_built_outside_the_lock_and_rows_added_meanwhile_are_coded(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    vectors = _unit(rng.standard_normal((3_100, 16)))
    seqs = np.arange(1, 3_101, dtype=np.int64)
    exact = VectorIndex(16, neighbour_weights=(0.4, 0.2))
    index = VectorIndex(16, neighbour_weights=(0.4, 0.2), approximate_from=1_000)
    index.extend("small", seqs[:10], vectors[:10], 10)
    gate = _gated(monkeypatch)
    builder = _in_thread(lambda: index.extend("big", seqs[:3_000], vectors[:3_000], 3_000))
    assert gate.entered.wait(30)
    # While the codes are built: another user's search and an add go on; this user's search waits.
    other = _in_thread(lambda: index.search("small", vectors[3], 1))
    other.join(10)
    assert not other.is_alive(), "a search of another user waited for the build"
    found: list[list[tuple[int, float]]] = []
    waiting = _in_thread(lambda: found.append(index.search("big", vectors[5], 5)))
    added = _in_thread(lambda: index.extend("big", seqs[3_000:], vectors[3_000:], 3_100))
    added.join(10)
    assert not added.is_alive(), "an add of the user being coded waited for the build"
    waiting.join(0.3)
    assert waiting.is_alive() and index._blocks["big"].approximation is None
    gate.release.set()
    builder.join(30)
    waiting.join(30)
    exact.extend("big", seqs, vectors, 3_100)
    _same_ranking(found[0], exact.search("big", vectors[5], 5))
    block = index._blocks["big"]
    assert block.approximation is not None and len(block.approximation.own) == 3_100
    assert not block.building and not block.wants_codes
    assert block.approximation.blended_through == 3_098  # the last two wait for their neighbours
    assert index.search("big", vectors[3_050], 1, own_only=True)[0][0] == 3_051


def test_rows_removed_while_codes_are_built_leave_their_codes_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(12)
    vectors = _unit(rng.standard_normal((3_000, 16)))
    seqs = np.arange(1, 3_001, dtype=np.int64)
    index = VectorIndex(16, neighbour_weights=(0.4, 0.2), approximate_from=1_000, rescored_rows=1)
    gate = _gated(monkeypatch)
    builder = _in_thread(lambda: index.extend("u", seqs, vectors, 3_000))
    assert gate.entered.wait(30)
    removed = seqs[::60]  # 50 rows, 250 codes stale: copied in seq order, the build goes on
    index.remove("u", removed)
    gate.release.set()
    builder.join(30)
    block = index._blocks["u"]
    copied = vectors_module.BUILD_CHUNK_ROWS  # the first chunk was copied before the removal, the rest after
    assert block.approximation is not None
    assert len(block.approximation.own) == 3_000 - int(np.sum(removed > copied))  # one build
    assert block.approximation.stale == 250 and not block.wants_codes  # under a tenth of 2,950
    found = {seq for seq, _ in index.search("u", vectors[2], 20)}
    assert 3 in found and not found & set(removed.tolist())  # row 2 is turn 3
    index.remove("u", seqs[1::60])  # 50 more: past a tenth of the rows, built again
    assert block.approximation.stale == 0 and len(block.approximation.own) == 2_900


def test_a_turn_out_of_order_while_codes_are_built_starts_the_build_again(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(14)
    vectors = _unit(rng.standard_normal((3_001, 16)))
    seqs = np.arange(2, 6_002, 2, dtype=np.int64)
    index = VectorIndex(16, approximate_from=1_000, rescored_rows=1)
    gate = _gated(monkeypatch)
    builder = _in_thread(lambda: index.extend("u", seqs[:3_000], vectors[:3_000], 3_000))
    assert gate.entered.wait(30)
    index.extend("u", np.asarray([1_001], np.int64), vectors[3_000:], 3_001)  # between two rows: a re-sort
    gate.release.set()
    builder.join(30)
    block = index._blocks["u"]
    assert block.approximation is not None and block.approximation.stale == 0
    assert len(block.approximation.own) == 3_001
    assert index.search("u", vectors[3_000], 1, own_only=True)[0][0] == 1_001


def test_a_user_unloaded_while_codes_are_built_is_not_coded(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(15)
    vectors = _unit(rng.standard_normal((2_000, 16)))
    index = VectorIndex(16, approximate_from=1_000)
    gate = _gated(monkeypatch)
    builder = _in_thread(lambda: index.extend("u", np.arange(1, 2_001, dtype=np.int64), vectors, 2_000))
    assert gate.entered.wait(30)
    index.drop("u")
    gate.release.set()
    builder.join(30)
    assert not builder.is_alive() and "u" not in index._blocks and index.stats()["approximate_users"] == 0


def test_a_failed_build_leaves_the_block_searchable_and_the_next_change_builds_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(13)
    vectors = _unit(rng.standard_normal((1_200, 16)))
    seqs = np.arange(1, 1_201, dtype=np.int64)
    index = VectorIndex(16, approximate_from=1_000)

    class Broken(CodeScan):
        def add(self, seqs: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
            raise MemoryError("no room for codes")

    monkeypatch.setattr(vectors_module, "CodeScan", Broken)
    with pytest.raises(MemoryError):
        index.extend("u", seqs[:1_100], vectors[:1_100], 1_100)
    block = index._blocks["u"]
    assert block.approximation is None and not block.building and block.wants_codes
    assert index.search("u", vectors[7], 1)[0][0] == 8  # exactly meanwhile
    monkeypatch.setattr(vectors_module, "CodeScan", CodeScan)
    index.extend("u", seqs[1_100:], vectors[1_100:], 1_200)
    assert block.approximation is not None and len(block.approximation.own) == 1_200
