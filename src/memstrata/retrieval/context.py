"""The context builder: one memory block for a prompt, under a token budget."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, tzinfo
from typing import Protocol

import numpy as np

from memstrata.config import Settings
from memstrata.embeddings.base import Vectors
from memstrata.extraction.time_expressions import annotate, without_notes
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
from memstrata.retrieval.pipeline import MAX_SPEAKERS_STRIPPED, Pipeline, Signals
from memstrata.retrieval.query import ItemKey, Query, Rankings, joined, today_in
from memstrata.storage.roles import GraphStore, KnowledgeStore, SearchStore, TurnStore, VectorStore
from memstrata.storage.text import cell_text, readable_key
from memstrata.tiers.graph import Graph
from memstrata.tiers.procedural import Procedural

# LoCoMo turns average ~25 tokens; asking for budget/12 episodes leaves room to choose.
TOKENS_PER_EPISODE_CANDIDATE = 12
MAX_EPISODE_CANDIDATES = 300
SUMMARY_TIERS = (Tier.SCENE, Tier.MIDTERM, Tier.CONSOLIDATION)
CONTEXT_TIERS = (Tier.LONGTERM, *SUMMARY_TIERS)
PATTERN_MIN_COUNT = 2
_WORD = re.compile(r"\w+")


class ContextStore(TurnStore, SearchStore, VectorStore, KnowledgeStore, GraphStore, Protocol):
    """What the context builder reads: turns, speakers, vectors, facts and the profile, entities."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextRequest:
    """One checked ``context()`` call: the query, whose memory, the budget, and what to leave out or show."""

    text: str
    scope: Scope
    budget: int
    zone: tzinfo
    include_superseded: bool = False
    #: Seqs of turns never offered as excerpts (a chat sends them as messages instead).
    leave_out: frozenset[int] = frozenset()
    #: Quote every excerpt whole; None: the ``abridge_excerpts`` setting decides.
    verbatim: bool | None = None


@dataclass(kw_only=True, eq=False)
class ContextBuilder:
    """Builds the memory block: the ranked turns of the pipeline plus profile, habits, facts, graph and summaries."""

    pipeline: Pipeline
    store: ContextStore
    model_id: str
    settings: Settings
    procedural: Procedural
    graph: Graph
    #: The turns in working memory (one session's, or all the user's), oldest first.
    working_seqs: Callable[[str, str | None], list[int]]
    #: How candidates are packed into the budget (``retrieval/assembly.py``); replaceable.
    assembly_policy: AssemblyPolicy = field(default_factory=AssemblyPolicy)
    #: Which entities' turns a "which books/places…" question lifts (``retrieval/entity_candidates.py``).
    entity_policy: EntityCandidatePolicy = field(default_factory=EntityCandidatePolicy)

    def build(self, request: ContextRequest) -> tuple[Context, list[Hit]]:
        """The block, and the excerpt hits it shows (for visits).

        If the vector index turned out stale (another process deleted turns), the block is
        built once more, reloaded.
        """
        user = request.scope.user_id
        for last_try in (False, True):
            reloads = self.pipeline.reloads(user)
            built, episodes = self._build(request)
            if last_try or self.pipeline.reloads(user) == reloads:
                break
        included = {item.id for item in built.items if item.kind == ItemKind.EPISODE}
        return built, [hit for hit in episodes if hit.id in included]

    def _build(self, request: ContextRequest) -> tuple[Context, list[Hit]]:
        """One try at the block, with the excerpt hits it was offered."""
        scope, zone, budget = request.scope, request.zone, request.budget
        user = scope.user_id
        filters = SearchFilters(agent_id=scope.agent_id)
        wanted = min(
            MAX_EPISODE_CANDIDATES, max(self.settings.search_candidates, budget // TOKENS_PER_EPISODE_CANDIDATE)
        )
        query = Query(
            text=request.text,
            user_id=user,
            depth=wanted,
            today=today_in(zone),  # read once, for both the candidates and the reranks
            zone=zone,
            filters=filters,
            tiers=CONTEXT_TIERS if filters.is_empty else (),
        )
        found = self.pipeline.rankings(query)
        rankings = found.rankings
        loaded: dict[int, Turn] = {}
        order = self._episode_order(query, rankings, loaded)
        if filters.is_empty and found.query_vector is not None:
            order = self._with_entity_turns(query, order, found.query_vector)
        order = [item for item in order if item.key[1] not in request.leave_out]
        # A message burst is one excerpt, its pieces one a line (``retrieval/bursts.py``).
        pipeline = self.pipeline
        episodes = pipeline.bursts(pipeline.load_hits(order, wanted, user, loaded), user, loaded, join=True)
        derived = pipeline.load_hits(
            fuse_scored({"derived": rankings.get("derived", [])}, k=self.settings.rrf_k), wanted, user
        )
        recent = self._recent_turns(user, scope.session_id, scope.agent_id)
        # Summaries carry the dates of their relative phrases as read in the setting's zone
        # when they were made; in another zone those notes could contradict the excerpts.
        dated = (lambda text: text) if str(zone) == str(self.settings.zone) else without_notes
        quote_all = not self.settings.abridge_excerpts if request.verbatim is None else request.verbatim
        patterns = self.procedural.patterns(user, request.text, 8, datetime.now(UTC))
        candidates: dict[str, list[Candidate]] = {
            "profile": self._profile(user),
            "pattern": [
                Candidate(
                    section="pattern",
                    kind=ItemKind.PATTERN,
                    tier=Tier.PROCEDURAL,
                    id=f"pattern:{p.key}",
                    text=p.description,
                    score=p.score,
                )
                for p in patterns
                if p.count >= PATTERN_MIN_COUNT
            ],
            "cell": self._cells(
                derived,
                user,
                include_superseded=request.include_superseded,
                zone=zone,
                showable=[*loaded.values(), *recent.values()],
                by_meaning=found.by_meaning,
            ),
            "graph": self._edges(request.text, user),
            "summary": [
                Candidate(
                    section="summary",
                    kind=hit.tier,
                    tier=hit.tier,
                    id=hit.id,
                    text=dated(hit.content),
                    score=hit.score,
                    source_turn_ids=hit.source_turn_ids,
                )
                for hit in derived
                if hit.tier in SUMMARY_TIERS
            ],
            "episode": [_episode(hit, "episode", zone, shorter=not quote_all) for hit in episodes],
            "recent": _recent(recent, zone),
        }
        policy = replace(self.assembly_policy, verbatim_excerpts=None) if quote_all else self.assembly_policy
        return assemble(request.text, user, candidates, budget, policy), episodes

    # -- helpers ----------------------------------------------------------------------

    def _episode_order(self, query: Query, rankings: Rankings, loaded: dict[int, Turn]) -> list[Fused[ItemKey]]:
        """Turns ranked as ``search`` ranks them, then the deeper candidates after them.

        The head fuses and reranks each retriever's top ``search_candidates`` exactly as
        ``search`` does (deep lists make fusion worse at the top); the tail reranks the
        full lists.
        """
        turn_lists = {name: ranking for name, ranking in rankings.items() if name != "derived"}
        k = self.settings.rrf_k
        head_lists = joined(turn_lists, self.settings.search_candidates)
        turn_lists = joined(turn_lists)
        # Every candidate turn in one read (the head's are in the tail too), and their signals once.
        self.pipeline.turns(
            query.user_id,
            sorted({seq for ranking in turn_lists.values() for (kind, seq), _ in ranking if kind == "turn"}),
            loaded,
        )
        signals: Signals = {}
        head = self.pipeline.rerank(query, fuse_scored(head_lists, k=k), head_lists, loaded, signals)
        seen = {item.key for item in head}
        tail = self.pipeline.rerank(query, fuse_scored(turn_lists, k=k), turn_lists, loaded, signals)
        return head + [item for item in tail if item.key not in seen]

    def _with_entity_turns(
        self, query: Query, order: list[Fused[ItemKey]], query_vector: Vectors
    ) -> list[Fused[ItemKey]]:
        """``order`` with the turns naming the entities of the kind a question asks for moved up
        (``retrieval/entity_candidates.py``); unchanged for any other question."""
        policy, text, user = self.entity_policy, query.text, query.user_id
        if policy.entities <= 0 or not asks_for_kind(text):
            return order
        entities = self.store.entity_vectors(user, self.model_id)
        if len(entities) < 2:
            return order
        cosines = np.stack([vector for _, _, vector in entities]) @ np.asarray(query_vector, dtype=np.float32)
        speakers = self.store.speakers(user, MAX_SPEAKERS_STRIPPED)
        picked = closest_entities(text, [name for _, name, _ in entities], cosines, speakers, policy)
        if not picked:
            return order
        by_id = self.store.entity_mention_seqs(user, [entities[index][0] for index in picked])
        mentions = {index: by_id.get(entities[index][0], []) for index in picked}
        stored = self.store.vectors_for(self.model_id, sorted({seq for seqs in mentions.values() for seq in seqs}))
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
        *,
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
        said = self.pipeline.facts_said_on(hits, user, zone)
        quoting = _quoting(hits, {turn.id: turn for turn in showable})
        found = [
            Candidate(
                section="cell",
                kind=ItemKind.CELL,
                tier=Tier.LONGTERM,
                id=hit.id,
                text=annotate(hit.content, said.get(hit.id)),
                score=hit.score,
                source_turn_ids=hit.source_turn_ids,
                restates_sources=hit.id in quoting,  # then left out when its turn is shown as an excerpt
                shorter=hit.content.partition(" — ")[0] if hit.id in quoting and hit.seq in by_meaning else None,
            )
            for hit in hits
        ]
        if not include_superseded or not found:
            return found
        every = self.store.cells(user, include_superseded=True, limit=100_000)
        by_id = {cell.id: cell for cell in every}
        history: list[Candidate] = []
        for candidate in found:
            current = by_id.get(candidate.id)
            if current is None:
                history.append(candidate)
                continue
            replaced = [
                Candidate(
                    section="cell",
                    kind=ItemKind.CELL,
                    tier=Tier.LONGTERM,
                    id=older.id,
                    text=f"{annotate(cell_text(older), older.valid_from.astimezone(zone))}"
                    f" (until {_date(older.valid_to, zone)}, then replaced)",
                    score=candidate.score,
                    source_turn_ids=(older.source_turn_id,),
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
        traits = [(key, value, (name or "").strip() or "user") for key, value, name in self.store.profile_entries(user)]
        named = len({speaker.casefold() for _, _, speaker in traits if speaker != "user"}) > 1
        return [
            Candidate(
                section="profile",
                kind=ItemKind.PROFILE,
                tier=Tier.LONGTERM,
                id=f"profile:{key}",
                text=f"{speaker} · {readable_key(key)}: {value}" if named else f"{readable_key(key)}: {value}",
            )
            for key, value, speaker in traits
        ]

    def _edges(self, text: str, user: str) -> list[Candidate]:
        subgraph = self.graph.subgraph(user, text, 10)
        return [
            Candidate(
                section="graph",
                kind=ItemKind.GRAPH,
                tier=Tier.GRAPH,
                id=f"edge:{e.source}|{e.target}",
                text=f"{e.source} — {e.target} ({e.weight}×)",
            )
            for e in subgraph.edges
        ]

    def _recent_turns(self, user: str, session_id: str | None, agent_id: str | None) -> dict[int, Turn]:
        """This session's working set (of ``agent_id``, if given), by seq."""
        if session_id is None:
            return {}
        found = self.store.get_by_seqs(self.working_seqs(user, session_id), user)
        return {seq: turn for seq, turn in found.items() if agent_id is None or turn.agent_id == agent_id}


def _recent(turns: Mapping[int, Turn], zone: tzinfo) -> list[Candidate]:
    """This session's latest exchanges, newest first so the budget keeps them; rendering restores time order."""
    return [
        Candidate(
            section="recent",
            kind=ItemKind.EPISODE,
            tier=Tier.WORKING,
            id=t.id,
            text=f"{t.name or t.role}: {annotate(t.content, t.created_at.astimezone(zone))}",
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
        section=section,
        kind=ItemKind.EPISODE,
        tier=Tier.EPISODIC,
        id=turn.id,
        text=f"{speaker}: {content}",
        score=hit.score,
        source_turn_ids=hit.source_turn_ids or (turn.id,),
        when=said,
        order=hit.seq,
        # A burst's messages are abridged one by one: each keeps its own sentences.
        shorter=f"{speaker}: {chr(10).join(abridge(line) for line in content.split(chr(10)))}" if shorter else None,
    )


def _quoting(hits: Sequence[Hit], turns: Mapping[str, Turn]) -> set[str]:
    """Facts that quote their one source turn, one of ``turns``: its excerpt says all they do.

    A fact quotes its turn when its sentence is in the turn word for word and so is every
    word of its value; the turn of a fact whose turn is not among ``turns`` is not read.
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
