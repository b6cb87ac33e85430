"""The retrieval pipeline: candidates → fusion → rerank → diversity → hits, for one ``Query``."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, tzinfo
from typing import Protocol

import numpy as np

from memstrata.config import Settings
from memstrata.embeddings.base import Embedder
from memstrata.extraction.time_expressions import annotate, may_mention_relative_time
from memstrata.models import Hit, SearchFilters, Tier, Turn
from memstrata.retrieval.bursts import joined_bursts, one_per_burst, unread
from memstrata.retrieval.cell_candidates import CellCandidatePolicy, about_whom_asked, closest_cells, with_cells
from memstrata.retrieval.diversify import maximal_marginal_relevance
from memstrata.retrieval.fulltext import fts_query, indexed_text, term_coverage
from memstrata.retrieval.fusion import Fused, fuse_scored
from memstrata.retrieval.periods import covering_window
from memstrata.retrieval.query import DATED, ItemKey, Query, Rankings, asked_periods, joined, narrowed
from memstrata.retrieval.rerank import DEFAULT_RERANK, RerankPolicy, TurnSignals, rerank
from memstrata.retrieval.speakers import aliases, mentioned_speaker, without_speakers
from memstrata.retrieval.vectors import VectorIndex
from memstrata.storage.base import Seqs, ServerSideVectors, Vectors
from memstrata.storage.roles import SearchStore, TurnStore, VectorStore

#: How many of the best full-text matches tell how strongly full text matched (``term_coverage``).
LEXICAL_TOP = 5
#: Hits read beyond a search's limit, to take the place of the later pieces of a message burst.
BURST_SPARES = 10
#: Dates holding more of a user's turns than this are not searched on their own: a second
#: pass over that many turns costs more than it narrows (at 100k turns it doubled search time).
DATED_TURNS_LIMIT = 5_000
#: At most this many of a user's speaker names (the first in name order) are taken out of the
#: dense query; reading them costs an index seek each.
MAX_SPEAKERS_STRIPPED = 200

#: Query vectors kept for searches of the same text (the spaces of one federated search, a retry).
QUERY_VECTORS_KEPT = 64
#: Vectors read from the store at a time when loading a user (about 15 MB at 384 dimensions): the
#: index is locked while each chunk is added (about 40 ms), so other users wait at most that.
LOAD_CHUNK_ROWS = 10_000
#: Chunks a load re-reads because deletes overtook them, before it leaves the rest to the next search.
MAX_OVERTAKEN_LOADS = 10

Signals = dict[ItemKey, TurnSignals]
Owners = str | Sequence[str]
"""Whose memory a read is confined to: one user's (or space's) id, or several."""
"""Rerank signals of turns already read, kept across the reranks of one call."""


class RankingStore(TurnStore, SearchStore, VectorStore, Protocol):
    """What ranking reads: turns, their full text and filters, their vectors and the facts' vectors."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Terms:
    """What a query searches for in one memory: speakers' names to strip, full-text expressions, dates."""

    speakers: list[str]
    #: The full-text expression (None: vectors only).
    match: str | None
    #: The filters of the dates the query names, and the turns inside them (None: none named, or too many).
    dated: SearchFilters | None
    inside: Seqs | None
    #: What the dense retriever embeds: the query without the speakers' names.
    dense_text: str
    #: The expression derived items are searched by.
    derived_match: str | None


@dataclass(kw_only=True, frozen=True, slots=True)
class Prepared:
    """A query's terms, and its full-text candidates read for several memories in one pass (``Pipeline.prepare``)."""

    terms: Terms
    #: The candidates of every query prepared together, read on the full-text thread; this one's at ``index``.
    batch: Future[list[Rankings | None]]
    index: int

    def fulltext(self) -> Rankings | None:
        """This query's full-text candidates (None: it searches vectors only), once read."""
        return self.batch.result()[self.index]


@dataclass(slots=True)
class Found:
    """What the retrievers found for a query: their rankings, the query's vector, the facts found by meaning."""

    rankings: Rankings
    query_vector: Vectors | None = None
    by_meaning: set[int] = field(default_factory=set)


class Pipeline:
    """Ranks one user's memory for a ``Query``; built once per Memory, safe to share between threads.

    A turn the index offers that the store no longer has was deleted by another process: the
    user's vector index is then unloaded and ``reloads(user)`` goes up, so a caller can run once more.
    """

    def __init__(self, *, store: RankingStore, embedder: Embedder, index: VectorIndex, settings: Settings) -> None:
        self._store = store
        self._embedder = embedder
        self._index = index
        self._settings = settings
        #: How fused candidates are rescored (``retrieval/rerank.py``); replaceable.
        self.rerank_policy: RerankPolicy = DEFAULT_RERANK
        #: Which facts a query reaches by meaning (``retrieval/cell_candidates.py``); ``cells=0`` turns it off.
        self.cell_policy = CellCandidatePolicy()
        self._executor: ThreadPoolExecutor | None = None
        self._executor_lock = threading.Lock()
        self._query_vectors: dict[str, Vectors] = {}
        # Per user, bumped when a deletion by another process left the user's vector index stale.
        self._reloads: Counter[str] = Counter()

    def _query_vector(self, text: str) -> Vectors:
        """The query's vector, embedded once for searches of the same text (a federated search runs one per memory)."""
        with self._executor_lock:
            known = self._query_vectors.get(text)
            if known is not None:
                self._query_vectors[text] = self._query_vectors.pop(text)  # most recently used last
                return known
        vector = self._embedder.embed_query(text)
        vector.setflags(write=False)  # shared between searches
        with self._executor_lock:
            self._query_vectors[text] = vector
            while len(self._query_vectors) > QUERY_VECTORS_KEPT:
                self._query_vectors.pop(next(iter(self._query_vectors)))
        return vector

    def close(self) -> None:
        """Stop the full-text thread, if one started."""
        with self._executor_lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)

    def reloads(self, user_id: Owners) -> int:
        """How often ``user_id``'s vector index (or those of several memories) was found stale and unloaded."""
        return sum(self._reloads[owner] for owner in _each(user_id))

    def stale(self, user_id: Owners) -> None:
        """Unload ``user_id``'s vector index (or several), found stale: the next search reads it again."""
        for owner in _each(user_id):
            self._index.drop(owner)
            self._reloads[owner] += 1

    def search(
        self, query: Query, count: int, diversity: float = 0.0, *, prepared: Prepared | None = None
    ) -> list[Hit]:
        """The ``count`` best hits for ``query``, once more if the vector index turned out stale.

        ``prepared`` (from ``prepare``) serves the first try.
        """
        hits: list[Hit] = []
        for _ in range(2):
            reloads = self.reloads(query.user_id)
            rankings = joined(self.rankings(query, prepared).rankings)
            prepared = None
            loaded: dict[int, Turn] = {}
            fused = self.rerank(query, fuse_scored(rankings, k=self._settings.rrf_k), rankings, loaded)
            if diversity > 0:
                fused = self.diversify(fused, diversity, count)
            # A burst's later pieces go after the other hits: read spares for them to make way for.
            found = self.load_hits(fused, count + BURST_SPARES, query.user_id, loaded)
            hits = self.dated_facts(self.bursts(found, query.user_id, loaded)[:count], query.user_id, query.zone)
            if self.reloads(query.user_id) == reloads:
                break
        return hits

    def terms(self, query: Query) -> Terms:
        """What ``query`` searches the full text and the vectors for in its memory."""
        user_id, text, filters, mode, tiers = query.user_id, query.text, query.filters, query.mode, query.tiers
        # Speakers' names say whose turns, not what about: the dense retriever and the derived
        # items (whose text starts with their subject) read the rest. Read before the
        # full-text search starts, which would hold the store meanwhile.
        speakers = self._store.speakers(user_id, MAX_SPEAKERS_STRIPPED)
        # A speaker called by another form of the name ("Caroline" for "Caro") is searched by
        # the name the turns carry too.
        named = aliases(text, speakers)
        match = fts_query(" ".join([text, *sorted(set(named.values()))])) if mode != "vector" else None
        dated = narrowed(filters, covering_window(asked_periods(text, query.today), query.zone))
        inside = None if dated is None else self._store.filtered_seqs(user_id, dated, DATED_TURNS_LIMIT + 1)
        if inside is not None and not 0 < len(inside) <= DATED_TURNS_LIMIT:
            # Nothing said then, or dates spanning so much of the memory that they narrow little
            # (the reranker still lifts what was said then).
            dated = inside = None
        dense_text = text
        if mode != "fulltext" or (tiers and match is not None):
            dense_text = without_speakers(text, speakers)
        # Derived items by the query's words without the names; by the whole query when only names,
        # stopwords or words for saying are left ("Who is Caroline?", "What did Caroline say?").
        derived_match = (fts_query(dense_text, topical_only=True) or match) if tiers else None
        return Terms(
            speakers=speakers,
            match=match,
            dated=dated,
            inside=inside,
            dense_text=dense_text,
            derived_match=derived_match or match,
        )

    def rankings(self, query: Query, prepared: Prepared | None = None) -> Found:
        """Each retriever's scored candidates, best first: ``fulltext`` and ``vector`` turns, ``derived`` items.

        When the query names dates (``retrieval/periods.py``), each turn retriever also looks
        inside them, under ``fulltext:dated`` and ``vector:dated``, for ``joined`` to fold in.
        ``prepared`` holds the query's terms and full-text candidates, read already.
        """
        user_id, text, filters, mode, tiers = query.user_id, query.text, query.filters, query.mode, query.tiers
        found = Found({})
        terms = prepared.terms if prepared is not None else self.terms(query)
        speakers, match, dated, inside, dense_text = (
            terms.speakers,
            terms.match,
            terms.dated,
            terms.inside,
            terms.dense_text,
        )
        server_side = self._server_vectors()
        searches: dict[str, Seqs | None] = {}  # each vector list, with the seqs it may return (None: all)
        with contextlib.ExitStack() as pins:
            if mode != "fulltext":
                if server_side is None:
                    # Held until the scan: another user's load must not unload this user in between.
                    pins.enter_context(self._index.pinned(user_id))
                    self._sync_index(user_id)
                searches["vector"] = None if filters.is_empty else self._store.filtered_seqs(user_id, filters)
                if inside is not None:
                    searches[f"vector{DATED}"] = inside
            # Full-text ranking runs in SQLite (which releases the GIL) on the second core while
            # this thread embeds the query and scans the vectors: latency is the slower of the two.
            pending = (
                self.background().submit(self._fulltext_candidates, match, query, dated, terms.derived_match or match)
                if match is not None and prepared is None
                else None
            )
            if searches:
                found.query_vector = self._query_vector(dense_text)
                found.rankings.update(self._vector_lists(query, found.query_vector, searches, server_side))
        ready = pending.result() if pending is not None else prepared.fulltext() if prepared is not None else None
        if ready is not None:
            found.rankings = {**ready, **found.rankings}
        if Tier.LONGTERM in tiers and found.query_vector is not None:
            asked = mentioned_speaker(text, speakers)
            closest = self._cells_by_meaning(user_id, found.query_vector, asked, speakers)
            if closest:
                found.rankings["derived"] = with_cells(
                    found.rankings.get("derived", []), closest, k=self._settings.rrf_k
                )
                found.by_meaning.update(seq for (_, seq), _ in closest)
        return found

    def rerank(
        self,
        query: Query,
        fused: list[Fused[ItemKey]],
        rankings: Rankings,
        loaded: dict[int, Turn],
        signals: Signals | None = None,
    ) -> list[Fused[ItemKey]]:
        """Rescore fused candidates with the reranker (``retrieval/rerank.py``), best first.

        The turns read here are added to ``loaded``, and their signals to ``signals`` so a
        second rerank of the same call reuses them.
        """
        text = query.text
        turns = self.turns(query.owners, [seq for kind, seq in (item.key for item in fused) if kind == "turn"], loaded)
        known = signals if signals is not None else {}
        for seq, turn in turns.items():
            if ("turn", seq) not in known:
                when = turn.created_at.astimezone(query.zone)
                known["turn", seq] = TurnSignals.of(turn.name, turn.content, turn.session_id, when)
        scores = {name: dict(ranking) for name, ranking in rankings.items() if name != "derived"}
        # Derived items keep their fused score, so turns are scored with the same constant.
        coverage = 1.0
        if self.rerank_policy.lexical_floor > 0:
            best = [seq for (kind, seq), _ in rankings.get("fulltext", [])[:LEXICAL_TOP] if kind == "turn"]
            coverage = term_coverage(text, (indexed_text(turns[seq]) for seq in best if seq in turns))
        return rerank(
            text,
            fused,
            scores,
            {("turn", seq): known["turn", seq] for seq in turns},
            self.rerank_policy,
            k=self._settings.rrf_k,
            periods=asked_periods(text, query.today),
            coverage=coverage,
        )

    def diversify(self, fused: list[Fused[ItemKey]], diversity: float, count: int) -> list[Fused[ItemKey]]:
        """The candidates in maximal-marginal-relevance order (``retrieval/diversify.py``), by stored vectors.

        Turns another process deleted meanwhile simply have no vector; ``load_hits`` skips them.
        """
        stored = self._store.vectors_for(
            self._embedder.model_id, [seq for kind, seq in (i.key for i in fused) if kind == "turn"]
        )
        vectors = {("turn", seq): vector for seq, vector in stored.items()}
        by_key = {item.key: item for item in fused}
        order = maximal_marginal_relevance(
            [item.key for item in fused], [item.score for item in fused], vectors, diversity=diversity, limit=count + 8
        )
        return [by_key[key] for key in order]

    def turns(self, user_id: Owners, seqs: Sequence[int], loaded: dict[int, Turn] | None = None) -> dict[int, Turn]:
        """Turns by seq, reading from the store only those not in ``loaded`` (which is updated).

        A turn missing from the store leaves the index stale (see the class).
        """
        known = loaded if loaded is not None else {}
        missing = [seq for seq in seqs if seq not in known]
        if missing:
            known.update(self._store.get_by_seqs(missing, user_id))
            if any(seq not in known for seq in missing):
                self.stale(user_id)
        return {seq: known[seq] for seq in seqs if seq in known}

    def bursts(
        self, hits: list[Hit], user_id: Owners, loaded: dict[int, Turn] | None = None, *, join: bool = False
    ) -> list[Hit]:
        """``hits`` with each message burst found once (``retrieval/bursts.py``): its later hits moved
        after the others, or with ``join`` folded into the first, which then stands for the whole burst."""
        if not self._settings.join_bursts:
            return hits
        around = dict(loaded or {})
        tried: set[int] = set()
        while wanted := unread(hits, around, tried):
            tried.update(wanted)
            around.update(self._store.get_by_seqs(wanted, user_id))
        return joined_bursts(hits, around) if join else one_per_burst(hits, around)

    def load_hits(
        self, fused: Sequence[Fused[ItemKey]], count: int, user_id: Owners, loaded: dict[int, Turn] | None = None
    ) -> list[Hit]:
        """Read the top ``count`` fused items from the store as hits (turns in ``loaded`` are not read again)."""
        # A few spares cover turns deleted meanwhile (by another process: the index then reloads).
        wanted = fused[: count + 8]
        turns = self.turns(user_id, [seq for kind, seq in (i.key for i in wanted) if kind == "turn"], loaded)
        derived_seqs = [seq for kind, seq in (i.key for i in wanted) if kind == "derived"]
        derived: dict[int, tuple[str, str, str, tuple[str, ...]]] = {}
        for owner in _each(user_id) if derived_seqs else ():
            derived.update(self._store.derived_items(derived_seqs, owner))
        hits: list[Hit] = []
        for item in wanted:
            kind, seq = item.key
            if kind == "turn" and seq in turns:
                turn = turns[seq]
                hits.append(
                    Hit(
                        id=turn.id,
                        tier=Tier.EPISODIC,
                        content=turn.content,
                        score=item.score,
                        turn=turn,
                        source_turn_ids=(turn.id,),
                        ranks=dict(item.ranks),
                        seq=seq,
                    )
                )
            elif kind == "derived" and seq in derived:
                item_id, tier, content, sources = derived[seq]
                hits.append(
                    Hit(
                        id=item_id,
                        tier=Tier(tier),
                        content=content,
                        score=item.score,
                        turn=None,
                        source_turn_ids=sources,
                        ranks=dict(item.ranks),
                        seq=seq,
                    )
                )
        return hits[:count]

    def dated_facts(self, hits: Sequence[Hit], user_id: Owners, zone: tzinfo) -> list[Hit]:
        """``hits`` with each fact's relative phrases resolved against the day its turn was said, in ``zone``."""
        said = self.facts_said_on(hits, user_id, zone)
        return [
            replace(hit, content=annotate(hit.content, said[hit.id]))
            if hit.tier == Tier.LONGTERM and hit.id in said
            else hit
            for hit in hits
        ]

    def facts_said_on(self, hits: Sequence[Hit], user_id: Owners, zone: tzinfo) -> dict[str, datetime]:
        """When the turn behind each fact (a ``longterm`` hit) that says "next month" or the like was said.

        A fact quotes its sentence ("going camping next month"); read later, the phrase is
        wrong unless it is resolved against that date, as excerpts are.
        """
        sources = {
            hit.id: hit.source_turn_ids[0]
            for hit in hits
            if hit.tier == Tier.LONGTERM and hit.source_turn_ids and may_mention_relative_time(hit.content)
        }
        if not sources:
            return {}
        turns: dict[str, Turn] = {}
        for owner in _each(user_id):
            turns.update(self._store.get_by_ids(sorted(set(sources.values())), owner))
        return {
            fact_id: turns[turn_id].created_at.astimezone(zone)
            for fact_id, turn_id in sources.items()
            if turn_id in turns
        }

    # -- helpers ----------------------------------------------------------------------

    def _vector_lists(
        self, query: Query, vector: Vectors, searches: dict[str, Seqs | None], server_side: ServerSideVectors | None
    ) -> Rankings:
        """One list per entry of ``searches``: the nearest turns among the seqs it allows (None: all)."""
        model_id, user_id, depth = self._embedder.model_id, query.user_id, query.depth
        if server_side is not None:
            lists = [server_side.nearest(model_id, user_id, vector, depth, allowed) for allowed in searches.values()]
        else:  # one scan of the vectors serves every list
            # A search narrowed to an agent or a session ranks turns by their own vectors: the
            # blend reads the turns around each one, which may lie outside that scope.
            scoped = query.filters.agent_id is not None or query.filters.session_id is not None
            lists = self._index.search_within(user_id, vector, depth, list(searches.values()), own_only=scoped)
        return {
            name: [(("turn", seq), score) for seq, score in found] for name, found in zip(searches, lists, strict=True)
        }

    def _cells_by_meaning(
        self, user_id: str, query_vector: Vectors, asked: str | None, speakers: Sequence[str]
    ) -> list[tuple[ItemKey, float]]:
        """The user's current facts whose vectors stand out as closest to the query's, closest first
        (``retrieval/cell_candidates.py``). Of the speakers, only the facts of the one the query names."""
        if self.cell_policy.cells <= 0:
            return []
        stored = self._store.cell_vectors(user_id, self._embedder.model_id)
        stored = [stored[index] for index in about_whom_asked([subject for _, subject, _ in stored], asked, speakers)]
        if not stored:
            return []
        cosines = np.stack([vector for _, _, vector in stored]) @ np.asarray(query_vector, dtype=np.float32)
        return [
            (("derived", stored[index][0]), float(cosines[index])) for index in closest_cells(cosines, self.cell_policy)
        ]

    def _server_vectors(self) -> ServerSideVectors | None:
        """The store's own vector index, when settings ask for it (``vector_search="server"``)."""
        if self._settings.vector_search == "server" and isinstance(self._store, ServerSideVectors):
            return self._store
        return None

    def _fulltext_candidates(
        self, match: str, query: Query, dated: SearchFilters | None, derived_match: str
    ) -> Rankings:
        """Full-text candidates: turns by ``match`` (and inside ``dated``), derived items by ``derived_match``.

        ``derived_match`` is the query without the speakers' names: a cell's text names its
        subject, so a name would match every fact about that person alike.
        """
        user_id, depth = query.user_id, query.depth
        turns = self._store.fulltext(match, user_id, query.filters, depth)
        found: Rankings = {"fulltext": [(("turn", seq), score) for seq, score in turns]}
        if dated is not None:
            inside = self._store.fulltext(match, user_id, dated, depth)
            found[f"fulltext{DATED}"] = [(("turn", seq), score) for seq, score in inside]
        if query.tiers:
            derived = self._store.derived_fulltext(derived_match, user_id, depth, query.tiers)
            found["derived"] = [(("derived", seq), score) for seq, score in derived]
        return found

    def background(self) -> ThreadPoolExecutor:
        """One worker thread for the full-text half of a search, started on first use."""
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memstrata-search")
            return self._executor

    def _sync_index(self, user_id: str) -> None:
        """Load vectors other writers (or this one) stored since the index last looked.

        A chunk at a time, into room reserved for all of them on a first load: a large user's
        load then holds their vectors once, not a copy read from the store beside them.
        """
        model_id = self._embedder.model_id
        first_load = self._index.high_water(user_id) is None
        reserve = overtaken = 0
        while True:
            generation = self._index.generation(user_id)
            after = self._index.high_water(user_id)
            batch = self._store.vectors_after(model_id, user_id, after or 0, LOAD_CHUNK_ROWS)
            if first_load and not reserve and len(batch.seqs) == LOAD_CHUNK_ROWS:
                reserve = self._store.vector_count(model_id, user_id)  # more chunks to come: make room once
            if len(batch.seqs) or after is None:
                self._index.extend(user_id, batch.seqs, batch.vectors, batch.high_water, generation, reserve=reserve)
            if len(batch.seqs) < LOAD_CHUNK_ROWS:
                return
            if self._index.high_water(user_id) == after:
                # A delete overtook the chunk (``extend`` ignored it) or an eviction took the user: read again.
                overtaken += 1
                if overtaken > MAX_OVERTAKEN_LOADS:
                    return


def _each(owners: Owners) -> tuple[str, ...]:
    """The memories ``owners`` names, one by one."""
    return (owners,) if isinstance(owners, str) else tuple(owners)
