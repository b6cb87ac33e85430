"""Mid-term memory: exchanges filed into topic segments, their heat, eviction and promotion to scenes."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from typing import Protocol

import numpy as np

from memstrata.embeddings.base import Embedder, FittedTopics, Vectors, normalize_rows
from memstrata.embeddings.calibration import unrelated_similarity
from memstrata.errors import StorageError
from memstrata.extraction.time_expressions import annotate
from memstrata.ids import IdGenerator
from memstrata.models import Role, Segment, Turn, whose
from memstrata.policies.heat import choose_evictions, segment_heat, should_promote
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
from memstrata.storage.roles import SegmentStore, TurnStore, VectorStore
from memstrata.tiers.policy import FILING_ATTEMPTS, FILING_PAUSE_SECONDS, HierarchyPolicy
from memstrata.tiers.steps import MemorySteps, content_words, day_said

FOLLOWING_TURNS_READ = 8  # turns read after an exchange to find the one said next


class MidTermStore(SegmentStore, TurnStore, VectorStore, Protocol):
    """What mid-term memory reads and writes: segments, the turns filed in them and their vectors."""


@dataclass(kw_only=True, eq=False)
class MidTerm:
    """Files turns that left working memory into segments, and counts retrieval's visits to them."""

    store: MidTermStore
    embedder: Embedder
    steps: MemorySteps
    ids: IdGenerator
    policy: HierarchyPolicy
    _topics: TopicThresholds | None = field(default=None, init=False)

    def thresholds(self) -> TopicThresholds:
        """The cosines that file exchanges into segments: as configured, the rest set for the embedder."""
        if self._topics is None:
            self._topics = topic_thresholds(
                self.embedder, self.policy.segment_similarity, self.policy.segment_continue_similarity
            )
        return self._topics

    def file(self, user_id: str, seqs: Sequence[int], now: datetime | None = None) -> None:
        """File exchanges that left working memory into the closest topic segment, or a new one.

        Exchanges that left together are split into runs on one topic (:func:`topic_runs`), each
        filed in order. A turn already filed is not filed again; a filing another worker overtook
        stores nothing and files afresh. See docs/tiers.md#off-the-write-path.
        """
        left = sorted(set(seqs) - self.store.filed_turns(seqs))
        moment = now or datetime.now(UTC)  # one time for the whole job: its segments and evictions agree
        for run in self._by_topic(user_id, left):
            self._file_run(user_id, run, moment)

    def _file_run(self, user_id: str, seqs: Sequence[int], now: datetime) -> None:
        for attempt in range(FILING_ATTEMPTS):
            if attempt:  # two workers that keep colliding drift apart
                time.sleep(random.uniform(0, FILING_PAUSE_SECONDS * attempt))
            left = sorted(set(seqs) - self.store.filed_turns(seqs))
            if not left or self._file(user_id, left, now):
                return
        raise StorageError(
            f"{len(seqs)} turns of {whose(user_id)} could not be filed in mid-term: other workers kept"
            " changing the segments they belong in; the job is tried again"
        )

    def _by_topic(self, user_id: str, seqs: Sequence[int]) -> list[list[int]]:
        """``seqs`` cut into exchanges (one starts at each user message), grouped in runs of one topic."""
        turns = self.store.get_by_seqs(list(seqs), user_id)
        exchanges = _exchanges(turns)
        if len(exchanges) < 2:
            return exchanges
        stored = self.store.vectors_for(self.embedder.model_id, sorted(turns))
        vectors, said = self._exchange_topics(exchanges, turns, stored)
        breaks = {
            index
            for index in range(1, len(exchanges))
            if _resumes(turns[exchanges[index - 1][-1]], turns[exchanges[index][0]])
        }
        thresholds = self.thresholds()
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
            directions.append(_mean_direction([stored[seq] for seq in topical or known], self.embedder.dimension))
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
            return np.zeros(self.embedder.dimension, dtype=np.float32)
        return recent_direction((topical or latest)[::-1])

    def _file(self, user_id: str, seqs: Sequence[int], now: datetime) -> bool:
        """Files ``seqs`` into one segment; False, storing nothing, if another filing or a delete came between."""
        turns = self.store.get_by_seqs(list(seqs), user_id)
        if not turns:
            return True
        order = sorted(turns)
        vectors = self.store.vectors_for(self.embedder.model_id, order)
        # A run of several exchanges stays on one topic from its first exchange that has one,
        # so that exchange decides where the run goes, as it would if it had been filed alone.
        own, said = self._exchange_topics(_exchanges(turns), turns, vectors)
        lead = next((index for index, words in enumerate(said) if has_topic(own[index], words)), 0)
        candidates = self.store.active_segments(user_id, self.embedder.model_id)
        # The current topic is the conversation's: the segment of the turn said just before in
        # the session, unless the conversation paused for longer than CONVERSATION_GAP.
        first = min(order, key=lambda seq: (turns[seq].created_at, seq))
        before = self.store.segment_before(user_id, first)
        current = None
        if before is not None and turns[first].created_at - before[1] <= CONVERSATION_GAP:
            current = next((index for index, (segment, _) in enumerate(candidates) if segment.id == before[0]), None)
        directions = [_stored_direction(direction, self.embedder.dimension) for _, direction in candidates]
        thresholds = self.thresholds()
        picked = choose_topic(own[lead], said[lead], directions, current, thresholds)
        aside = False
        if picked is None and current is not None:  # would leave the conversation's topic: an aside?
            following = self._following(user_id, turns, _exchanges(turns)[lead][-1])
            picked = choose_topic(own[lead], said[lead], directions, current, thresholds, following=following)
            aside = picked == current
        latest = max(turns[seq].created_at for seq in order)
        chosen = None if picked is None else candidates[picked][0]
        held: list[int] = []
        if chosen is not None:
            # The summary to extend and the turns it covers, read together: a filing that
            # lands between two separate reads would otherwise drop out of the summary.
            snapshot = self.store.active_segment(chosen.id)
            if snapshot is None:
                return False  # archived or dropped since it was chosen
            chosen, held = snapshot
        segment = chosen or Segment(
            id=self.ids.new(),
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
        member_turns = self.store.get_by_seqs(members, user_id)
        member_vectors = self.store.vectors_for(self.embedder.model_id, members)
        texts = [indexed_text(member_turns[seq]) for seq in members if seq in member_turns]
        matrix = np.stack([member_vectors[seq] for seq in members if seq in member_vectors]) if member_vectors else None
        new_texts = [indexed_text(turns[seq]) for seq in order]
        speakers = {name for turn in member_turns.values() if (name := turn.name)}
        summary, words = self.steps.segment_summary(
            segment,
            new_texts,
            texts,
            vectors=matrix,
            speakers=speakers,
            said=[self._said(member_turns[seq]) for seq in members if seq in member_turns],
            new_said=[self._said(turns[seq]) for seq in order],
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
        saved = self.store.save_segment(
            updated, direction.tobytes(), order, known_turns=known, model_id=self.embedder.model_id
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
        after = self.store.get_by_seqs(self.store.turns_after(user_id, seq, FOLLOWING_TURNS_READ), user_id)
        order = sorted(after, key=lambda key: (after[key].created_at, key))
        starts = [index for index, key in enumerate(order) if after[key].role is Role.USER]
        if not starts or after[order[starts[0]]].created_at - turns[seq].created_at > CONVERSATION_GAP:
            return None
        part = order[starts[0] : starts[1] if len(starts) > 1 else None]
        stored = self.store.vectors_for(self.embedder.model_id, part)
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
            for segment, _ in self.store.active_segments(user_id)
        }
        evicted = choose_evictions(heats, self.policy.heat)
        if evicted:
            self.store.archive_segments(user_id, evicted, {key: heats[key] for key in evicted})

    def visit(self, job_id: int, user_id: str, searches: Sequence[Sequence[int]], now: datetime | None = None) -> None:
        """Retrieval touched these turns: their segments get a visit per search, and hot ones are promoted.

        The store counts a job's visits once, however often it runs; the promotion is checked
        every time, so a run that died after counting still promotes on its retry.
        """
        now = now or datetime.now(UTC)

        def heat(visits: int, turns: int) -> float:
            return segment_heat(
                visits=visits, interaction_length=turns, last_activity=now, now=now, policy=self.policy.heat
            )

        for segment in self.store.count_visits(job_id, user_id, searches, now, heat):
            if segment.promoted_at is None and should_promote(segment.heat, self.policy.heat):
                texts = self._segment_texts(user_id, segment.id) if self.steps.uses_llm else []
                title, summary = self.steps.scene(segment, texts)
                self.store.promote_segment(replace(segment, summary=summary), self.ids.new(), title, now)

    def _said(self, turn: Turn) -> date:
        return day_said(turn, self.policy.timezone)

    def _segment_texts(self, user_id: str, segment_id: str) -> list[str]:
        seqs = self.store.segment_turn_seqs(segment_id)
        turns = self.store.get_by_seqs(seqs, user_id)
        return [annotate(indexed_text(turns[seq]), self._said(turns[seq])) for seq in seqs if seq in turns]


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
