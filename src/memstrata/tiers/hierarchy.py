"""Moves memories through the tiers: importance, cells, profile, entities, patterns, segments, sleep."""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, tzinfo

import numpy as np

from memstrata.embeddings.base import Embedder, FittedTopics, Vectors, normalize_rows
from memstrata.embeddings.calibration import unrelated_similarity
from memstrata.errors import StorageError
from memstrata.extraction.cells import ExtractedCell
from memstrata.extraction.entities import entity_names, extract_entities
from memstrata.extraction.patterns import observe_patterns
from memstrata.extraction.time_expressions import annotate
from memstrata.ids import IdGenerator
from memstrata.llms.base import LLM
from memstrata.models import Cell, Consolidation, Role, Segment, Turn
from memstrata.policies.consolidation import ConsolidationPolicy, dbscan, should_consolidate, token_efficiency
from memstrata.policies.heat import HeatPolicy, choose_evictions, segment_heat, should_promote
from memstrata.policies.importance import ImportanceWeights, TurnFeatures, importance
from memstrata.policies.topics import (
    CONVERSATION_GAP,
    MIN_TOPIC_WORDS,
    RECENT_EXCHANGES,
    TopicThresholds,
    choose_topic,
    has_topic,
    recent_direction,
    topic_runs,
)
from memstrata.retrieval.fulltext import indexed_text
from memstrata.storage.base import Job, TierStore
from memstrata.storage.text import cell_gist
from memstrata.tiers.steps import MemorySteps, content_words

CONSOLIDATION_BATCH = 1000
NOVELTY_WINDOW = 50
ENTITY_VECTORS_PER_JOB = 256  # entity names embedded in one job at most (about 2 s with the default embedder)
CELL_VECTORS_PER_JOB = 256  # facts embedded in one job at most, newest first
SPEAKERS_READ = 200  # speaker names read to leave out of the facts' embedded text, as search does of a query
KNOWN_ATTRIBUTES_SCANNED = 200  # recent current cells whose attributes the LLM extractor is shown
FOLLOWING_TURNS_READ = 8  # turns read after an exchange to find the one said next


# Filing an exchange is read, then written; a write that lost a race to another worker is redone.
FILING_ATTEMPTS = 5
FILING_PAUSE_SECONDS = 0.05  # at most this many seconds times the attempt number between two


@dataclass(frozen=True, slots=True)
class HierarchyPolicy:
    """Every knob of the hierarchy, with named defaults."""

    working_capacity: int = 10
    #: Cosines at which an exchange joins an earlier segment, and stays in the current one;
    #: None: set for the embedder (:meth:`TopicThresholds.calibrated`).
    segment_similarity: float | None = None
    segment_continue_similarity: float | None = None
    heat: HeatPolicy = field(default_factory=HeatPolicy)
    consolidation: ConsolidationPolicy = field(default_factory=ConsolidationPolicy)
    importance: ImportanceWeights = field(default_factory=ImportanceWeights)
    # DBSCAN chains dense sentence embeddings into one cluster per conversation (measured on
    # LoCoMo: one cluster of 419 turns, TES 0.26), so big clusters are cut into runs of
    # consecutive turns, whose topics are local in time.
    max_cluster_turns: int = 20
    # Shorter than ``flush()``'s default 60 s wait, so a job a killed process left leased runs
    # again within it; renewed every third of it while it runs.
    job_lease_seconds: float = 45.0
    max_attempts: int = 3
    #: The zone in which a turn's day is read when a summary resolves its relative dates.
    timezone: tzinfo = UTC


def without_labels(text: str, speakers: Collection[str]) -> str:
    """``text`` less the "Name: " labels of ``speakers``' names, wherever one opens a line, a sentence or a word run."""
    names = sorted((re.escape(name) for name in speakers if name.strip()), key=len, reverse=True)
    if not names:
        return text
    return re.sub(rf"(?:(?<=^)|(?<=\s)|(?<=\]))(?:{'|'.join(names)}): ", "", text)


class Hierarchy:
    """Runs the background jobs that derive every tier from the episodic turns."""

    def __init__(
        self, store: TierStore, embedder: Embedder, llm: LLM, policy: HierarchyPolicy, ids: IdGenerator
    ) -> None:
        self._store = store
        self._embedder = embedder
        self.policy = policy
        self.steps = MemorySteps(llm, embedder, policy.consolidation)
        self._ids = ids
        self._running_importance: dict[str, float] = {}
        self._lock = threading.Lock()  # one job at a time touches the tiers of this process
        self._topics: TopicThresholds | None = None

    def topic_thresholds(self) -> TopicThresholds:
        """The cosines that file exchanges into segments: as configured, the rest set for the embedder."""
        if self._topics is None:
            self._topics = topic_thresholds(
                self._embedder, self.policy.segment_similarity, self.policy.segment_continue_similarity
            )
        return self._topics

    def run(self, job: Job) -> None:
        """Do one queued job."""
        with self._lock:
            if job.kind == "process":
                self.process(job.user_id, [int(seq) for seq in job.payload.get("seqs", [])])
            elif job.kind == "midterm":
                self.to_midterm(job.user_id, [int(seq) for seq in job.payload.get("seqs", [])])
            elif job.kind == "consolidate":
                self.consolidate(job.user_id)
            elif job.kind == "visit":
                searches = [[int(seq) for seq in searched] for searched in job.payload.get("searches", [])]
                self._visit(job.id, job.user_id, searches)
            else:
                raise ValueError(f"unknown job kind {job.kind!r}")

    # -- new turns --------------------------------------------------------------------

    def process(self, user_id: str, seqs: Sequence[int]) -> None:
        """Importance, cells and profile, entities and patterns for newly stored turns.

        Safe to run again on the same turns (a retried job): nothing is stored or counted twice.
        """
        turns = self._store.get_by_seqs(list(seqs), user_id)
        vectors = self._store.vectors_for(self._embedder.model_id, list(turns))
        scores: dict[int, float] = {}
        for seq in sorted(turns):
            turn = turns[seq]
            found = extract_entities(turn.content, known_people=[turn.name] if turn.name else ())
            if found:
                self._store.add_entities(user_id, seq, [(e.name, e.kind.value) for e in found], turn.created_at)
            if turn.importance is None:
                scores[seq] = self._importance(user_id, seq, turn, len(found), vectors.get(seq))
            if turn.role is Role.USER:
                self._remember_cells(user_id, seq, turn)
                previous = self._store.previous_user_text(user_id, turn.session_id, seq)
                for pattern in observe_patterns(turn.content, previous_user_text=previous):
                    self._store.observe_pattern(
                        user_id, seq, pattern.key, pattern.description, pattern.evidence, turn.created_at
                    )
        if scores:
            self._store.set_importance(scores)
        self._embed_entities(user_id)
        self.embed_cells(user_id)
        self._maybe_consolidate(user_id)

    def _embed_entities(self, user_id: str) -> None:
        """Embed the names of the user's entities that have no vector of this embedder yet.

        At most ``ENTITY_VECTORS_PER_JOB`` a job, the most mentioned first: a store from before
        entity vectors (or one whose embedder changed) catches up over the next jobs.
        """
        model = self._embedder.model_id
        missing = self._store.entities_without_vectors(user_id, model, ENTITY_VECTORS_PER_JOB)
        if missing:
            vectors = self._embedder.embed_documents([name for _, name in missing])
            self._store.save_entity_vectors(model, {entity_id: vectors[i] for i, (entity_id, _) in enumerate(missing)})

    def embed_cells(self, user_id: str, limit: int = CELL_VECTORS_PER_JOB) -> int:
        """Embed at most ``limit`` of the user's current facts that have no vector of this embedder yet; how many.

        The newest first, each as ``cell_gist`` reads it. Each job does it after storing its
        facts, so a store from before fact vectors (or one whose embedder changed) catches up
        over the user's next jobs. A fact deleted meanwhile is skipped when the vectors are saved.
        """
        model = self._embedder.model_id
        missing = self._store.cells_without_vectors(user_id, model, limit)
        if not missing:
            return 0
        speakers = self._store.speakers(user_id, SPEAKERS_READ)
        vectors = self._embedder.embed_documents([cell_gist(cell, speakers) for cell in missing])
        self._store.save_cell_vectors(model, {cell.id: vectors[i] for i, cell in enumerate(missing)})
        return len(missing)

    def _importance(self, user_id: str, seq: int, turn: Turn, entity_count: int, vector: Vectors | None) -> float:
        novelty = 1.0
        if vector is not None:
            recent = self._store.recent_vectors(self._embedder.model_id, user_id, seq, NOVELTY_WINDOW)
            if recent:
                matrix = np.frombuffer(b"".join(recent), dtype=np.float32).reshape(len(recent), -1)
                novelty = 1.0 - float(np.max(matrix @ vector))
        features = TurnFeatures(
            text=turn.content,
            role=turn.role.value,
            pinned=bool(turn.metadata.get("pinned", False)),
            entity_count=entity_count,
            novelty=novelty,
        )
        score, running = importance(
            features, weights=self.policy.importance, running=self._running_importance.get(user_id)
        )
        self._running_importance[user_id] = running
        return score

    def _remember_cells(self, user_id: str, seq: int, turn: Turn) -> None:
        known = self._known_attributes(user_id) if self.steps.uses_llm else []
        extracted = self.steps.cells(turn, known)
        for item in extracted:
            for attempt in range(FILING_ATTEMPTS):
                if attempt:  # two workers that keep colliding drift apart
                    time.sleep(random.uniform(0, FILING_PAUSE_SECONDS * attempt))
                if self._remember_cell(user_id, seq, turn, item):
                    break
            else:
                raise StorageError(
                    f"a fact of user {user_id!r} could not be stored: other workers kept changing its"
                    f" {item.subject} {item.attribute!r} meanwhile; the job is tried again"
                )
        current_profile = self._store.profile(user_id) if self.steps.uses_llm else {}
        updates = self.steps.profile(turn, extracted, current_profile)
        if updates:
            self._store.set_profile(user_id, updates, seq, turn.created_at)

    def _remember_cell(self, user_id: str, seq: int, turn: Turn, item: ExtractedCell) -> bool:
        """Store one extracted cell where it belongs; False, storing nothing, if its slot changed meanwhile.

        Another worker storing or ending a value of the same subject and attribute between
        the read and the write would otherwise leave two current values of a single-valued
        fact, the same value twice, or two late values whose validities overlap; the write
        checks the slot is still as read.
        """
        # Every cell of the slot: multi-valued attributes carry their object ("likes:hiking"),
        # so a slot holds the history of one value, not a list that grows without end.
        slot = self._store.cells(
            user_id, subject=item.subject, attribute=item.attribute, include_superseded=True, limit=None
        )
        current = [c for c in slot if c.is_current]
        same = [cell for cell in current if cell.value.casefold() == item.value.casefold()]
        if same:
            if same[0].source_turn_id == turn.id:
                return True  # this turn's own fact (a retried job)
            # Said again: nothing new to remember, but this turn is noted, so the fact outlives the
            # deletion of the turn that said it first. False when that fact went meanwhile: decide again.
            return self._store.restate_cell(user_id, same[0].id, seq, item.value, _sentence(item))
        if any(c.source_turn_id == turn.id and c.value.casefold() == item.value.casefold() for c in slot):
            return True  # stored when this turn was processed before (a retried job), superseded since
        seen = {c.id: c.is_current for c in slot}
        cell = Cell(
            id=self._ids.new(),
            user_id=user_id,
            kind=item.kind.value,
            subject=item.subject,
            attribute=item.attribute,
            value=item.value,
            content=_sentence(item),
            salience=item.salience,
            valid_from=turn.created_at,
            source_turn_id=turn.id,
        )
        # A cell from a turn processed late never retires a newer one; of a single value,
        # it is history at once, replaced by the value said next.
        candidates = [c for c in current if c.valid_from <= turn.created_at]
        newer = [c for c in slot if c.valid_from > turn.created_at]
        if item.is_single_valued and any(c.is_current for c in newer):
            following = min(newer, key=lambda c: (c.valid_from, c.id))
            cell = replace(cell, valid_to=following.valid_from, superseded_by=following.id)
            # The value before it now ends where it begins, so their validities never overlap.
            before = [c.id for c in slot if c.superseded_by == following.id and c.valid_from < cell.valid_from]
            stored = self._store.add_cell(cell, seq, single_valued=True, supersede=before, seen_slot=seen)
        else:
            older = self.steps.superseded(cell, candidates, is_single_valued=item.is_single_valued)
            stored = self._store.add_cell(
                cell, seq, single_valued=item.is_single_valued, supersede=older, seen_slot=seen
            )
        return stored is not False  # a store written before the check returns None: it stored the cell

    def _known_attributes(self, user_id: str) -> list[str]:
        """Attributes of the user's recent current cells, so the LLM extractor reuses their keys."""
        cells = self._store.cells(user_id, limit=KNOWN_ATTRIBUTES_SCANNED)
        return list(dict.fromkeys(cell.attribute for cell in cells))

    # -- mid-term ---------------------------------------------------------------------

    def to_midterm(self, user_id: str, seqs: Sequence[int]) -> None:
        """File exchanges that left working memory into the closest topic segment, or a new one.

        Exchanges that left together (a bulk ``add``, an import, an idle session) are split
        into runs that stay on one topic (:func:`topic_runs`), and each run is filed on its
        own, in order: much as if each exchange had been added, and had left, one at a time
        (a run is compared with the segments as a whole).

        A turn already filed (a retried job, or the same job run by two workers) is not
        filed again. When another worker files one of them, or changes the chosen segment,
        between the reads and the write, the write stores nothing and what is left is filed
        afresh; a job that keeps losing such races fails, and is tried again later.
        """
        left = sorted(set(seqs) - self._store.filed_turns(seqs))
        for run in self._by_topic(user_id, left):
            self._file_run(user_id, run)

    def _file_run(self, user_id: str, seqs: Sequence[int]) -> None:
        for attempt in range(FILING_ATTEMPTS):
            if attempt:  # two workers that keep colliding drift apart
                time.sleep(random.uniform(0, FILING_PAUSE_SECONDS * attempt))
            left = sorted(set(seqs) - self._store.filed_turns(seqs))
            if not left or self._file(user_id, left):
                return
        raise StorageError(
            f"{len(seqs)} turns of user {user_id!r} could not be filed in mid-term: other workers kept"
            " changing the segments they belong in; the job is tried again"
        )

    def _by_topic(self, user_id: str, seqs: Sequence[int]) -> list[list[int]]:
        """``seqs`` cut into exchanges (one starts at each user message), grouped in runs of one topic."""
        turns = self._store.get_by_seqs(list(seqs), user_id)
        exchanges = _exchanges(turns)
        if len(exchanges) < 2:
            return exchanges
        stored = self._store.vectors_for(self._embedder.model_id, sorted(turns))
        vectors, said = self._exchange_topics(exchanges, turns, stored)
        breaks = {
            index
            for index in range(1, len(exchanges))
            if _resumes(turns[exchanges[index - 1][-1]], turns[exchanges[index][0]])
        }
        thresholds = self.topic_thresholds()
        runs = topic_runs(vectors, said, thresholds.stay, breaks=breaks, returning=thresholds.returning)
        return [[seq for index in run for seq in exchanges[index]] for run in runs]

    def _exchange_topics(
        self, exchanges: Sequence[Sequence[int]], turns: dict[int, Turn], stored: dict[int, Vectors]
    ) -> tuple[list[Vectors], list[Counter[str]]]:
        """Each exchange's direction and content words.

        The direction is the mean of the exchange's turns that say enough to have a topic, else
        of all its turns: a reply such as "Noted." or "Sure!" says nothing of the topic, and
        the same reply after every question would make every exchange look alike.
        """
        speakers = {name for turn in turns.values() if (name := turn.name)}
        directions, said = [], []
        for part in exchanges:
            words = {seq: content_words([turns[seq].content], speakers=speakers) for seq in part}
            known = [seq for seq in part if seq in stored]
            topical = [seq for seq in known if len(words[seq]) >= MIN_TOPIC_WORDS]
            directions.append(_mean_direction([stored[seq] for seq in topical or known], self._embedder.dimension))
            said.append(sum(words.values(), Counter[str]()))
        return directions, said

    def _direction(self, turns: dict[int, Turn], stored: dict[int, Vectors]) -> Vectors:
        """Where a segment's topic has got to: the :func:`recent_direction` of its latest exchanges that have one.

        Exchanges without a topic of their own ("Thanks!") are filed with the topic, but do
        not steer it; a segment of nothing but such exchanges points where they do.
        """
        latest: list[Vectors] = []  # the latest exchanges, newest first, until RECENT_EXCHANGES have a topic
        topical: list[Vectors] = []
        for part in reversed(_exchanges(turns)):  # a long segment is read only as far back as needed
            (vector,), (words,) = self._exchange_topics([part], turns, stored)
            latest.append(vector)
            if has_topic(vector, words):
                topical.append(vector)
                if len(topical) == RECENT_EXCHANGES:
                    break
        if not latest:
            return np.zeros(self._embedder.dimension, dtype=np.float32)
        return recent_direction((topical or latest)[::-1])

    def _file(self, user_id: str, seqs: Sequence[int]) -> bool:
        """Files ``seqs`` into one segment; False, storing nothing, if another filing or a delete came between."""
        turns = self._store.get_by_seqs(list(seqs), user_id)
        if not turns:
            return True
        order = sorted(turns)
        vectors = self._store.vectors_for(self._embedder.model_id, order)
        # A run of several exchanges stays on one topic from its first exchange that has one,
        # so that exchange decides where the run goes, as it would if it had been filed alone.
        own, said = self._exchange_topics(_exchanges(turns), turns, vectors)
        lead = next((index for index, words in enumerate(said) if has_topic(own[index], words)), 0)
        candidates = self._store.active_segments(user_id, self._embedder.model_id)
        # The current topic is the conversation's: the segment of the turn said just before in
        # the session, unless the conversation paused for longer than CONVERSATION_GAP.
        first = min(order, key=lambda seq: (turns[seq].created_at, seq))
        before = self._store.segment_before(user_id, first)
        current = None
        if before is not None and turns[first].created_at - before[1] <= CONVERSATION_GAP:
            current = next((index for index, (segment, _) in enumerate(candidates) if segment.id == before[0]), None)
        directions = [_stored_direction(direction, self._embedder.dimension) for _, direction in candidates]
        thresholds = self.topic_thresholds()
        picked = choose_topic(own[lead], said[lead], directions, current, thresholds)
        aside = False
        if picked is None and current is not None:  # would leave the conversation's topic: an aside?
            following = self._following(user_id, turns, _exchanges(turns)[lead][-1])
            picked = choose_topic(own[lead], said[lead], directions, current, thresholds, following=following)
            aside = picked == current
        now = datetime.now(UTC)
        latest = max(turns[seq].created_at for seq in order)
        chosen = None if picked is None else candidates[picked][0]
        held: list[int] = []
        if chosen is not None:
            # The summary to extend and the turns it covers, read together: a filing that
            # lands between two separate reads would otherwise drop out of the summary.
            snapshot = self._store.active_segment(chosen.id)
            if snapshot is None:
                return False  # archived or dropped since it was chosen
            chosen, held = snapshot
        segment = chosen or Segment(
            id=self._ids.new(),
            user_id=user_id,
            summary="",
            keywords=(),
            visits=0,
            turn_count=0,
            heat=0.0,
            state="active",
            created_at=now,
            last_activity=latest,
            session_id=turns[order[0]].session_id,
        )
        members = sorted(set(held) | set(order))
        member_turns = self._store.get_by_seqs(members, user_id)
        member_vectors = self._store.vectors_for(self._embedder.model_id, members)
        texts = [indexed_text(member_turns[seq]) for seq in members if seq in member_turns]
        matrix = np.stack([member_vectors[seq] for seq in members if seq in member_vectors]) if member_vectors else None
        new_texts = [indexed_text(turns[seq]) for seq in order]
        speakers = {name for turn in member_turns.values() if (name := turn.name)}
        summary, words = self.steps.segment_summary(
            segment,
            new_texts,
            texts,
            matrix,
            speakers,
            said=[self._day(member_turns[seq]) for seq in members if seq in member_turns],
            new_said=[self._day(turns[seq]) for seq in order],
        )
        last_activity = max(segment.last_activity, latest)
        updated = replace(
            segment,
            summary=summary,
            keywords=words,
            turn_count=len(members),
            last_activity=last_activity,
            heat=segment_heat(
                visits=segment.visits,
                interaction_length=len(members),
                last_activity=last_activity,
                now=now,
                policy=self.policy.heat,
            ),
        )
        # What the segment is compared with next: where its topic has got to, not its whole centroid.
        # An aside does not steer it: the exchange that came back is compared with the topic as
        # it was (the aside counts among the latest exchanges from that exchange's filing on).
        # The direction read with the candidates is kept only if no filing changed the segment
        # before its snapshot was read; otherwise it is computed afresh.
        unchanged = aside and picked is not None and candidates[picked][0].turn_count == len(held)
        kept = directions[picked] if unchanged and picked is not None else None
        direction = kept if kept is not None else self._direction(member_turns, member_vectors)
        known = len(held) if chosen is not None else None
        saved = self._store.save_segment(
            updated, direction.tobytes(), order, known_turns=known, model_id=self._embedder.model_id
        )
        if not saved:
            return False
        self._evict(user_id, now)
        return True

    def _following(self, user_id: str, turns: dict[int, Turn], seq: int) -> tuple[Vectors, Counter[str]] | None:
        """The direction and words of the exchange said next after turn ``seq`` in its session, if any yet.

        It may still be in working memory: it was said, so it can tell whether the exchange
        being filed was an aside. None when none followed, or only after a pause of more than
        :data:`CONVERSATION_GAP`.
        """
        after = self._store.get_by_seqs(self._store.turns_after(user_id, seq, FOLLOWING_TURNS_READ), user_id)
        order = sorted(after, key=lambda key: (after[key].created_at, key))
        starts = [index for index, key in enumerate(order) if after[key].role is Role.USER]
        if not starts or after[order[starts[0]]].created_at - turns[seq].created_at > CONVERSATION_GAP:
            return None
        part = order[starts[0] : starts[1] if len(starts) > 1 else None]
        stored = self._store.vectors_for(self._embedder.model_id, part)
        (vector,), (words,) = self._exchange_topics([part], {**turns, **after}, stored)
        return vector, words

    def _evict(self, user_id: str, now: datetime) -> None:
        heats = {
            segment.id: segment_heat(
                visits=segment.visits,
                interaction_length=segment.turn_count,
                last_activity=segment.last_activity,
                now=now,
                policy=self.policy.heat,
            )
            for segment, _ in self._store.active_segments(user_id)
        }
        evicted = choose_evictions(heats, self.policy.heat)
        if evicted:
            self._store.archive_segments(user_id, evicted, {key: heats[key] for key in evicted})

    def _visit(self, job_id: int, user_id: str, searches: Sequence[Sequence[int]]) -> None:
        """Retrieval touched these turns: their segments get a visit per search, and hot ones are promoted.

        The store counts a job's visits once, however often it runs; the promotion is checked
        every time, so a run that died after counting still promotes on its retry.
        """
        now = datetime.now(UTC)

        def heat(visits: int, turns: int) -> float:
            return segment_heat(
                visits=visits, interaction_length=turns, last_activity=now, now=now, policy=self.policy.heat
            )

        for segment in self._store.count_visits(job_id, user_id, searches, now, heat):
            if segment.promoted_at is None and should_promote(segment.heat, self.policy.heat):
                texts = self._segment_texts(user_id, segment.id) if self.steps.uses_llm else []
                title, summary = self.steps.scene(segment, texts)
                self._store.promote_segment(replace(segment, summary=summary), self._ids.new(), title, now)

    def _day(self, turn: Turn) -> date:
        """The day ``turn`` was said, in the configured zone: what its "yesterday" counts from."""
        return turn.created_at.astimezone(self.policy.timezone).date()

    def _segment_texts(self, user_id: str, segment_id: str) -> list[str]:
        seqs = self._store.segment_turn_seqs(segment_id)
        turns = self._store.get_by_seqs(seqs, user_id)
        return [annotate(indexed_text(turns[seq]), self._day(turns[seq])) for seq in seqs if seq in turns]

    # -- consolidation ----------------------------------------------------------------

    def consolidation_due(self, user_id: str) -> bool:
        """Whether enough turns (or words) came since the user's last sleep for the next one.

        Counted from the newest turn that sleep looked at (stored, so every process agrees),
        not over every turn not consolidated: turns no cluster took would otherwise make
        every later batch of new turns sleep again.
        """
        pending, words = self._store.unconsolidated_size(user_id, after_seq=self._store.slept_through(user_id))
        return pending > 0 and should_consolidate(pending, words, self.policy.consolidation)

    def _maybe_consolidate(self, user_id: str) -> None:
        # Counted in SQL: this runs after every batch of new turns.
        if self.consolidation_due(user_id):
            self.consolidate(user_id)

    def consolidate_backlog(self, user_id: str) -> list[Consolidation]:
        """Sleep batch after batch until every turn there was when it started has been looked at.

        Under the lock the jobs run under: a job's sleep and this one never look at the same
        turns at once (each would summarise them, an LLM call each), as the mark moves only
        once a batch is stored.
        """
        with self._lock:
            pending, _ = self._store.unconsolidated_size(user_id, after_seq=self._store.slept_through(user_id))
            made = self.consolidate(user_id)
            for _ in range(max(0, pending - 1) // CONSOLIDATION_BATCH):
                made.extend(self.consolidate(user_id))
            return made

    def consolidate(self, user_id: str) -> list[Consolidation]:
        """Cluster turns not yet consolidated and store one summary per cluster, with its TES."""
        policy = self.policy.consolidation
        # Bounded batches keep one sleep short (DBSCAN is quadratic). A batch takes the turns
        # no sleep has looked at yet, oldest first, so a backlog is worked through in order.
        seqs = self._store.unconsolidated_turns(
            user_id, CONSOLIDATION_BATCH, after_seq=self._store.slept_through(user_id)
        )
        if not seqs:
            return []
        # Marked once the batch's clusters are stored: a sleep cut short (a crash, a storage
        # error) leaves the mark where it was, so its retry looks at the same turns again.
        looked_at = seqs[-1]
        vectors = self._store.vectors_for(self._embedder.model_id, seqs)
        seqs = [seq for seq in seqs if seq in vectors]
        if len(seqs) < policy.min_samples:
            self._store.mark_slept(user_id, looked_at)
            return []
        matrix = np.stack([vectors[seq] for seq in seqs])
        labels = dbscan(matrix, eps=policy.eps, min_samples=policy.min_samples)
        turns = self._store.get_by_seqs(seqs, user_id)
        made: list[Consolidation] = []
        groups: list[list[int]] = []
        for label in sorted(set(labels) - {-1}):
            members = [seq for seq, value in zip(seqs, labels, strict=True) if value == label and seq in turns]
            size = self.policy.max_cluster_turns
            groups.extend(members[start : start + size] for start in range(0, len(members), size))
        for members in groups:
            if len(members) < policy.min_samples:
                continue
            texts = [indexed_text(turns[seq]) for seq in members]
            member_vectors = np.stack([vectors[seq] for seq in members])
            cluster = f"the cluster from turn {turns[members[0]].id}"
            said = [self._day(turns[seq]) for seq in members]
            summary = self.steps.consolidation_summary(texts, member_vectors, label=cluster, said=said)
            # Measured on what was said: the speaker labels the summary lends its sentences
            # would count as entities it keeps, by construction.
            speakers = {name for seq in members if (name := turns[seq].name)}
            efficiency = token_efficiency(
                [turns[seq].content for seq in members], without_labels(summary, speakers), entities=entity_names
            )
            consolidation = Consolidation(
                id=self._ids.new(),
                user_id=user_id,
                summary=summary,
                source_turn_ids=tuple(turns[seq].id for seq in members),
                compression_ratio=efficiency.compression_ratio,
                entity_preservation=efficiency.entity_preservation,
                tes=efficiency.score,
                created_at=datetime.now(UTC),
            )
            if self._store.add_consolidation(consolidation, members):
                made.append(consolidation)
        self._store.mark_slept(user_id, looked_at)
        return made


def topic_thresholds(embedder: Embedder, join: float | None, stay: float | None) -> TopicThresholds:
    """The thresholds that file exchanges into segments: ``join`` and ``stay`` as given, else set for ``embedder``.

    A bundled model knows the thresholds fitted for it (:class:`FittedTopics`); any other is
    calibrated from how alike it finds unrelated lines.
    """
    if join is not None and stay is not None:
        return TopicThresholds(join=join, stay=stay)
    if isinstance(embedder, FittedTopics):
        fitted_join, fitted_stay = embedder.topic_cosines
        defaults = TopicThresholds(join=fitted_join, stay=fitted_stay)
    else:
        defaults = TopicThresholds.calibrated(unrelated_similarity(embedder))
    return defaults.with_overrides(join, stay)


def _resumes(previous: Turn, turn: Turn) -> bool:
    """Whether ``turn`` starts a conversation afresh after ``previous``: another session, or after a pause."""
    return turn.session_id != previous.session_id or turn.created_at - previous.created_at > CONVERSATION_GAP


def _stored_direction(stored: bytes | None, dimension: int) -> Vectors | None:
    """A segment's stored direction, or None when it has none or it has another size than this embedder's.

    The store already leaves out directions another model made; this catches those stored
    before the model was recorded. After the store's embedder is switched, a segment filed
    before is left out of the choice (never joined by similarity) until a filing that stays
    in it as the current one stores its direction again from the new vectors.
    """
    if stored is None or len(stored) != dimension * np.dtype(np.float32).itemsize:
        return None
    return np.frombuffer(stored, dtype=np.float32)


def _exchanges(turns: dict[int, Turn]) -> list[list[int]]:
    """The seqs of ``turns`` in order, cut into exchanges: one starts at each user message."""
    exchanges: list[list[int]] = []
    for seq in sorted(turns):
        if not exchanges or turns[seq].role is Role.USER:
            exchanges.append([])
        exchanges[-1].append(seq)
    return exchanges


def _mean_direction(rows: Sequence[Vectors], dimension: int) -> Vectors:
    if not rows:
        return np.zeros(dimension, dtype=np.float32)
    mean: Vectors = normalize_rows(np.mean(np.stack(rows), axis=0, keepdims=True))[0]
    return mean


def _sentence(item: ExtractedCell) -> str:
    """A cell's searchable sentence: the LLM's scene label (which has no column of its own) leads it."""
    return f"{item.scene}: {item.text}" if item.scene else item.text
