"""The search half of the Memory API: candidates, fusion, rerank, diversity, hits."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import date, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING

import numpy as np

from memstrata.errors import InvalidInput
from memstrata.extraction.time_expressions import annotate, may_mention_relative_time, resolve_time_expressions
from memstrata.models import Hit, Role, Scope, SearchFilters, Tier, Turn
from memstrata.retrieval.bursts import joined_bursts, one_per_burst, unread
from memstrata.retrieval.cell_candidates import CellCandidatePolicy, about_whom_asked, closest_cells, with_cells
from memstrata.retrieval.diversify import maximal_marginal_relevance
from memstrata.retrieval.fulltext import fts_query, indexed_text, term_coverage
from memstrata.retrieval.fusion import Fused, fuse_scored
from memstrata.retrieval.periods import (
    MAX_PERIODS,
    Dated,
    Span,
    covering_window,
    mentioned_periods,
    names_a_year,
)
from memstrata.retrieval.rerank import DEFAULT_RERANK, RerankPolicy, TurnSignals, rerank
from memstrata.retrieval.speakers import aliases, mentioned_speaker, without_speakers
from memstrata.storage.base import Seqs, ServerSideVectors, Vectors
from memstrata.validation import (
    check_fraction,
    check_limit,
    check_names,
    check_role,
    check_text,
    check_tiers,
    check_timestamp,
    check_timezone,
)

if TYPE_CHECKING:
    from memstrata.config import Settings
    from memstrata.embeddings.base import Embedder
    from memstrata.retrieval.vectors import VectorIndex
    from memstrata.storage.base import Store
    from memstrata.tiers.worker import Activity

VISIT_BATCH = 32
#: How many of the best full-text matches tell how strongly full text matched (``term_coverage``).
LEXICAL_TOP = 5
#: Hits read beyond a search's limit, to take the place of the later pieces of a message burst.
BURST_SPARES = 10
SEARCH_MODES = ("hybrid", "fulltext", "vector")
# Measured on LoCoMo (evidence recall@10 of the turns): turns alone 0.626, with cells 0.618,
# with every summary 0.565 (a summary stands for many turns and crowds the evidence out).
# So search ranks turns by default and the derived tiers are opt-in.
DEFAULT_SEARCH_TIERS: tuple[str, ...] = ()

ItemKey = tuple[str, int]
"""A search candidate: ``("turn", seq)`` or ``("derived", seq)``."""
Rankings = dict[str, list[tuple[ItemKey, float]]]
"""Each retriever's candidates, best first, with its own score (higher is better)."""
#: Suffix of the lists a retriever found inside the dates a query names (see ``joined``).
DATED = ":dated"
#: Dates holding more of a user's turns than this are not searched on their own: a second
#: pass over that many turns costs more than it narrows (at 100k turns it doubled search time).
DATED_TURNS_LIMIT = 5_000
#: At most this many of a user's speaker names (the first in name order) are taken out of the
#: dense query; reading them costs an index seek each.
MAX_SPEAKERS_STRIPPED = 200


class SearchViews:
    """Mixed into Memory: ``search()``, and the ranking ``context()`` shares with it."""

    #: How fused candidates are rescored (``retrieval/rerank.py``); a value object, replaceable per instance.
    rerank_policy: RerankPolicy = DEFAULT_RERANK
    #: Which facts a query reaches by meaning (``retrieval/cell_candidates.py``); ``cells=0`` turns it off.
    cell_policy: CellCandidatePolicy = CellCandidatePolicy()

    settings: Settings
    _store: Store
    _embedder: Embedder
    _index: VectorIndex
    _activity: Activity
    _executor: ThreadPoolExecutor | None
    _executor_lock: threading.Lock
    _index_reloads: Counter[str]
    _pending_visits: dict[str, list[list[int]]]
    _visits_lock: threading.Lock

    if TYPE_CHECKING:  # provided by Memory

        def _require_open(self) -> None: ...

        @staticmethod
        def _scope(user_id: object, agent_id: object, session_id: object) -> Scope: ...

        def _after_enqueue(self) -> None: ...

    def search(
        self,
        query: str,
        *,
        user_id: str,
        limit: int = 10,
        session_id: str | None = None,
        agent_id: str | None = None,
        roles: Iterable[str | Role] | None = None,
        after: datetime | str | None = None,
        before: datetime | str | None = None,
        mode: str = "hybrid",
        tiers: Iterable[str] = DEFAULT_SEARCH_TIERS,
        diversity: float = 0.0,
        timezone: str | None = None,
    ) -> list[Hit]:
        """The turns most relevant to ``query`` in ``user_id``'s memory, best first.

        ``mode="hybrid"`` fuses full-text (BM25) and vector candidates by reciprocal rank
        fusion; ``"fulltext"`` or ``"vector"`` use one retriever alone over the turns. A
        hybrid search also covers the derived ``tiers`` named (default none): ``"longterm"``
        cells, ``"scene"``, ``"midterm"`` and ``"consolidation"`` summaries, each hit naming
        its ``tier`` and the ``source_turn_ids`` it stands for; derived items have no session,
        agent, role or time, so a search with any of those filters covers turns only. Each hit's ``ranks`` says
        where each retriever placed it. ``diversity`` (0 to 1, default 0) reorders the
        candidates by maximal marginal relevance, trading relevance for hits unlike each
        other; scores stay the relevance scores. A date the query names ("on 9 November
        2022", "in July 2022", or "last week") also searches that period and lifts what was
        said then; it ranks, it never excludes (``after``/``before`` do). Dates are read in
        ``timezone`` (an IANA name such as "Europe/Paris"; default the ``timezone`` setting):
        today's date, and the day each turn was said. Query text is never parsed as search
        syntax, so quotes, ``*``, ``NEAR`` or SQL are just words. A fact hit that says "next
        month" or the like ends with what it meant when it was said ("[next month = June
        2023]"), read in ``timezone``. Messages one speaker sent in a row (a burst) count as one
        thought: a burst's later pieces come after the other hits (``join_bursts`` setting).
        Segments whose turns are found get a visit (their heat rises).
        """
        with self._activity:
            if mode not in SEARCH_MODES:
                raise InvalidInput(f"mode must be one of {', '.join(SEARCH_MODES)}, not {mode!r}")
            self._require_open()
            scope = self._scope(user_id, agent_id, session_id)
            text = check_text(query, "query", max_bytes=self.settings.max_text_bytes)
            count = check_limit(limit)
            spread = check_fraction(diversity, "diversity")
            filters = SearchFilters(
                agent_id=scope.agent_id,
                session_id=scope.session_id,
                roles=tuple(check_role(role) for role in check_names(roles, "roles")),
                after=check_timestamp(after, "after"),
                before=check_timestamp(before, "before"),
            )
            wanted_tiers = check_tiers(check_names(tiers, "tiers"))
            # Derived items (cells, segment and consolidation summaries) have no session or role,
            # so a filtered search stays on the episodic turns.
            with_derived = wanted_tiers if wanted_tiers and filters.is_empty and mode == "hybrid" else ()
            zone = check_timezone(timezone) or self.settings.zone
            today = today_in(zone)  # read once: a search across midnight asks about one "yesterday"
            depth = max(self.settings.search_candidates, count)
            for _ in range(2):  # once more if the vector index turned out stale (see ``_turns``)
                reloads = self._index_reloads[scope.user_id]
                rankings = joined(self._rankings(text, scope.user_id, filters, depth, mode, with_derived, today, zone))
                loaded: dict[int, Turn] = {}
                fused = self._rerank(
                    text, fuse_scored(rankings, k=self.settings.rrf_k), rankings, scope.user_id, loaded, today, zone
                )
                if spread > 0:
                    fused = self._diversify(fused, spread, count)
                # A burst's later pieces go after the other hits: read spares for them to make way for.
                found = self._load_hits(fused, count + BURST_SPARES, scope.user_id, loaded)
                hits = self._dated_facts(self._bursts(found, scope.user_id, loaded)[:count], scope.user_id, zone)
                if self._index_reloads[scope.user_id] == reloads:
                    break
            self._note_hit_visits(scope.user_id, hits)
            return hits

    def _rankings(
        self,
        text: str,
        user_id: str,
        filters: SearchFilters,
        depth: int,
        mode: str,
        tiers: tuple[str, ...],
        today: date | None = None,
        zone: tzinfo | None = None,
        query_vectors: list[Vectors] | None = None,
        by_meaning: set[int] | None = None,
    ) -> Rankings:
        """Each retriever's scored candidates, best first: ``fulltext`` and ``vector`` turns, ``derived`` items.

        The seqs of the facts found by meaning are added to ``by_meaning`` (if given).
        The query's vector, when one is made, is appended to ``query_vectors`` (if given) for
        the caller to reuse.

        When the query names dates (``retrieval/periods.py``), each turn retriever also
        looks inside them: its best finds there are under ``fulltext:dated`` and
        ``vector:dated``, for :func:`joined` to add to its list at their own scores, so a
        day's turns are candidates even when the rest of the memory outranks them.
        """
        rankings: Rankings = {}
        # Speakers' names say whose turns, not what about: the dense retriever and the derived
        # items (whose text starts with their subject) read the rest. Read before the
        # full-text search starts, which would hold the store meanwhile.
        speakers = self._store.speakers(user_id, MAX_SPEAKERS_STRIPPED)
        # A speaker called by another form of the name ("Caroline" for "Caro") is searched by
        # the name the turns carry too.
        named = aliases(text, speakers)
        match = fts_query(" ".join([text, *sorted(set(named.values()))])) if mode != "vector" else None
        zone = zone or self.settings.zone
        dated = _narrowed(filters, covering_window(asked_periods(text, today or today_in(zone)), zone))
        inside = None if dated is None else self._store.filtered_seqs(user_id, dated, DATED_TURNS_LIMIT + 1)
        if inside is not None and not 0 < len(inside) <= DATED_TURNS_LIMIT:
            # Nothing said then, or dates spanning so much of the memory that they narrow little
            # (the reranker still lifts what was said then).
            dated = inside = None
        server_side = self._server_vectors()
        searches: dict[str, Seqs | None] = {}  # each vector list, with the seqs it may return (None: all)
        dense_text = text
        query_vector: Vectors | None = None
        if mode != "fulltext" or (tiers and match is not None):
            dense_text = without_speakers(text, speakers)
        with contextlib.ExitStack() as pins:
            if mode != "fulltext":
                if server_side is None:
                    # Held until the scan: another user's load must not unload this user in between.
                    pins.enter_context(self._index.pinned(user_id))
                    self._sync_index(user_id)
                if filters.is_empty:
                    searches["vector"] = None
                else:
                    searches["vector"] = self._store.filtered_seqs(user_id, filters)
                if inside is not None:
                    searches[f"vector{DATED}"] = inside
            # Derived items by the query's words without the names; by the whole query when only names,
            # stopwords or words for saying are left ("Who is Caroline?", "What did Caroline say?").
            derived_match = (fts_query(dense_text, topical_only=True) or match) if tiers else None
            # Full-text ranking runs in SQLite (which releases the GIL) on the second core while
            # this thread embeds the query and scans the vectors: latency is the slower of the two.
            pending = (
                self._background().submit(
                    self._fulltext_candidates, match, user_id, filters, depth, tiers, dated, derived_match
                )
                if match is not None
                else None
            )
            if searches:
                query_vector = self._embedder.embed_query(dense_text)
                if query_vectors is not None:
                    query_vectors.append(query_vector)
                if server_side is not None:
                    lists = [
                        server_side.nearest(self._embedder.model_id, user_id, query_vector, depth, allowed)
                        for allowed in searches.values()
                    ]
                else:  # one scan of the vectors serves every list
                    # A search narrowed to an agent or a session ranks turns by their own vectors: the
                    # blend reads the turns around each one, which may lie outside that scope.
                    scoped = filters.agent_id is not None or filters.session_id is not None
                    lists = self._index.search_within(
                        user_id, query_vector, depth, list(searches.values()), own_only=scoped
                    )
                for name, found in zip(searches, lists, strict=True):
                    rankings[name] = [(("turn", seq), score) for seq, score in found]
        if pending is not None:
            rankings = {**pending.result(), **rankings}
        if Tier.LONGTERM in tiers and query_vector is not None:
            closest = self._cells_by_meaning(user_id, query_vector, mentioned_speaker(text, speakers), speakers)
            if closest:
                rankings["derived"] = with_cells(rankings.get("derived", []), closest, k=self.settings.rrf_k)
                if by_meaning is not None:
                    by_meaning.update(seq for (_, seq), _ in closest)
        return rankings

    def _cells_by_meaning(
        self, user_id: str, query_vector: Vectors, asked: str | None, speakers: Sequence[str]
    ) -> list[tuple[ItemKey, float]]:
        """The user's current facts whose vectors stand out as closest to the query's, closest first
        (``retrieval/cell_candidates.py``): one read of their vectors and one product. Of the
        speakers, only the facts of the one the query names (``asked``), if it names one."""
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

    def _rerank(
        self,
        text: str,
        fused: list[Fused[ItemKey]],
        rankings: Rankings,
        user_id: str,
        loaded: dict[int, Turn] | None = None,
        today: date | None = None,
        zone: tzinfo | None = None,
        known_signals: dict[ItemKey, TurnSignals] | None = None,
    ) -> list[Fused[ItemKey]]:
        """Rescore fused candidates with the reranker (``retrieval/rerank.py``), best first.

        The turns read here are added to ``loaded`` so ``_load_hits`` does not read them again,
        and their signals to ``known_signals`` (for one ``zone``) so a second rerank reuses them.
        """
        turns = self._turns(user_id, [seq for kind, seq in (item.key for item in fused) if kind == "turn"], loaded)
        zone = zone or self.settings.zone
        known = known_signals if known_signals is not None else {}
        for seq, turn in turns.items():
            if ("turn", seq) not in known:
                when = turn.created_at.astimezone(zone)
                known["turn", seq] = TurnSignals.of(turn.name, turn.content, turn.session_id, when)
        signals = {("turn", seq): known["turn", seq] for seq in turns}
        scores = {name: dict(ranking) for name, ranking in rankings.items() if name != "derived"}
        # Derived items keep their fused score, so turns are scored with the same constant.
        periods = asked_periods(text, today or today_in(zone))
        coverage = 1.0
        if self.rerank_policy.lexical_floor > 0:
            best = [seq for (kind, seq), _ in rankings.get("fulltext", [])[:LEXICAL_TOP] if kind == "turn"]
            coverage = term_coverage(text, (indexed_text(turns[seq]) for seq in best if seq in turns))
        return rerank(
            text, fused, scores, signals, self.rerank_policy, k=self.settings.rrf_k, periods=periods, coverage=coverage
        )

    def _diversify(self, fused: list[Fused[ItemKey]], diversity: float, count: int) -> list[Fused[ItemKey]]:
        """The candidates in maximal-marginal-relevance order (``retrieval/diversify.py``), by stored vectors.

        Turns another process deleted meanwhile simply have no vector; ``_load_hits``
        skips them as it does without diversity.
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

    def _turns(self, user_id: str, seqs: Sequence[int], loaded: dict[int, Turn] | None) -> dict[int, Turn]:
        """Turns by seq, reading from the store only those not in ``loaded`` (which is updated).

        A turn the index offered that the store no longer has was deleted by another
        process (a CLI ``forget`` beside a server): this process's vector index is then
        stale, so it is unloaded and the next search reads it again from the store, which
        holds only what is left. ``search`` and ``context`` then run once more.
        """
        known = loaded if loaded is not None else {}
        missing = [seq for seq in seqs if seq not in known]
        if missing:
            known.update(self._store.get_by_seqs(missing, user_id))
            if any(seq not in known for seq in missing):
                self._index.drop(user_id)
                self._index_reloads[user_id] += 1
        return {seq: known[seq] for seq in seqs if seq in known}

    def _server_vectors(self) -> ServerSideVectors | None:
        """The store's own vector index, when settings ask for it (``vector_search="server"``)."""
        if self.settings.vector_search == "server" and isinstance(self._store, ServerSideVectors):
            return self._store
        return None

    def _bursts(
        self, hits: list[Hit], user_id: str, loaded: dict[int, Turn] | None = None, *, join: bool = False
    ) -> list[Hit]:
        """``hits`` with each message burst first found once (``retrieval/bursts.py``): its later
        hits moved after the others, or with ``join`` folded into the first, which then stands for the
        whole burst. The turns around the hits are read as far as their bursts go (not those in ``loaded``).
        """
        if not self.settings.join_bursts:
            return hits
        around = dict(loaded or {})
        tried: set[int] = set()
        while wanted := unread(hits, around, tried):
            tried.update(wanted)
            around.update(self._store.get_by_seqs(wanted, user_id))
        return joined_bursts(hits, around) if join else one_per_burst(hits, around)

    def _load_hits(
        self,
        fused: Sequence[Fused[ItemKey]],
        count: int,
        user_id: str,
        loaded: dict[int, Turn] | None = None,
    ) -> list[Hit]:
        """Read the top ``count`` fused items from the store as hits (turns in ``loaded`` are not read again)."""
        # A few spares cover turns deleted meanwhile (by another process: the index then reloads, see ``_turns``).
        wanted = fused[: count + 8]
        turns = self._turns(user_id, [seq for kind, seq in (i.key for i in wanted) if kind == "turn"], loaded)
        derived = self._store.derived_items(
            [seq for kind, seq in (i.key for i in wanted) if kind == "derived"], user_id
        )
        hits: list[Hit] = []
        for item in wanted:
            kind, seq = item.key
            if kind == "turn" and seq in turns:
                turn = turns[seq]
                hits.append(
                    Hit(turn.id, Tier.EPISODIC, turn.content, item.score, turn, (turn.id,), dict(item.ranks), seq)
                )
            elif kind == "derived" and seq in derived:
                item_id, tier, content, sources = derived[seq]
                hits.append(Hit(item_id, Tier(tier), content, item.score, None, sources, dict(item.ranks), seq))
        return hits[:count]

    def _dated_facts(self, hits: Sequence[Hit], user_id: str, zone: tzinfo) -> list[Hit]:
        """``hits`` with each fact's relative phrases resolved against the day its turn was said, in ``zone``."""
        said = self._facts_said_on(hits, user_id, zone)
        return [
            replace(hit, content=annotate(hit.content, said[hit.id]))
            if hit.tier == Tier.LONGTERM and hit.id in said
            else hit
            for hit in hits
        ]

    def _facts_said_on(self, hits: Sequence[Hit], user_id: str, zone: tzinfo) -> dict[str, datetime]:
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
        turns = self._store.get_by_ids(sorted(set(sources.values())), user_id)
        return {
            fact_id: turns[turn_id].created_at.astimezone(zone)
            for fact_id, turn_id in sources.items()
            if turn_id in turns
        }

    def _note_hit_visits(self, user_id: str, hits: Sequence[Hit]) -> None:
        if not self.settings.record_visits:
            return
        visited = [hit.seq for hit in hits if hit.turn is not None and hit.seq is not None]
        if visited:
            self._note_visits(user_id, visited)

    def _note_visits(self, user_id: str, seqs: list[int]) -> None:
        """Collect retrieval visits in memory and queue them in batches, keeping writes off search.

        Visits only warm segments up; a crash loses at most one unqueued batch of them.
        """
        with self._visits_lock:
            self._pending_visits.setdefault(user_id, []).append(seqs)
            waiting = sum(len(searches) for searches in self._pending_visits.values())
        if waiting >= VISIT_BATCH:
            self._queue_visits()

    def _queue_visits(self) -> None:
        with self._visits_lock:
            pending, self._pending_visits = self._pending_visits, {}
        for user_id, searches in pending.items():
            self._store.enqueue_job("visit", user_id, {"searches": searches})
        if pending:
            self._after_enqueue()

    def _fulltext_candidates(
        self,
        match: str,
        user_id: str,
        filters: SearchFilters,
        depth: int,
        tiers: tuple[str, ...],
        dated: SearchFilters | None = None,
        derived_match: str | None = None,
    ) -> Rankings:
        """Full-text candidates: turns by ``match`` (and inside ``dated``), derived items by ``derived_match``.

        ``derived_match`` is the query without the speakers' names (default ``match``): a cell's
        text names its subject, so a name would match every fact about that person alike.
        ``_rankings`` passes ``match`` itself when nothing but names and stopwords is left.
        """
        turns = self._store.fulltext(match, user_id, filters, depth)
        found: Rankings = {"fulltext": [(("turn", seq), score) for seq, score in turns]}
        if dated is not None:
            inside = self._store.fulltext(match, user_id, dated, depth)
            found[f"fulltext{DATED}"] = [(("turn", seq), score) for seq, score in inside]
        if tiers:
            derived = self._store.derived_fulltext(derived_match or match, user_id, depth, tiers)
            found["derived"] = [(("derived", seq), score) for seq, score in derived]
        return found

    def _background(self) -> ThreadPoolExecutor:
        """One worker thread for the full-text half of a search, started on first use."""
        with self._executor_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memstrata-search")
            return self._executor

    def _sync_index(self, user_id: str) -> None:
        """Load vectors other writers (or this one) stored since the index last looked."""
        generation = self._index.generation(user_id)
        after = self._index.high_water(user_id) or 0
        batch = self._store.vectors_after(self._embedder.model_id, user_id, after)
        if len(batch.seqs) or self._index.high_water(user_id) is None:
            self._index.extend(user_id, batch.seqs, batch.vectors, batch.high_water, generation)


def today_in(zone: tzinfo) -> date:
    """Today's date in ``zone``: what relative phrases in a query are read against."""
    return datetime.now(zone).date()


def asked_periods(text: str, today: date) -> tuple[Dated, ...]:
    """The dates a query asks about: the periods it names, and its relative phrases on ``today``.

    "What did I say last week?" asks about the week before ``today`` (what was said since
    counts too, at half weight: ``Span``). Phrases about the future ("next week") name
    nothing said yet and are left out, as are more than ``MAX_PERIODS`` relative phrases.
    A query that names a date with its year ("last weekend, on 10 April 2023", "… before
    2023") is anchored there, not today: its relative phrases are left out. A yearless one
    ("last week, about the trip in June") anchors nothing, so both count.
    """
    return _asked(text, today) if len(text) <= ASKED_CACHED_CHARS else _asked_periods(text, today)


ASKED_CACHED_CHARS = 2_000


@functools.lru_cache(maxsize=1_024)
def _asked(text: str, today: date) -> tuple[Dated, ...]:
    return _asked_periods(text, today)


def _asked_periods(text: str, today: date) -> tuple[Dated, ...]:
    named = mentioned_periods(text)
    if names_a_year(text):
        # "last week, as I said on 6 November 2023" counts back from the named day, not from
        # today: the named day's window already holds it (or, after "before", bounds it).
        return named
    until = today + timedelta(days=1)
    relative = dict.fromkeys(
        Span(*expression.days, until)
        for expression in resolve_time_expressions(text, today)
        if expression.days[0] < until
    )
    return (*named, *(relative if len(relative) <= MAX_PERIODS else ()))


def _narrowed(filters: SearchFilters, window: tuple[datetime, datetime] | None) -> SearchFilters | None:
    """``filters`` narrowed to ``window`` as well; None without a window or when the filters are no wider."""
    if window is None:
        return None
    after = window[0] if filters.after is None else max(filters.after, window[0])
    before = window[1] if filters.before is None else min(filters.before, window[1])
    if after >= before or (after == filters.after and before == filters.before):
        return None
    return replace(filters, after=after, before=before)


def joined(rankings: Rankings, depth: int | None = None) -> Rankings:
    """Each list's top ``depth`` (None: all) joined with its top ``depth`` inside the query's dates, best first.

    The lists ``_rankings`` found inside the dates (``fulltext:dated``, ``vector:dated``)
    are folded into their retriever's list, one entry per item at its own score, so
    fusion and the reranker see one list per retriever.
    """
    result: Rankings = {}
    for name, ranking in rankings.items():
        if name.endswith(DATED):
            continue
        inside = rankings.get(name + DATED, [])[:depth]
        if not inside:
            result[name] = ranking[:depth]
            continue
        best: dict[ItemKey, float] = {}
        for key, score in [*ranking[:depth], *inside]:
            best[key] = max(score, best.get(key, score))
        result[name] = sorted(best.items(), key=lambda pair: -pair[1])  # stable: ties keep the order found
    return result
