"""Working memory in Redis beside the durable store: crash windows, outages, idle expiry, two processes at once.

Every test uses a real redis-server and a real SQLite store; the invariant checked throughout
is the one the issue asks for: every turn ends up in exactly one place — the working set, or
mid-term — never in both, never in neither.
"""

from __future__ import annotations

import itertools
import json
import logging
import multiprocessing
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memstrata import ConfigError, IdConflict, Memory, StorageError
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.models import Role, Turn
from memstrata.storage import open_store
from memstrata.storage.base import Job, TierStore
from memstrata.tiers.worker import Worker
from memstrata.tiers.working import WORKING_JOB, SharedWorkingMemory, WorkingPolicy
from tests.redis_server import RedisServer, free_port, require_driver

require_driver()

import redis  # noqa: E402

from memstrata.storage.redis.working import open_redis_working  # noqa: E402

MODEL = "test-model"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


# -- the orchestration, with a recording job runner -------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TierStore]:
    """A SQLite store of its own."""
    opened: Any = open_store(f"sqlite:///{tmp_path / 'shared.db'}")
    yield opened
    opened.close()


class Recorder:
    """Runs the shared working memory's jobs with a real Worker, keeping what reached the hierarchy."""

    def __init__(self, store: TierStore, shared: SharedWorkingMemory) -> None:
        self.store, self.shared = store, shared
        self.ran: list[Job] = []
        self.worker = Worker(
            shared.claimer(lambda: store.claim_job(60)),
            shared.runner(self.ran.append),
            lambda job: store.finish_job(job.id, attempt=job.attempts),
            lambda job, error, retry: store.fail_job(job.id, error, retry=retry, attempt=job.attempts),
        )

    def drain(self) -> list[Job]:
        """Run every queued job; the jobs handed to the hierarchy, in order."""
        self.ran.clear()
        self.worker.drain()
        return list(self.ran)


def _shared(store: TierStore, url: str, **policy: Any) -> SharedWorkingMemory:
    settings = {"capacity": 2, "retry_seconds": 0.05, **policy}
    return SharedWorkingMemory(store, open_redis_working(url, lease_seconds=0.3), WorkingPolicy(**settings))


def _pair(n: int, *, session: str = "s") -> list[Turn]:
    """The ``n``-th exchange of a session: a user message and the reply."""
    scope: dict[str, Any] = {"user_id": "ana", "created_at": NOW, "session_id": session}
    return [
        Turn(id=f"{session}-u{n}", role=Role.USER, content=f"q {n}", **scope),
        Turn(id=f"{session}-a{n}", role=Role.ASSISTANT, content=f"a {n}", **scope),
    ]


def _seqs(jobs: list[Job], kind: str) -> list[int]:
    return sorted(int(seq) for job in jobs if job.kind == kind for seq in job.payload["seqs"])


def test_an_add_tracks_at_once_and_its_replay_only_processes(store: TierStore, redis_url: str) -> None:
    shared = _shared(store, redis_url)
    seqs = [seq for n in range(3) for seq in shared.insert(_pair(n), None, MODEL)]
    assert shared.working_seqs("ana", "s") == seqs[2:]
    ran = Recorder(store, shared).drain()
    assert _seqs(ran, "midterm") == seqs[:2]  # the overflow, queued by the add itself
    assert _seqs(ran, "process") == seqs  # each replay processed its add's turns ...
    assert shared.working_seqs("ana", "s") == seqs[2:]  # ... and tracked nothing twice


def test_a_crash_after_storing_and_before_tracking_is_replayed(store: TierStore, redis_url: str) -> None:
    shared = _shared(store, redis_url)
    seqs: list[int] = []
    for n in range(3):  # what insert() does, up to a crash right after the turns are stored
        turns = _pair(n)
        payload = {"ids": [turn.id for turn in turns], "batch": f"b{n}", "queued_at": time.time()}
        store.enqueue_job(WORKING_JOB, "ana", payload)
        seqs += store.insert_turns(turns, None, MODEL)
    assert shared.working_seqs("ana") == []
    ran = Recorder(store, shared).drain()
    assert shared.working_seqs("ana", "s") == seqs[2:]
    assert _seqs(ran, "midterm") == seqs[:2] and _seqs(ran, "process") == seqs


def test_a_job_whose_add_never_stored_its_turns_waits_for_them_then_ends(
    store: TierStore, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = _shared(store, redis_url, commit_grace_seconds=0.3)
    store.enqueue_job(WORKING_JOB, "ana", {"ids": ["never"], "batch": "b", "queued_at": time.time()})
    # The worker's machine's clock runs two minutes ahead: the wait is timed on the store's clock.
    store_clock, ahead = time.time, time.time() + 120
    monkeypatch.setattr(store, "clock", store_clock)
    monkeypatch.setattr(time, "time", lambda: ahead)
    started = time.monotonic()
    assert Recorder(store, shared).drain() == []
    assert time.monotonic() - started >= 0.3  # it waited for a slow add before giving up
    assert store.count_jobs() == 0


def test_replays_waiting_for_their_turns_wait_together_not_one_after_another(store: TierStore, redis_url: str) -> None:
    shared = _shared(store, redis_url, commit_grace_seconds=0.4)
    for n in range(8):  # adds that crashed before storing anything
        store.enqueue_job(WORKING_JOB, "ana", {"ids": [f"never-{n}"], "batch": f"b{n}", "queued_at": store.clock()})
    started = time.monotonic()
    assert Recorder(store, shared).drain() == []
    # Each waits out the grace from its own add; one after another would take 8 × 0.4 s.
    assert time.monotonic() - started < 2.4 and store.count_jobs() == 0


def test_a_replay_run_again_after_its_session_lost_its_other_turns_tracks_nothing_twice(
    store: TierStore, redis_url: str
) -> None:
    shared = _shared(store, redis_url)
    pairs = [_pair(n) for n in range(3)]
    seqs = [shared.insert(pair, None, MODEL) for pair in pairs]
    Recorder(store, shared).drain()  # the first exchange left for mid-term
    for pair in pairs[1:]:
        for turn in pair:
            store.delete(turn.id, "ana")
    shared.discard_deleted("ana", "s")
    assert shared.working_seqs("ana", "s") == []
    # The first exchange's job runs once more (a lease taken over after it released its batch).
    again = {"ids": [turn.id for turn in pairs[0]], "batch": "released", "queued_at": store.clock()}
    store.enqueue_job(WORKING_JOB, "ana", again)
    ran = Recorder(store, shared).drain()
    assert _seqs(ran, "process") == seqs[0] and _seqs(ran, "midterm") == []
    assert shared.working_seqs("ana", "s") == []  # it stays in mid-term only


def test_deletes_skip_a_redis_that_just_failed(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    settings: dict[str, Any] = {"background": False, "working_url": redis_url}
    with Memory(tmp_path / "home", embedder=HashEmbedder(), **settings) as memory:
        stored = [memory.add(text, user_id="ana", session_id="s")[0] for text in ("one", "two", "three")]
        assert memory.parts.shared_working is not None
        calls: list[Any] = []

        def stalled(*args: Any) -> None:
            calls.append(args)
            raise StorageError("the Redis working set timed out")  # after its timeout, in real life

        monkeypatch.setattr(memory.parts.shared_working._working, "discard", stalled)
        with caplog.at_level(logging.WARNING, logger="memstrata.memory"):
            for turn in stored[:2]:
                memory.delete(turn.id, user_id="ana")
            memory.forget(user_id="ana", session_id="s")
        assert len(calls) == 1  # the later deletions did not wait on it again
        assert memory.history(user_id="ana") == []
        assert sum("memories were deleted" in record.getMessage() for record in caplog.records) == 3


def test_a_refused_add_leaves_no_replay_behind(store: TierStore, redis_url: str) -> None:
    shared = _shared(store, redis_url)
    shared.insert(_pair(0), None, MODEL)
    Recorder(store, shared).drain()
    clash = [replace(_pair(0)[0], content="not what was stored"), *_pair(1)]
    with pytest.raises(IdConflict):
        shared.insert(clash, None, MODEL)
    assert store.count_jobs() == 0 and shared.working_seqs("ana", "s") == shared.working_seqs("ana")


def test_the_replay_of_an_add_whose_turns_were_deleted_ends_at_once(store: TierStore, redis_url: str) -> None:
    shared = _shared(store, redis_url)
    stored = shared.insert(_pair(0), None, MODEL)
    assert stored and all(store.delete(turn.id, "ana") is not None for turn in _pair(0))
    started = time.monotonic()
    assert Recorder(store, shared).drain() == []
    assert time.monotonic() - started < 1.0  # the add tracked its turns, so they were stored: no waiting


def test_turns_stored_while_redis_is_down_reach_midterm_when_it_stays_down(store: TierStore) -> None:
    shared = _shared(store, f"redis://127.0.0.1:{free_port()}/0", unreachable_grace_seconds=0.3)
    seqs = shared.insert(_pair(0), None, MODEL)  # durable; tracking failed and is left to the replay
    assert [turn.content for turn in store.get_by_seqs(seqs, "ana").values()] == ["q 0", "a 0"]
    ran = Recorder(store, shared).drain()
    assert _seqs(ran, "midterm") == seqs and _seqs(ran, "process") == seqs


def test_a_stalled_redis_counts_the_time_its_tries_took_toward_the_grace(
    store: TierStore, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = _shared(store, redis_url, unreachable_grace_seconds=0.3)
    shared._quiet_until = time.monotonic() + 60  # the add leaves tracking to its replay, as after a failure
    seqs = shared.insert(_pair(0), None, MODEL)
    tries: list[float] = []

    def stalled(*args: Any, **kwargs: Any) -> Any:
        tries.append(time.monotonic())
        time.sleep(0.2)  # a client timeout, in short
        raise StorageError("the Redis working set timed out")

    monkeypatch.setattr(shared._working, "track", stalled)
    ran = Recorder(store, shared).drain()
    assert _seqs(ran, "midterm") == seqs and _seqs(ran, "process") == seqs
    assert len(tries) == 3  # the first failure starts the count; the second try and two pauses end it


def test_turns_stored_while_redis_is_down_are_replayed_into_it_when_it_returns(store: TierStore) -> None:
    server = RedisServer()
    shared = _shared(store, server.url())
    seqs = shared.insert(_pair(0), None, MODEL)
    with server:
        ran = Recorder(store, shared).drain()
        assert shared.working_seqs("ana") == seqs
        assert _seqs(ran, "process") == seqs and _seqs(ran, "midterm") == []
        shared.close()


def test_an_overflow_whose_taker_died_is_reclaimed_and_filed_once(tmp_path: Path, redis_url: str) -> None:
    home = tmp_path / "home"
    with Memory(home, embedder=HashEmbedder(), background=False, working_url=redis_url, working_capacity=1) as memory:
        memory.add("first message", user_id="ana", session_id="s")
        # Another process stores the next exchange, takes the overflow (the first one) and dies.
        store: Any = open_store(memory.settings.resolved_storage_url)
        later = datetime.now(UTC)  # said after the first message, so that one is the overflow
        turns = [Turn(id="b0", user_id="ana", role=Role.USER, content="second", created_at=later, session_id="s")]
        store.enqueue_job(WORKING_JOB, "ana", {"ids": ["b0"], "batch": "dead", "queued_at": time.time()})
        seqs = store.insert_turns(turns, None, MODEL)
        (taken,) = open_redis_working(redis_url, lease_seconds=0.2).track(
            list(zip(seqs, turns, strict=True)), 1, batch="dead"
        )
        # ... or died after queueing its mid-term job, before acknowledging it: the reclaim queues it again.
        store.enqueue_job("midterm", "ana", {"seqs": list(taken.seqs), "overflow": taken.token})
        store.close()
        time.sleep(0.3)
        memory.flush()
        working, filed = _working_and_filed(memory, "ana")
        assert filed == list(taken.seqs) and working == seqs
        assert sorted(working + filed) == _all_seqs(home, "ana")


def test_idle_sessions_expire_to_midterm_and_late_replays_do_not_bring_them_back(
    tmp_path: Path, redis_url: str
) -> None:
    home = tmp_path / "home"
    settings: dict[str, Any] = {"background": False, "working_url": redis_url, "working_ttl_seconds": 0.5}
    with Memory(home, embedder=HashEmbedder(), **settings) as memory:
        for session in ("s", "s", "t"):
            memory.add(
                [{"role": "user", "content": f"hello from {session}"}, {"role": "assistant", "content": "hi"}],
                user_id="ana",
                session_id=session,
            )
        assert len(memory.inspect(user_id="ana").working) == 6
        time.sleep(0.6)
        memory.flush()  # the worker's upkeep expires both sessions; then the adds' replays run, too late to track
        working, filed = _working_and_filed(memory, "ana")
        assert working == [] and filed == _all_seqs(home, "ana")
        assert memory.context("hello", user_id="ana", session_id="s").items  # still found, as mid-term/episodes


def test_redis_down_at_add_time_loses_nothing(tmp_path: Path) -> None:
    server = RedisServer()  # not started yet: connections are refused
    home = tmp_path / "home"
    settings: dict[str, Any] = {"background": False, "working_url": server.url()}
    with Memory(home, embedder=HashEmbedder(), **settings) as memory:
        stored = memory.add("I live in Porto", user_id="ana", session_id="s")
        assert [turn.id for turn in memory.history(user_id="ana")] == [stored[0].id]  # durable all the same
        assert memory.inspect(user_id="ana").working == ()  # unreadable while down: no recent exchanges
        assert memory.search("Porto", user_id="ana")[0].content == "I live in Porto"
        with server:
            memory.flush()  # the add's replay tracks the turn now that Redis is back
            assert [turn.id for turn in memory.inspect(user_id="ana").working] == [stored[0].id]
            assert memory.profile(user_id="ana").get("location") == "Porto"  # and it was processed


def test_forgetting_one_agents_turns_leaves_the_other_agents_exchanges_in_the_session(
    tmp_path: Path, redis_url: str
) -> None:
    settings: dict[str, Any] = {"background": False, "working_url": redis_url}
    with Memory(tmp_path / "home", embedder=HashEmbedder(), **settings) as memory:
        exchange = [
            {"role": "user", "content": "I adopted a cat named Miso"},
            {"role": "assistant", "content": "Lovely!"},
        ]
        kept = memory.add(exchange, user_id="ana", session_id="s", agent_id="pets")
        memory.add("note for the planner", user_id="ana", session_id="s", agent_id="planner")
        memory.flush()
        memory.forget(user_id="ana", agent_id="planner", session_id="s")
        assert [turn.content for turn in memory.inspect(user_id="ana").working] == [turn.content for turn in kept]
        working = memory.parts.episodic.working_seqs("ana")
        assert _redis_held(memory, "ana") == {"s": working}  # the planner's place is free
        memory.forget(user_id="ana", session_id="s")
        assert memory.inspect(user_id="ana").working == () and _redis_held(memory, "ana") == {}


def test_deleted_turns_give_up_their_places_so_live_exchanges_stay_longer(tmp_path: Path, redis_url: str) -> None:
    settings: dict[str, Any] = {"background": False, "working_url": redis_url, "working_capacity": 2}
    with Memory(tmp_path / "home", embedder=HashEmbedder(), **settings) as memory:
        first = memory.add("I live in Porto", user_id="ana", session_id="s")
        second = memory.add("Scratch that, ignore it", user_id="ana", session_id="s")
        memory.delete(second[0].id, user_id="ana")
        third = memory.add("I work as a nurse", user_id="ana", session_id="s")
        # Two live exchanges fit in a capacity of 2: the deleted one no longer pushes the first out.
        assert [turn.id for turn in memory.inspect(user_id="ana").working] == [first[0].id, third[0].id]
        memory.flush()
        working, filed = _working_and_filed(memory, "ana")
        assert filed == [] and _redis_held(memory, "ana") == {"s": working}
        # Pruning episodic memory frees places the same way.
        assert memory.prune(user_id="ana", tier="episodic", keep_last=1) == 1
        working = memory.parts.episodic.working_seqs("ana")
        assert _redis_held(memory, "ana") == {"s": working} and len(working) == 1


def test_an_add_between_a_forgets_two_steps_keeps_its_place_in_working_memory(
    tmp_path: Path, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    settings: dict[str, Any] = {"background": False, "working_url": redis_url}
    with (
        Memory(home, embedder=HashEmbedder(), **settings) as memory,
        Memory(home, embedder=HashEmbedder(), **settings) as other,
    ):
        memory.add("an old note", user_id="ana", session_id="s")
        deleting, late = memory.parts.store.forget, []

        def another_process_adds_in_between(scope: Any) -> int:
            count = deleting(scope)
            late.extend(other.add("I moved to Lisbon", user_id="ana", session_id="s"))
            return count

        monkeypatch.setattr(memory.parts.store, "forget", another_process_adds_in_between)
        assert memory.forget(user_id="ana", session_id="s").turns == 1
        assert [turn.id for turn in memory.inspect(user_id="ana").working] == [turn.id for turn in late]
        other.flush()
        working, filed = _working_and_filed(memory, "ana")
        assert working == _all_seqs(home, "ana") and filed == []  # in working memory, not lost between tiers


def test_an_add_that_fails_after_its_turns_may_have_been_committed_keeps_its_replay(
    store: TierStore, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = _shared(store, redis_url)
    committed = store.insert_turns

    def lost_at_commit(*args: Any, **kwargs: Any) -> list[int]:
        committed(*args, **kwargs)
        raise StorageError("connection lost during COMMIT")  # the turns are in, the caller cannot know

    monkeypatch.setattr(store, "insert_turns", lost_at_commit)
    with pytest.raises(StorageError):
        shared.insert(_pair(0), None, MODEL)
    monkeypatch.setattr(store, "insert_turns", committed)
    ran = Recorder(store, shared).drain()  # the replay finds the turns: it tracks and processes them
    seqs = sorted(seq for seq, _ in store.iterate("ana"))
    assert len(seqs) == 2 and _seqs(ran, "process") == seqs and shared.working_seqs("ana", "s") == seqs


def test_an_add_that_failed_before_committing_leaves_no_replay_to_wait_for(
    store: TierStore, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = _shared(store, redis_url)

    def locked(*args: Any, **kwargs: Any) -> list[int]:
        raise StorageError("database is locked")  # nothing was written

    monkeypatch.setattr(store, "insert_turns", locked)
    with pytest.raises(StorageError, match="locked"):
        shared.insert(_pair(0), None, MODEL)
    assert store.count_jobs() == 0  # a flush has nothing to wait a minute for


def test_a_late_replay_meeting_a_brief_outage_waits_rather_than_filing_tracked_turns(
    store: TierStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = RedisServer()
    with server:
        shared = _shared(store, server.url(), unreachable_grace_seconds=30.0)
        seqs = shared.insert(_pair(0), None, MODEL)  # tracked by the add
        assert shared.working_seqs("ana", "s") == seqs
        # The replay runs much later (a backlog), just as Redis blinks: it is not the add's age that counts.
        later = time.time() + 120
        monkeypatch.setattr(time, "time", lambda: later)
        working = shared._working
        track = working.track
        blinks = [StorageError("cannot reach the Redis working set")]

        def blinking(*args: Any, **kwargs: Any) -> Any:
            if blinks:
                raise blinks.pop()
            return track(*args, **kwargs)

        monkeypatch.setattr(working, "track", blinking)
        ran = Recorder(store, shared).drain()
        assert not blinks and _seqs(ran, "midterm") == [] and _seqs(ran, "process") == seqs
        assert shared.working_seqs("ana", "s") == seqs
        shared.close()


def test_a_redis_that_may_evict_working_sets_is_reported(
    store: TierStore, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = redis.Redis.from_url(redis_url)
    before = client.config_get("maxmemory-policy")["maxmemory-policy"]
    try:
        client.config_set("maxmemory-policy", "allkeys-lru")
        with caplog.at_level(logging.WARNING, logger="memstrata.working"):
            shared = _shared(store, redis_url)
            shared.insert(_pair(0), None, MODEL)
            shared.insert(_pair(1), None, MODEL)
        warnings = [record.getMessage() for record in caplog.records if "maxmemory-policy" in record.getMessage()]
        assert len(warnings) == 1 and "allkeys-lru" in warnings[0] and "noeviction" in warnings[0]
        client.config_set("maxmemory-policy", "noeviction")
        caplog.clear()
        down = _shared(store, f"redis://127.0.0.1:{free_port()}/0")  # unreachable at first use: asked later
        down.insert(_pair(3), None, MODEL)
        assert not down._working._eviction_checked  # type: ignore[attr-defined]
        with caplog.at_level(logging.WARNING, logger="memstrata.working"):
            _shared(store, redis_url).insert(_pair(2), None, MODEL)
        assert not [record for record in caplog.records if "maxmemory-policy" in record.getMessage()]
    finally:
        client.config_set("maxmemory-policy", before)
        client.close()


def test_forget_while_redis_is_down_deletes_and_says_what_is_left(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    nothing_there = f"redis://127.0.0.1:{free_port()}/0"  # connections are refused
    settings: dict[str, Any] = {"background": False, "working_url": nothing_there}
    with Memory(tmp_path / "home", embedder=HashEmbedder(), **settings) as memory:
        memory.add("I live in Porto", user_id="ana", session_id="s")
        with caplog.at_level(logging.WARNING, logger="memstrata.memory"):
            deletion = memory.forget(user_id="ana")
        assert deletion.turns == 1 and memory.history(user_id="ana") == []
        assert memory.search("Porto", user_id="ana") == []
        assert any("memories were deleted" in record.getMessage() for record in caplog.records)


def test_reads_skip_a_redis_that_just_failed_until_it_answers_again(
    store: TierStore, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = _shared(store, redis_url)
    seqs = shared.insert(_pair(0), None, MODEL)
    working = shared._working
    read, calls = working.working_seqs, []

    def stalled(*args: Any, **kwargs: Any) -> list[int]:
        calls.append(args)
        raise StorageError("the Redis working set timed out")  # after its 5 s timeout, in real life

    monkeypatch.setattr(working, "working_seqs", stalled)
    assert shared.working_seqs("ana", "s") == [] and shared.working_seqs("ana", "s") == []
    assert len(calls) == 1  # the second read did not wait on it again
    monkeypatch.setattr(working, "working_seqs", read)
    shared.insert(_pair(1), None, MODEL)  # skipped by the add too, left to its replay
    Recorder(store, shared).drain()  # the replay reaches Redis: reads use it again
    assert shared.working_seqs("ana", "s") == seqs + sorted(seq for seq, _ in store.iterate("ana"))[2:]


def _writer(home: str, url: str, tag: str, count: int, start: Any) -> None:
    """One server process: adds ``count`` exchanges to the shared session, starting with the other one."""
    with Memory(home, embedder=HashEmbedder(), background=False, working_url=url, working_capacity=2) as memory:
        start.wait(60)
        for n in range(count):
            memory.add(
                [
                    {"role": "user", "content": f"{tag} question {n}", "id": f"{tag}-{n}-u"},
                    {"role": "assistant", "content": f"{tag} answer {n}", "id": f"{tag}-{n}-a"},
                ],
                user_id="ana",
                session_id="shared",
            )


@pytest.mark.slow
def test_two_processes_overflowing_one_session_at_once_move_every_exchange_exactly_once(
    tmp_path: Path, redis_url: str
) -> None:
    home = tmp_path / "home"
    count = 40
    with Memory(home, embedder=HashEmbedder(), background=False, working_url=redis_url, working_capacity=2) as memory:
        context = multiprocessing.get_context("spawn")
        start = context.Barrier(2)
        writers = [context.Process(target=_writer, args=(str(home), redis_url, tag, count, start)) for tag in "pq"]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join(120)
        assert [writer.exitcode for writer in writers] == [0, 0]
        every = _all_seqs(home, "ana")
        assert len(every) == 2 * 2 * count
        # In the queue, before any tier work: each turn is in the working set or in one mid-term job.
        with sqlite3.connect(home / "memstrata.db") as connection:
            payloads = [
                json.loads(row[0]) for row in connection.execute("SELECT payload FROM jobs WHERE kind = 'midterm'")
            ]
            ids = dict(connection.execute("SELECT seq, id FROM turns"))
        writer_order = [ids[seq][0] for seq in every]
        assert sum(a != b for a, b in itertools.pairwise(writer_order)) >= 2  # they did overlap
        queued = [int(seq) for payload in payloads for seq in payload["seqs"]]
        working = memory.parts.episodic.working_seqs("ana", "shared")
        assert sorted(queued + working) == every
        assert len({ids[seq].rsplit("-", 1)[0] for seq in working}) == 2  # two whole exchanges stay
        for payload in payloads:  # exchanges leave whole: a question never leaves without its answer
            names = [ids[int(seq)] for seq in payload["seqs"]]
            assert sorted(names) == sorted({name.rsplit("-", 1)[0] + part for name in names for part in ("-u", "-a")})
        memory.flush()
        working, filed = _working_and_filed(memory, "ana")
        assert sorted(working + filed) == every


def test_an_unknown_working_url_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="working_url"):
        Memory(tmp_path / "home", embedder=HashEmbedder(), background=False, working_url="memcached://127.0.0.1:1")
    with Memory(tmp_path / "home", embedder=HashEmbedder(), background=False) as memory:  # the store was released
        assert memory.add("still fine", user_id="ana")


# -- helpers -------------------------------------------------------------------------------------------


def _working_and_filed(memory: Memory, user: str) -> tuple[list[int], list[int]]:
    """(turn seqs in working memory, turn seqs in mid-term segments, with repeats)."""
    store: Any = open_store(memory.settings.resolved_storage_url)
    try:
        working = memory.parts.episodic.working_seqs(user)
        filed = [seq for segment in store.segments(user, limit=10_000) for seq in store.segment_turn_seqs(segment.id)]
        return working, sorted(filed)
    finally:
        store.close()


def _redis_held(memory: Memory, user: str) -> dict[str, list[int]]:
    """What Redis itself holds for the user, deleted turns included (reads hide those)."""
    assert memory.parts.shared_working is not None
    return memory.parts.shared_working._working.sessions(user)


def _all_seqs(home: Path, user: str) -> list[int]:
    with sqlite3.connect(home / "memstrata.db") as connection:
        rows = connection.execute("SELECT seq FROM turns WHERE user_id = ? ORDER BY seq", (user,))
        return [int(row[0]) for row in rows]
