"""In-memory vector search per user, derived from the store and rebuildable from it.

Exact, but for users with at least ``approximate_from`` vectors: those are scanned through a
product-quantized scan and their best candidates rescored exactly (``retrieval/approximate.py``).
Codes are built outside the index's lock (about a minute at a million rows), so other users'
searches and writes go on meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from memstrata.embeddings.base import Vectors
from memstrata.retrieval.approximate import (
    RESCORED_PER_RESULT,
    RESCORED_ROWS,
    CodeScan,
    from_bfloat16,
    rescored_count,
    supports,
    to_bfloat16,
    training_rows,
)

Seqs = npt.NDArray[np.int64]
BLEND_CHUNK_ROWS = 8192
#: Rows gathered, decoded and scored at a time: a chunk's float32 copy (1.5 MB at 384 dimensions) stays in cache.
COSINE_CHUNK_ROWS = 1024
#: Rows coded (and blended for coding) at a time.
CODE_CHUNK_ROWS = 32_768
#: Fewest rows an approximate block needs before its codes are built (a quantizer trains on them).
MIN_CODED_ROWS = 1_000
#: Share of an approximate block's rows whose codes may be stale before they are built again.
REBUILD_STALE_SHARE = 0.1
#: How many users unloaded for room the index remembers, to tell a reload (thrashing) from a first load.
REMEMBERED_UNLOADS = 10_000
#: At most one thrashing warning per this many seconds.
WARN_EVERY_SECONDS = 600.0
#: Rows copied out of a block at a time while its codes are built: the lock is held about 30 ms
#: each for rows spread over the block (a training sample), a few ms for a run of rows.
BUILD_CHUNK_ROWS = 2_048
#: Times a build starts again when the block's rows move under it (a delete, a turn out of order).
BUILD_TRIES = 3

log = logging.getLogger("memstrata.vectors")


@dataclass(kw_only=True)
class _Block:
    """One user's vectors in turn order; rows past ``size`` are spare capacity."""

    seqs: Seqs
    vectors: Vectors
    size: int = 0
    high_water: int = 0  # the largest store vector id seen, for catching up
    # |v + Σ_d w_d·(v_{-d} + v_{+d})| per row: with it a blend's cosine comes from the rows' own
    # cosines, so search reads the vectors once instead of keeping a blended copy.
    blend_norms: npt.NDArray[np.float32] | None = None
    # A large user's block: ``vectors`` are bfloat16 bits (half the memory; only candidates are
    # read whole) and the codes below are scanned first.
    approximation: _Approximation | None = None
    # Codes are wanted (none yet, or too many stale), and whether a build is running: it runs
    # outside the lock, copying rows in seq order. A re-sort (a turn out of order) bumps
    # ``resorts``, which starts it again; rows removed meanwhile (``removed``, all so far)
    # leave their codes stale, as removals after a build do.
    wants_codes: bool = False
    building: bool = False
    resorts: int = 0
    removed: int = 0


@dataclass(kw_only=True)
class _Approximation:
    """The coded scans of a large user: of each row's own vector and of its blend."""

    own: CodeScan
    blend: CodeScan | None
    # The last seq whose blend is coded: a later row's neighbourhood is not complete yet, so it
    # is always rescored (at most a few rows, the most recent).
    blended_through: int = 0
    # Rows whose codes no longer match them (deleted, replaced, or neighbours of those); past
    # REBUILD_STALE_SHARE of the rows the codes are built again.
    stale: int = 0


class VectorIndex:
    """Brute-force cosine search (vectors are unit-norm, so a dot product) over each user's turns.

    With ``neighbour_weights`` a turn also scores its blend with the turns around it, computed
    from the rows' own cosines and one norm per row (docs/retrieval.md#1-candidates). This is a
    per-user cache of the store's vectors, loaded on first use and caught up by the caller past
    ``high_water`` before each search, so a process that died mid-update leaves nothing behind.
    """

    def __init__(
        self,
        dimension: int,
        *,
        neighbour_weights: Sequence[float] = (),
        max_rows: int | None = None,
        approximate_from: int | None = None,
        rescored_rows: int = RESCORED_ROWS,
        rescored_per_result: int = RESCORED_PER_RESULT,
    ) -> None:
        self.dimension = dimension
        self.neighbour_weights = tuple(float(weight) for weight in neighbour_weights)
        # A user's block reaching this many rows (or loaded with room for them) is searched
        # approximately from then on, until it is unloaded; None: always exactly.
        self.approximate_from = approximate_from if supports(dimension) else None
        # Rows of each coded scan rescored: at least ``rescored_rows``, and this many per result asked.
        self.rescored = (rescored_rows, rescored_per_result)
        # Users' blocks in the order they were last searched or loaded, least recent first. Past
        # ``max_rows`` rows held in all, the least recent users are unloaded (their next search
        # reloads them from the store); the user being loaded stays, however large.
        self.max_rows = max_rows
        self._blocks: dict[str, _Block] = {}
        self._pins: dict[str, int] = {}
        self._lock = threading.Lock()
        # Notified when a build of codes ends: a search of that user waits for it (``search_within``).
        self._coded = threading.Condition(self._lock)
        # Bumped by every removal, so a batch read from the store before a delete or forget
        # committed cannot put the deleted vectors back (see ``extend``).
        self._epoch = 0
        self._generations: dict[str, int] = {}
        # Users unloaded for room (most recent last), and how often that and a reload of one happened.
        self._unloaded: OrderedDict[str, None] = OrderedDict()
        self._unloads = 0
        self._reloads = 0
        self._warned_at: float | None = None

    def high_water(self, user_id: str) -> int | None:
        """The last store vector id loaded for ``user_id``, or ``None`` if never loaded."""
        block = self._blocks.get(user_id)
        return None if block is None else block.high_water

    def generation(self, user_id: str) -> tuple[int, int]:
        """Changes whenever vectors of ``user_id`` are removed; pass it back to ``extend``."""
        with self._lock:
            return self._epoch, self._generations.get(user_id, 0)

    def extend(
        self,
        user_id: str,
        seqs: Seqs,
        vectors: Vectors,
        high_water: int,
        generation: tuple[int, int] | None = None,
        *,
        reserve: int = 0,
    ) -> None:
        """Append vectors for turns ``seqs`` and record ``high_water``; known seqs are replaced.

        With the ``generation`` read before the batch was fetched, a batch that a removal
        overtook is ignored (the next catch-up reads the store again). ``reserve``: room for
        at least this many rows when the user's arrays must grow (a load in chunks says how
        many are coming).
        """
        warn = False
        with self._lock:
            if generation is not None and generation != (self._epoch, self._generations.get(user_id, 0)):
                return
            block = self._blocks.get(user_id)
            if block is None:
                if not len(seqs):
                    return  # a user with no vectors yet takes no room: a search for any name is one store read
                block = _Block(seqs=np.zeros(0, np.int64), vectors=np.zeros((0, self.dimension), np.float32))
                self._blocks[user_id] = block
                if user_id in self._unloaded:
                    del self._unloaded[user_id]
                    warn = self._note_reload_locked()
            if len(seqs):
                self._remove_locked(block, seqs)
                self._append_locked(block, np.asarray(seqs, np.int64), np.asarray(vectors, np.float32), reserve)
            block.high_water = max(block.high_water, high_water)
            self._touch_locked(user_id)
            self._evict_locked(keep=user_id)
            build = block.wants_codes and not block.building
        if warn:
            self._warn_of_reloads()
        if build:
            self._build_codes(user_id)

    @contextmanager
    def pinned(self, user_id: str) -> Iterator[None]:
        """Keep ``user_id`` loaded while held: a search holds it from its catch-up to its scan."""
        with self._lock:
            self._pins[user_id] = self._pins.get(user_id, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._pins.pop(user_id) - 1
                if left:
                    self._pins[user_id] = left

    def rows(self) -> int:
        """Rows held in memory for all users (the arrays' capacity, which is what they take)."""
        with self._lock:
            return sum(len(block.seqs) for block in self._blocks.values())

    def stats(self) -> dict[str, int | None]:
        """Rows held, the limit, users loaded and unloaded for room, reloads of such users, users coded."""
        with self._lock:
            return {
                "rows": sum(len(block.seqs) for block in self._blocks.values()),
                "limit": self.max_rows,
                "users": len(self._blocks),
                "unloads": self._unloads,
                "reloads": self._reloads,
                "approximate_users": sum(block.approximation is not None for block in self._blocks.values()),
            }

    def _note_reload_locked(self) -> bool:
        """Count a reload of a user unloaded for room; whether to say so now (at most every WARN_EVERY_SECONDS)."""
        self._reloads += 1
        now = time.monotonic()
        if self._warned_at is not None and now - self._warned_at < WARN_EVERY_SECONDS:
            return False
        self._warned_at = now
        return True

    def _warn_of_reloads(self) -> None:
        """Say that searches are taking turns unloading each other (called outside the lock: logging may block)."""
        log.warning(
            "the vector cache holds at most %s rows (vector_cache_rows) and has reloaded users it unloaded "
            "for room %d times (%d unloads): searches are taking turns unloading each other, and each reads "
            "its user's vectors from the store again; raise vector_cache_rows above the largest user plus "
            "those searched often",
            f"{self.max_rows:,}",
            self._reloads,
            self._unloads,
        )

    def _touch_locked(self, user_id: str) -> None:
        """Mark ``user_id`` as the most recently used (dicts keep insertion order)."""
        self._blocks[user_id] = self._blocks.pop(user_id)

    def _evict_locked(self, keep: str) -> None:
        if self.max_rows is None:
            return
        held = sum(len(block.seqs) for block in self._blocks.values())
        for user_id in list(self._blocks):  # least recently used first
            if held <= self.max_rows:
                return
            if user_id != keep and user_id not in self._pins:
                held -= len(self._blocks[user_id].seqs)
                self._overtake_locked(user_id)  # a load of theirs running now must not come back
                del self._blocks[user_id]
                self._unloads += 1
                self._unloaded[user_id] = None
                self._unloaded.move_to_end(user_id)
                if len(self._unloaded) > REMEMBERED_UNLOADS:
                    self._unloaded.popitem(last=False)

    def remove(self, user_id: str, seqs: Seqs) -> None:
        """Forget the vectors of turns ``seqs`` (no-op for unknown ones)."""
        with self._lock:
            self._overtake_locked(user_id)
            block = self._blocks.get(user_id)
            if block is None:
                return
            self._remove_locked(block, np.asarray(seqs, np.int64))
            build = block.wants_codes and not block.building
        if build:
            self._build_codes(user_id)

    def drop(self, user_id: str | None = None) -> None:
        """Unload one user's vectors, or everyone's; the next search reloads from the store."""
        with self._lock:
            if user_id is None:
                self._epoch += 1
                self._blocks.clear()
                self._unloaded.clear()  # their next loads are a rebuild, not searches taking turns
            else:
                self._overtake_locked(user_id)
                self._blocks.pop(user_id, None)
                self._unloaded.pop(user_id, None)

    def _overtake_locked(self, user_id: str) -> None:
        """Make a batch read before now useless to ``extend``, for ``user_id`` at least.

        A user this index holds or held gets a count of their own; for any other name (a
        forget of a user never searched here, or of one who never existed) the epoch moves
        instead, so such names take no room: that only costs loads running at this moment a
        second read.
        """
        if user_id in self._generations or user_id in self._blocks:
            self._generations[user_id] = self._generations.get(user_id, 0) + 1
        else:
            self._epoch += 1

    def search(
        self, user_id: str, query: Vectors, limit: int, allowed: Seqs | None = None, *, own_only: bool = False
    ) -> list[tuple[int, float]]:
        """The ``limit`` most similar turns of ``user_id`` as (seq, cosine), best first.

        With ``own_only`` each turn scores by its own vector, never by the blend of its
        neighbours: a search narrowed to one agent or session must not rank a turn by what
        was said around it outside that scope.
        """
        return self.search_within(user_id, query, limit, [allowed], own_only=own_only)[0]

    def search_within(
        self, user_id: str, query: Vectors, limit: int, allowed: Sequence[Seqs | None], *, own_only: bool = False
    ) -> list[list[tuple[int, float]]]:
        """``search`` once per entry of ``allowed`` (None: every turn), scoring the vectors once for all."""
        with self._lock:
            block = self._blocks.get(user_id)
            while block is not None and block.building and block.approximation is None:
                # Its first codes are being built: a search of every row would hold the lock for long.
                self._coded.wait()
                block = self._blocks.get(user_id)
            if block is None or block.size == 0 or limit < 1:
                return [[] for _ in allowed]
            self._touch_locked(user_id)
            query = np.asarray(query, np.float32)
            if block.approximation is not None:
                every_seq, every_score = self._approximate_locked(block, query, limit, allowed, own_only)
            else:
                # A copy: a concurrent delete or re-sort rewrites the block once the lock is released.
                every_seq = block.seqs[: block.size].copy()
                every_score = self._all_cosines(block, query)
                if block.blend_norms is not None and not own_only:
                    # A turn is found by itself or by its neighbourhood, whichever is closer.
                    every_score = np.maximum(
                        every_score, self._blend_scores(every_score, block.blend_norms[: block.size])
                    )
        found: list[list[tuple[int, float]]] = []
        for subset in allowed:
            seqs, scores = every_seq, every_score
            if subset is not None:
                mask = np.isin(seqs, subset)
                seqs, scores = seqs[mask], scores[mask]
            if len(scores) == 0:
                found.append([])
                continue
            count = min(limit, len(scores))
            top = np.argpartition(-scores, count - 1)[:count]
            top = top[np.lexsort((seqs[top], -scores[top]))]
            found.append([(int(seqs[i]), float(scores[i])) for i in top])
        return found

    def _append_locked(self, block: _Block, seqs: Seqs, vectors: Vectors, reserve: int = 0) -> None:
        needed = block.size + len(seqs)
        approximate = block.approximation is not None or (
            self.approximate_from is not None and max(needed, reserve) >= self.approximate_from
        )
        if needed > len(block.seqs) or (approximate and block.vectors.dtype != np.uint16):
            capacity = len(block.seqs)
            if needed > capacity:
                # Room for a quarter more: a large user's next turn must not double what the cache holds.
                capacity = max(needed, reserve, capacity + max(64, capacity // 4))
            self._grow_locked(block, capacity, half=approximate)
        start = block.size
        in_order = start == 0 or int(np.min(seqs)) > int(block.seqs[start - 1])
        block.seqs[start:needed] = seqs
        block.vectors[start:needed] = to_bfloat16(vectors) if block.vectors.dtype == np.uint16 else vectors
        block.size = needed
        if not in_order or not np.all(np.diff(block.seqs[start:needed]) > 0):
            in_order = False
            block.resorts += 1
            order = np.argsort(block.seqs[:needed], kind="stable")
            block.seqs[:needed] = block.seqs[:needed][order]
            block.vectors[:needed] = block.vectors[:needed][order]
            start = 0
        self._blend_locked(block, start)
        if approximate:
            self._code_locked(block, seqs, vectors, in_order, reserve)

    def _grow_locked(self, block: _Block, capacity: int, *, half: bool) -> None:
        """Give ``block`` room for ``capacity`` rows, its vectors as float32 or (``half``) bfloat16 bits."""
        grown_seqs = np.zeros(capacity, np.int64)
        grown_vectors = np.zeros((capacity, self.dimension), np.uint16 if half else np.float32)
        grown_seqs[: block.size] = block.seqs[: block.size]
        held = block.vectors[: block.size]
        grown_vectors[: block.size] = to_bfloat16(held) if half and held.dtype != np.uint16 else held
        block.seqs, block.vectors = grown_seqs, grown_vectors

    def _code_locked(self, block: _Block, seqs: Seqs, vectors: Vectors, in_order: bool, reserve: int = 0) -> None:
        """Code the rows just added to an approximate ``block``, and ask for codes built anew when due.

        Codes are due once the block has enough rows to train on and has none, or too many
        stale; the caller builds them once the lock is released (``_build_codes``), the old ones
        serving meanwhile. A load in chunks announces its rows in ``reserve``: the codes wait for
        the last chunk, so their lists are trained on a sample of all the rows, not the oldest few.
        """
        approximation = block.approximation
        if approximation is None and block.size < reserve:
            return
        if approximation is not None:
            approximation.own.add(np.asarray(seqs, np.int64), vectors)
            if in_order:
                self._code_blends_locked(block, approximation)
            else:  # an old turn's blend and its neighbours' moved: their codes wait for a rebuild
                approximation.stale += len(seqs) * (1 + 2 * len(self.neighbour_weights))
        self._want_codes_locked(block)

    def _want_codes_locked(self, block: _Block) -> None:
        """Ask for codes when ``block`` has none or too many stale; too few rows to train on: searched exactly."""
        approximation = block.approximation
        if block.building or (approximation is not None and approximation.stale <= REBUILD_STALE_SHARE * block.size):
            return  # a build running codes the rows added meanwhile, and starts again if rows moved
        block.wants_codes = block.size >= MIN_CODED_ROWS
        if not block.wants_codes:
            block.approximation = None

    def _build_codes(self, user_id: str) -> None:
        """Build the codes ``user_id``'s block wants, holding the lock only to copy rows out of it.

        Rows appended meanwhile are coded when the codes are put in place, and rows removed
        meanwhile count as stale; if a turn came out of order (a re-sort), the build starts
        again, up to ``BUILD_TRIES`` times, then waits for the next change to the block.
        """
        for _ in range(BUILD_TRIES):
            with self._lock:
                block = self._blocks.get(user_id)
                if block is None or block.building or not block.wants_codes:
                    return
                block.building, block.wants_codes = True, False
                resorts, removed, size = block.resorts, block.removed, block.size
                last, blend = int(block.seqs[size - 1]), block.blend_norms is not None
            try:
                built = self._built(user_id, block, resorts=resorts, size=size, last=last, blend=blend)
            except BaseException:
                with self._lock:
                    block.building = False
                    self._want_codes_locked(block)  # the next change to the block tries again
                    self._coded.notify_all()
                raise
            with self._lock:
                block.building = False
                self._coded.notify_all()
                if self._blocks.get(user_id) is not block:
                    return  # unloaded meanwhile: its next load builds anew
                if built is not None and block.resorts == resorts:
                    approximation, through = built
                    tail = int(np.searchsorted(block.seqs[: block.size], through, side="right"))
                    if tail < block.size:  # appended meanwhile
                        approximation.own.add(block.seqs[tail : block.size], self._read(block, slice(tail, block.size)))
                    approximation.stale = (block.removed - removed) * (1 + 2 * len(self.neighbour_weights))
                    self._code_blends_locked(block, approximation)
                    block.approximation = approximation
                    self._want_codes_locked(block)  # so many removed meanwhile that they are due again
                    return
                self._want_codes_locked(block)  # a re-sort meanwhile: again, if codes are still due

    def _current(self, user_id: str, block: _Block, resorts: int) -> bool:
        """Whether ``block`` is still ``user_id``'s and not re-sorted since ``resorts`` (called locked)."""
        return self._blocks.get(user_id) is block and block.resorts == resorts

    def _built(
        self, user_id: str, block: _Block, *, resorts: int, size: int, last: int, blend: bool
    ) -> tuple[_Approximation, int] | None:
        """Codes of ``block``'s rows up to seq ``last``, and the last seq coded; None if it moved on meanwhile.

        The scans train on a sample of the ``size`` rows; rows are then copied a chunk at a time
        in seq order, each chunk under the lock, and coded outside it. Blends are coded for the
        rows whose neighbours were all there (``_code_blends_locked`` codes the rest when the
        codes are put in place).
        """
        weights = len(self.neighbour_weights)
        sample = training_rows(size)
        own_sample: list[npt.NDArray[np.float32]] = []
        blend_sample: list[npt.NDArray[np.float32]] = []
        for low in range(0, len(sample), BUILD_CHUNK_ROWS):
            with self._lock:
                if not self._current(user_id, block, resorts):
                    return None
                piece = np.minimum(sample[low : low + BUILD_CHUNK_ROWS], block.size - 1)  # rows removed: nearby ones
                own_sample.append(self._read(block, piece))
                if blend:
                    blend_sample.append(self._blended_locked(block, piece))
            time.sleep(0)  # the lock is not fair: let a search waiting for it take it before the next piece
        approximation = _Approximation(
            own=CodeScan(self.dimension, np.concatenate(own_sample), size),
            blend=CodeScan(self.dimension, np.concatenate(blend_sample), size) if blend else None,
        )
        del own_sample, blend_sample
        through = int(np.iinfo(np.int64).min)  # the last seq coded
        while True:
            with self._lock:
                if not self._current(user_id, block, resorts):
                    return None
                seqs = block.seqs[: block.size]
                start = int(np.searchsorted(seqs, through, side="right"))
                stop = min(start + BUILD_CHUNK_ROWS, int(np.searchsorted(seqs, last, side="right")))
                if start >= stop:
                    return approximation, through
                copied = seqs[start:stop].copy()
                vectors = self._read(block, np.arange(start, stop))
                complete = max(0, min(stop, block.size - weights) - start)  # rows whose neighbours are all there
                blends = self._blended_locked(block, np.arange(start, start + complete)) if blend and complete else None
            time.sleep(0)
            approximation.own.add(copied, vectors)
            if blends is not None and approximation.blend is not None:
                approximation.blend.add(copied[:complete], blends)
                approximation.blended_through = int(copied[complete - 1])
            through = int(copied[-1])

    def _code_blends_locked(self, block: _Block, approximation: _Approximation) -> None:
        """Code the blends of the rows whose neighbourhood is complete and not coded yet."""
        if approximation.blend is None:
            return
        seqs = block.seqs[: block.size]
        first = int(np.searchsorted(seqs, approximation.blended_through, side="right"))
        last = block.size - len(self.neighbour_weights)  # the rows after it still wait for neighbours
        for low in range(first, last, CODE_CHUNK_ROWS):
            high = min(last, low + CODE_CHUNK_ROWS)
            approximation.blend.add(seqs[low:high], self._blended_locked(block, np.arange(low, high)))
        if last > first:
            approximation.blended_through = int(seqs[last - 1])

    def _approximate_locked(
        self, block: _Block, query: Vectors, limit: int, allowed: Sequence[Seqs | None], own_only: bool
    ) -> tuple[Seqs, npt.NDArray[np.float32]]:
        """The seqs and exact scores of the rows the coded scans rank best for any of ``allowed``.

        Each list takes the best ``rescored_count(limit)`` rows of each scan: those of the scan
        of own vectors are scored by their own vector, those of the scan of blends (unless
        ``own_only``) by their own vector or their blend, both exactly. The caller ranks the
        rows returned as it ranks a whole block. A list allowing few rows scores them all.
        """
        assert block.approximation is not None
        size, seqs = block.size, block.seqs[: block.size]
        blend = block.blend_norms is not None and not own_only
        query = np.asarray(query, np.float32)
        count = rescored_count(limit, *self.rescored)
        by_own: list[Seqs] = []  # rows scored by their own vector
        by_both: list[Seqs] = []  # rows scored by the better of their own vector and their blend
        for subset in allowed:
            if subset is not None:
                rows = np.flatnonzero(np.isin(seqs, subset))
                if len(rows) <= 2 * count:
                    (by_both if blend else by_own).append(rows)
                    continue
                # Scan deep enough that about ``count`` of the best fall inside the subset.
                wanted = min(size, count * -(-size // len(rows)))
            else:
                wanted = count
            own, blended = self._scanned_locked(block, query, wanted, blend)
            if subset is not None:
                own, blended = own[np.isin(seqs[own], subset)], blended[np.isin(seqs[blended], subset)]
            by_own.append(own)
            by_both.append(blended)
        both = np.unique(np.concatenate(by_both))
        alone = np.setdiff1d(np.concatenate(by_own), both)
        rows = np.concatenate([alone, both])
        scores = np.concatenate(
            [
                self._cosines(block, alone, query),
                self._exact_scores_locked(block, both, query, blend) if len(both) else np.zeros(0, np.float32),
            ]
        )
        return seqs[rows].copy(), scores

    def _scanned_locked(self, block: _Block, query: Vectors, wanted: int, blend: bool) -> tuple[Seqs, Seqs]:
        """The rows (sorted) in the best ``wanted`` of the scan of own vectors, and of the scan of blends.

        With ``blend``, the rows whose blend is not coded yet (the latest few) count as found by it.
        """
        approximation = block.approximation
        assert approximation is not None
        size, seqs = block.size, block.seqs[: block.size]

        def rows_of(found: tuple[Seqs, Seqs]) -> Seqs:
            positions, labels = found
            if not approximation.stale:
                # Codes were added in row order and no row has moved since: a code's position is its row.
                return np.sort(positions)
            labels = np.sort(labels)  # sorted needles walk the seqs in order: far fewer cache misses
            rows = np.minimum(np.searchsorted(seqs, labels), size - 1)
            held: Seqs = rows[seqs[rows] == labels]  # the codes of deleted turns find nothing
            return held

        own = rows_of(approximation.own.best(query, wanted))
        if not blend or approximation.blend is None:
            return own, np.zeros(0, np.int64)
        waiting = np.arange(int(np.searchsorted(seqs, approximation.blended_through, side="right")), size)
        return own, np.union1d(rows_of(approximation.blend.best(query, wanted)), waiting)

    def _exact_scores_locked(
        self, block: _Block, rows: npt.NDArray[np.int64], query: Vectors, blend: bool
    ) -> npt.NDArray[np.float32]:
        """The scores the exact path gives ``rows``, reading only them and their neighbours."""
        query = np.asarray(query, np.float32)
        if not blend or block.blend_norms is None:
            return self._cosines(block, rows, query)
        # Every row a score reads: the rows themselves and those ``reach`` around them, marked in a
        # mask and their cosines scattered into a block-long array (cheaper than looking each up).
        around = np.arange(-len(self.neighbour_weights), len(self.neighbour_weights) + 1)
        read = np.zeros(block.size, np.bool_)
        read[np.clip(rows[:, None] + around, 0, block.size - 1)] = True
        wanted = np.flatnonzero(read)
        cosines = np.empty(block.size, np.float32)
        cosines[wanted] = self._cosines(block, wanted, query)
        blended = cosines[rows]
        for distance, weight in enumerate(self.neighbour_weights, start=1):
            before = rows - distance
            has = before >= 0
            blended[has] += weight * cosines[before[has]]
            after = rows + distance
            has = after < block.size
            blended[has] += weight * cosines[after[has]]
        best: npt.NDArray[np.float32] = np.maximum(cosines[rows], blended / block.blend_norms[rows])
        return best

    @classmethod
    def _all_cosines(cls, block: _Block, query: Vectors) -> npt.NDArray[np.float32]:
        """The cosines of all ``block``'s rows with ``query`` (bfloat16 rows decoded a chunk at a time)."""
        if block.vectors.dtype != np.uint16:
            every: npt.NDArray[np.float32] = block.vectors[: block.size] @ query
            return every
        cosines = np.empty(block.size, np.float32)
        for low in range(0, block.size, COSINE_CHUNK_ROWS):
            high = min(block.size, low + COSINE_CHUNK_ROWS)
            cosines[low:high] = cls._read(block, slice(low, high)) @ query
        return cosines

    @classmethod
    def _cosines(cls, block: _Block, rows: npt.NDArray[np.int64], query: Vectors) -> npt.NDArray[np.float32]:
        """The cosines of ``block``'s vectors at ``rows`` with ``query``, a few rows at a time.

        A chunk's decoded float32 copy stays in the core's cache between the gather and the
        product, where one copy of all the rows would go out to memory and back.
        """
        cosines = np.empty(len(rows), np.float32)
        for low in range(0, len(rows), COSINE_CHUNK_ROWS):
            high = low + COSINE_CHUNK_ROWS
            cosines[low:high] = cls._read(block, rows[low:high]) @ query
        return cosines

    @staticmethod
    def _read(block: _Block, rows: slice | npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        """``block``'s vectors at ``rows`` as float32 (decoded when held as bfloat16)."""
        held = block.vectors[rows]
        return from_bfloat16(held.view(np.uint16)) if held.dtype == np.uint16 else held

    def _blend_scores(self, own: npt.NDArray[np.float32], norms: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Each row's cosine with its blended neighbourhood, from the rows' own cosines."""
        blended = own.copy()
        for distance, weight in enumerate(self.neighbour_weights, start=1):
            if distance >= len(own):
                break
            blended[distance:] += weight * own[:-distance]
            blended[:-distance] += weight * own[distance:]
        return blended / norms

    def _blend_locked(self, block: _Block, start: int) -> None:
        """Recompute the blend norms from ``start`` on, and of the rows before it whose neighbours changed."""
        weights = self.neighbour_weights
        if not any(weights):
            block.blend_norms = None
            return
        if block.blend_norms is None or len(block.blend_norms) != len(block.vectors):
            previous, block.blend_norms = block.blend_norms, np.ones(len(block.vectors), np.float32)
            if previous is None:
                start = 0
            else:
                kept = min(len(previous), len(block.blend_norms))
                block.blend_norms[:kept] = previous[:kept]
        # In chunks, so loading a large user never holds a second full copy of its vectors.
        for low in range(max(0, start - len(weights)), block.size, BLEND_CHUNK_ROWS):
            high = min(block.size, low + BLEND_CHUNK_ROWS)
            norms = np.linalg.norm(self._blended_locked(block, np.arange(low, high), normalized=False), axis=1)
            block.blend_norms[low:high] = np.where(norms == 0, 1.0, norms)

    def _blended_locked(
        self, block: _Block, rows: npt.NDArray[np.int64], *, normalized: bool = True
    ) -> npt.NDArray[np.float32]:
        """The blends of ``block``'s ``rows`` (unit vectors unless not ``normalized``), as float32."""
        if len(rows) and int(rows[-1]) - int(rows[0]) + 1 == len(rows):
            blended = self._blended_run_locked(block, int(rows[0]), int(rows[-1]) + 1)
            if normalized and block.blend_norms is not None:
                blended /= block.blend_norms[rows, None]
            return blended
        blended = self._read(block, rows).copy()
        for distance, weight in enumerate(self.neighbour_weights, start=1):
            before = rows - distance
            has_before = before >= 0
            blended[has_before] += weight * self._read(block, before[has_before])
            after = rows + distance
            has_after = after < block.size
            blended[has_after] += weight * self._read(block, after[has_after])
        if normalized and block.blend_norms is not None:
            blended /= block.blend_norms[rows, None]
        return blended

    def _blended_run_locked(self, block: _Block, low: int, high: int) -> npt.NDArray[np.float32]:
        """The unnormalized blends of the rows ``low`` to ``high`` (a run, as loading and coding read them).

        The run and the rows within reach around it are read and decoded once; each neighbour's
        term is then a shifted slice of them, not a gather of its own.
        """
        first, last = max(0, low - len(self.neighbour_weights)), min(block.size, high + len(self.neighbour_weights))
        window = self._read(block, slice(first, last))
        blended: npt.NDArray[np.float32] = window[low - first : high - first].copy()
        for distance, weight in enumerate(self.neighbour_weights, start=1):
            start = max(low, distance)  # rows with a row ``distance`` before them
            if start < high:
                blended[start - low :] += weight * window[start - distance - first : high - distance - first]
            end = min(high, block.size - distance)  # rows with a row ``distance`` after them
            if end > low:
                blended[: end - low] += weight * window[low + distance - first : end + distance - first]
        return blended

    def _remove_locked(self, block: _Block, seqs: Seqs) -> None:
        if block.size == 0 or len(seqs) == 0 or int(np.min(seqs)) > int(block.seqs[block.size - 1]):
            return  # none held (the rows are in seq order): a load's next chunk need not look
        keep = ~np.isin(block.seqs[: block.size], seqs)
        if keep.all():
            return
        kept = int(keep.sum())
        block.seqs[:kept] = block.seqs[: block.size][keep]
        block.vectors[:kept] = block.vectors[: block.size][keep]
        block.removed += block.size - kept
        block.size = kept
        self._blend_locked(block, 0)
        if block.approximation is not None:
            # The deleted rows' codes stay (their labels find nothing); their neighbours' blends moved.
            block.approximation.stale += (len(keep) - kept) * (1 + 2 * len(self.neighbour_weights))
            self._want_codes_locked(block)
