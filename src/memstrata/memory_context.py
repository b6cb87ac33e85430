"""The context half of the Memory API: one memory block for a prompt, under a token budget."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime, tzinfo
from typing import TYPE_CHECKING

import numpy as np

from memstrata.embeddings.base import Vectors
from memstrata.errors import InvalidInput
from memstrata.extraction.time_expressions import annotate, without_notes
from memstrata.memory_search import MAX_SPEAKERS_STRIPPED, ItemKey, joined, today_in
from memstrata.models import Cell, Context, Hit, ItemKind, Scope, SearchFilters, Tier, Turn
from memstrata.retrieval.abridge import abridge
from memstrata.retrieval.assembly import AssemblyPolicy, Candidate, assemble
from memstrata.retrieval.entity_candidates import (
    EntityCandidatePolicy,
    asks_for_kind,
    closest_entities,
    entity_turns,
    placed,
)
from memstrata.retrieval.fusion import Fused, fuse_scored
from memstrata.retrieval.rerank import TurnSignals
from memstrata.storage.text import cell_text, readable_key
from memstrata.validation import check_budget, check_text, check_timezone

if TYPE_CHECKING:
    from memstrata.config import Settings
    from memstrata.storage.base import TierStore

# LoCoMo turns average ~25 tokens; asking for budget/12 episodes leaves room to choose.
TOKENS_PER_EPISODE_CANDIDATE = 12
MAX_EPISODE_CANDIDATES = 300
SUMMARY_TIERS = (Tier.SCENE, Tier.MIDTERM, Tier.CONSOLIDATION)
CONTEXT_TIERS = (Tier.LONGTERM, *SUMMARY_TIERS)
PATTERN_MIN_COUNT = 2
_WORD = re.compile(r"\w+")


class ContextViews:
    """Mixed into Memory: ``context()``."""

    settings: Settings
    assembly_policy: AssemblyPolicy = AssemblyPolicy()
    entity_policy: EntityCandidatePolicy = EntityCandidatePolicy()

    def context(
        self,
        query: str,
        *,
        user_id: str,
        token_budget: int = 1000,
        agent_id: str | None = None,
        session_id: str | None = None,
        include_superseded: bool = False,
        timezone: str | None = None,
        verbatim: bool | None = None,
    ) -> Context:
        """Assemble what ``user_id``'s memory holds about ``query`` into one block of at most ``token_budget`` tokens.

        The block packs the profile, habits (procedural patterns), relevant facts (current
        cells; with ``include_superseded`` also what they replaced), related entities,
        summaries, and verbatim conversation excerpts with their dates, in that order —
        the stable parts first, so a provider's prompt cache keeps the head. With a
        ``session_id``, that session's recent exchanges (its working memory) come last;
        retrieval always spans the user's whole memory (or one ``agent_id``'s turns; the
        profile, habits and entities, which are the user's, stay, and facts and summaries
        are left out). The result
        reports the tokens used and every item included. Dates (excerpts' date lines,
        "yesterday" in the query) are read in ``timezone``, an IANA name, default the
        ``timezone`` setting. The best-ranked excerpt is quoted word for word; when the budget
        cannot hold later ones whole, they are abridged (articles, "I", "is" … left out of
        English sentences; each item says whether it was), so more fit;
        ``verbatim=True`` quotes every excerpt whole (default: the ``abridge_excerpts``
        setting, on). Never calls an LLM.
        """
        zone = check_timezone(timezone)
        if verbatim is not None and not isinstance(verbatim, bool):
            raise InvalidInput("verbatim must be true or false")
        return self._context(
            query,
            user_id,
            token_budget,
            agent_id,
            session_id,
            include_superseded,
            frozenset(),
            zone,
            verbatim=verbatim,
        )

    def _context(
        self,
        query: str,
        user_id: str,
        token_budget: int,
        agent_id: str | None,
        session_id: str | None,
        include_superseded: bool,
        leave_out: frozenset[int],
        zone: tzinfo | None = None,
        *,
        verbatim: bool | None = None,
    ) -> Context:
        """``context()``, with the turns whose seqs are in ``leave_out`` never offered as excerpts.

        Dates are read in ``zone`` (an already checked ``timezone``), else the setting's. If
        the vector index turned out stale (another process deleted turns), the block is built
        once more, reloaded, before any visit is noted.
        """
        memory = self._facade
        with memory._activity:
            memory._require_open()
            scope = memory._scope(user_id, agent_id, session_id)
            text = check_text(query, "query", max_bytes=self.settings.max_text_bytes)
            budget = check_budget(token_budget)
            if not isinstance(include_superseded, bool):
                raise InvalidInput("include_superseded must be true or false")
            user = scope.user_id
            for last_try in (False, True):
                reloads = memory._index_reloads[user]
                built, episodes = self._build(text, scope, budget, include_superseded, leave_out, zone, verbatim)
                if last_try or memory._index_reloads[user] == reloads:
                    break
            included = {item.id for item in built.items if item.kind == ItemKind.EPISODE}
            memory._note_hit_visits(user, [hit for hit in episodes if hit.id in included])
            return built

    def _build(
        self,
        text: str,
        scope: Scope,
        budget: int,
        include_superseded: bool,
        leave_out: frozenset[int],
        zone: tzinfo | None,
        verbatim: bool | None,
    ) -> tuple[Context, list[Hit]]:
        """One try at the block of checked arguments, with the excerpt hits it was offered."""
        memory = self._facade
        user = scope.user_id
        filters = SearchFilters(agent_id=scope.agent_id)
        wanted = min(
            MAX_EPISODE_CANDIDATES, max(self.settings.search_candidates, budget // TOKENS_PER_EPISODE_CANDIDATE)
        )
        tiers = CONTEXT_TIERS if filters.is_empty else ()
        zone = zone or self.settings.zone
        today = today_in(zone)  # read once, for both the candidates and the reranks
        query_vectors: list[Vectors] = []
        by_meaning: set[int] = set()
        rankings = memory._rankings(
            text, user, filters, wanted, "hybrid", tiers, today, zone, query_vectors, by_meaning
        )
        loaded: dict[int, Turn] = {}
        order = self._episode_order(text, rankings, user, loaded, today, zone)
        if filters.is_empty and query_vectors:
            order = self._with_entity_turns(text, user, order, query_vectors[0])
        order = [item for item in order if item.key[1] not in leave_out]
        # A message burst is one excerpt, its pieces one a line (``retrieval/bursts.py``).
        episodes = memory._bursts(memory._load_hits(order, wanted, user, loaded), user, loaded, join=True)
        derived = memory._load_hits(
            fuse_scored({"derived": rankings.get("derived", [])}, k=self.settings.rrf_k), wanted, user
        )
        recent = self._recent_turns(user, scope.session_id, scope.agent_id)
        # Summaries carry the dates of their relative phrases as read in the setting's zone
        # when they were made; in another zone those notes could contradict the excerpts.
        dated = (lambda text: text) if str(zone) == str(self.settings.zone) else without_notes
        quote_all = not self.settings.abridge_excerpts if verbatim is None else verbatim
        candidates: dict[str, list[Candidate]] = {
            "profile": self._profile(user),
            "pattern": [
                Candidate("pattern", ItemKind.PATTERN, Tier.PROCEDURAL, f"pattern:{p.key}", p.description, p.score)
                for p in memory.patterns(user_id=user, query=text, limit=8)
                if p.count >= PATTERN_MIN_COUNT
            ],
            "cell": self._cells(
                derived, user, include_superseded, zone, [*loaded.values(), *recent.values()], by_meaning
            ),
            "graph": self._graph(text, user),
            "summary": [
                Candidate("summary", hit.tier, hit.tier, hit.id, dated(hit.content), hit.score, hit.source_turn_ids)
                for hit in derived
                if hit.tier in SUMMARY_TIERS
            ],
            "episode": [_episode(hit, "episode", zone, shorter=not quote_all) for hit in episodes],
            "recent": _recent(recent, zone),
        }
        policy = replace(self.assembly_policy, verbatim_excerpts=None) if quote_all else self.assembly_policy
        return assemble(text, user, candidates, budget, policy), episodes

    # -- helpers ----------------------------------------------------------------------

    @property
    def _facade(self) -> _Facade:
        return self  # type: ignore[return-value]

    @property
    def _store_tiers(self) -> TierStore:
        return self._store  # type: ignore[attr-defined, no-any-return]

    def _episode_order(
        self,
        text: str,
        rankings: Rankings,
        user: str,
        loaded: dict[int, Turn],
        today: date | None = None,
        zone: tzinfo | None = None,
    ) -> list[Fused[ItemKey]]:
        """Turns ranked as ``search`` ranks them, then the deeper candidates after them.

        The head fuses and reranks each retriever's top ``search_candidates`` exactly as
        ``search`` does (deep lists make fusion worse at the top); the tail reranks the
        full lists.
        """
        turn_lists = {name: ranking for name, ranking in rankings.items() if name != "derived"}
        depth = self.settings.search_candidates
        memory = self._facade
        head_lists = joined(turn_lists, depth)
        turn_lists = joined(turn_lists)
        # Every candidate turn in one read (the head's are in the tail too), and their signals once.
        memory._turns(
            user,
            sorted({seq for ranking in turn_lists.values() for (kind, seq), _ in ranking if kind == "turn"}),
            loaded,
        )
        signals: dict[ItemKey, TurnSignals] = {}
        head = memory._rerank(
            text, fuse_scored(head_lists, k=self.settings.rrf_k), head_lists, user, loaded, today, zone, signals
        )
        seen = {item.key for item in head}
        tail = memory._rerank(
            text, fuse_scored(turn_lists, k=self.settings.rrf_k), turn_lists, user, loaded, today, zone, signals
        )
        return head + [item for item in tail if item.key not in seen]

    def _with_entity_turns(
        self, text: str, user: str, order: list[Fused[ItemKey]], query_vector: Vectors
    ) -> list[Fused[ItemKey]]:
        """``order`` with the turns naming the entities of the kind a question asks for moved up
        (``retrieval/entity_candidates.py``); unchanged for any other question."""
        policy = self.entity_policy
        if policy.entities <= 0 or not asks_for_kind(text):
            return order
        memory = self._facade
        model = memory._embedder.model_id
        entities = self._store_tiers.entity_vectors(user, model)
        if len(entities) < 2:
            return order
        cosines = np.stack([vector for _, _, vector in entities]) @ np.asarray(query_vector, dtype=np.float32)
        speakers = self._store_tiers.speakers(user, MAX_SPEAKERS_STRIPPED)
        picked = closest_entities(text, [name for _, name, _ in entities], cosines, speakers, policy)
        if not picked:
            return order
        by_id = self._store_tiers.entity_mention_seqs(user, [entities[index][0] for index in picked])
        mentions = {index: by_id.get(entities[index][0], []) for index in picked}
        stored = self._store_tiers.vectors_for(model, sorted({seq for seqs in mentions.values() for seq in seqs}))
        closeness = {seq: float(vector @ query_vector) for seq, vector in stored.items()}
        added = [("turn", seq) for seq in entity_turns(picked, mentions, closeness, policy)]
        by_key = {item.key: item for item in order}
        result: list[Fused[ItemKey]] = []
        for key in placed([item.key for item in order], added, policy):
            # A turn found only here has no fused score: it takes the one of the excerpt before it.
            result.append(by_key.get(key) or Fused(key, result[-1].score if result else 0.0, {"entity": 1}))
        return result

    def _cells(
        self,
        derived: Sequence[Hit],
        user: str,
        include_superseded: bool,
        zone: tzinfo,
        showable: Sequence[Turn],
        by_meaning: Collection[int] = (),
    ) -> list[Candidate]:
        """Fact candidates; ``showable`` holds the turns the block may show (excerpts, this session's).

        A fact that quotes its turn is left out when the block shows that turn, unless it was
        found by meaning (its seq in ``by_meaning``): the block then shows it without the
        sentence ("user · allergy: peanuts"), so a fact bearing on the query reads as a fact.
        """
        hits = [hit for hit in derived if hit.tier == Tier.LONGTERM]
        said = self._facade._facts_said_on(hits, user, zone)
        quoting = _quoting(hits, {turn.id: turn for turn in showable})
        found = [
            Candidate(
                "cell",
                ItemKind.CELL,
                Tier.LONGTERM,
                hit.id,
                annotate(hit.content, said.get(hit.id)),
                hit.score,
                hit.source_turn_ids,
                restates_sources=hit.id in quoting,  # then left out when its turn is shown as an excerpt
                shorter=hit.content.partition(" — ")[0] if hit.id in quoting and hit.seq in by_meaning else None,
            )
            for hit in hits
        ]
        if not include_superseded or not found:
            return found
        every = self._store_tiers.cells(user, include_superseded=True, limit=100_000)
        by_id = {cell.id: cell for cell in every}
        history: list[Candidate] = []
        for candidate in found:
            current = by_id.get(candidate.id)
            if current is None:
                history.append(candidate)
                continue
            replaced = [
                Candidate(
                    "cell",
                    ItemKind.CELL,
                    Tier.LONGTERM,
                    older.id,
                    f"{annotate(cell_text(older), older.valid_from.astimezone(zone))}"
                    f" (until {_date(older.valid_to, zone)}, then replaced)",
                    candidate.score,
                    (older.source_turn_id,),
                )
                for older in every
                if _same_slot(older, current) and not older.is_current
            ]
            # A fact heading its own history stays, even when its turn is shown as an excerpt.
            history.extend(
                [replace(candidate, restates_sources=candidate.restates_sources and not replaced), *replaced]
            )
        return history

    def _profile(self, user: str) -> list[Candidate]:
        """The profile's traits; each names its speaker when they came from several named ones (a group's memory).

        A trait is one value per user, the last one said: in a memory of several speakers, the
        line says whose it is, so one person's trait is never read as another's.
        """
        # As cells name them: the speaker as said, "user" for a turn without a name. Only two or more names
        # make a group: one person named in some turns and not in others is still one person.
        traits = [
            (key, value, (name or "").strip() or "user") for key, value, name in self._store_tiers.profile_entries(user)
        ]
        named = len({speaker.casefold() for _, _, speaker in traits if speaker != "user"}) > 1
        return [
            Candidate(
                "profile",
                ItemKind.PROFILE,
                Tier.LONGTERM,
                f"profile:{key}",
                f"{speaker} · {readable_key(key)}: {value}" if named else f"{readable_key(key)}: {value}",
            )
            for key, value, speaker in traits
        ]

    def _graph(self, text: str, user: str) -> list[Candidate]:
        subgraph = self._facade.graph(user_id=user, query=text, limit=10)
        return [
            Candidate(
                "graph",
                ItemKind.GRAPH,
                Tier.GRAPH,
                f"edge:{e.source}|{e.target}",
                f"{e.source} — {e.target} ({e.weight}×)",
            )
            for e in subgraph.edges
        ]

    def _recent_turns(self, user: str, session_id: str | None, agent_id: str | None) -> dict[int, Turn]:
        """This session's working set (of ``agent_id``, if given), by seq."""
        if session_id is None:
            return {}
        found = self._store_tiers.get_by_seqs(self._working_seqs(user, session_id), user)  # type: ignore[attr-defined]
        return {seq: turn for seq, turn in found.items() if agent_id is None or turn.agent_id == agent_id}


def _recent(turns: Mapping[int, Turn], zone: tzinfo) -> list[Candidate]:
    """This session's latest exchanges, newest first so the budget keeps them; rendering restores time order."""
    return [
        Candidate(
            "recent",
            ItemKind.EPISODE,
            Tier.WORKING,
            t.id,
            f"{t.name or t.role}: {annotate(t.content, t.created_at.astimezone(zone))}",
            when=t.created_at.astimezone(zone),
            source_turn_ids=(t.id,),
            order=seq,
        )
        for seq, t in sorted(turns.items(), key=lambda item: (item[1].created_at, item[0]), reverse=True)
    ]


def _episode(hit: Hit, section: str, zone: tzinfo, *, shorter: bool = False) -> Candidate:
    """A turn hit as an excerpt, relative phrases resolved, dated in ``zone``; with its abridged form if ``shorter``."""
    turn = hit.turn
    assert turn is not None  # episodes are turn hits
    speaker = turn.name or str(turn.role)
    said = turn.created_at.astimezone(zone)
    # A hit on a message burst holds all its messages (``retrieval/bursts.py``).
    content = annotate(hit.content if len(hit.source_turn_ids) > 1 else turn.content, said)
    return Candidate(
        section,
        ItemKind.EPISODE,
        Tier.EPISODIC,
        turn.id,
        f"{speaker}: {content}",
        hit.score,
        hit.source_turn_ids or (turn.id,),
        said,
        order=hit.seq,
        # A burst's messages are abridged one by one: each keeps its own sentences.
        shorter=f"{speaker}: {chr(10).join(abridge(line) for line in content.split(chr(10)))}" if shorter else None,
    )


def _quoting(hits: Sequence[Hit], turns: Mapping[str, Turn]) -> set[str]:
    """Facts that quote their one source turn, one of ``turns``: its excerpt says all they do.

    A fact reads "Caroline · plan: show my paintings — I'm putting together an LGBTQ art
    show…". It quotes its turn when that sentence is in the turn word for word and so is
    every word of its value. One that an LLM reworded, or whose value came from elsewhere
    (a "vegetarian" read from the question before "Yes, since 2019."), may say more than
    the excerpt, and stays. A fact whose turn is not among ``turns`` cannot be restated by
    the block, so its turn is not read.
    """
    quoting: set[str] = set()
    for hit in hits:
        turn = turns.get(hit.source_turn_ids[0]) if len(hit.source_turn_ids) == 1 else None
        head, dash, sentence = hit.content.partition(" — ")
        if turn is None or not dash or not sentence.strip() or sentence not in turn.content:
            continue
        said = set(_WORD.findall(turn.content.casefold()))
        if set(_WORD.findall(head.partition(": ")[2].casefold())) <= said:
            quoting.add(hit.id)
    return quoting


def _same_slot(older: Cell, current: Cell) -> bool:
    return older.subject == current.subject and older.attribute == current.attribute and older.id != current.id


def _date(moment: datetime | None, zone: tzinfo) -> str:
    return moment.astimezone(zone).strftime("%Y-%m-%d") if moment is not None else "?"


if TYPE_CHECKING:
    from memstrata.memory import Memory as _Facade
    from memstrata.memory_search import ItemKey, Rankings
