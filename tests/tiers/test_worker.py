"""The background worker: waiting for some of the work while more keeps arriving."""

from __future__ import annotations

import itertools
import threading
from collections import deque

import pytest

from memstrata.errors import StorageError
from memstrata.storage.base import Job
from memstrata.tiers import worker as worker_module
from memstrata.tiers.worker import Worker


class EndlessQueue:
    """Ana's jobs first, then a stream of Bob's that never runs dry (a busy server)."""

    def __init__(self, ana_jobs: int) -> None:
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.pending: deque[Job] = deque(self._job("ana") for _ in range(ana_jobs))
        self.claimed: dict[int, Job] = {}
        self.done: list[Job] = []

    def _job(self, user: str) -> Job:
        return Job(id=next(self._ids), kind="step", user_id=user, payload={}, attempts=0)

    def claim(self) -> Job | None:
        with self._lock:
            job = self.pending.popleft() if self.pending else self._job("bob")
            self.claimed[job.id] = job
            return job

    def run(self, job: Job) -> None:
        threading.Event().wait(0.001)  # a job takes a moment

    def finish(self, job: Job) -> None:
        with self._lock:
            self.done.append(self.claimed.pop(job.id))

    def fail(self, job: Job, error: str, retry: bool) -> None:
        raise AssertionError(f"job {job.id} failed: {error}")

    def unfinished(self, user: str) -> int:
        """Jobs of ``user`` queued or running (Bob always has more coming)."""
        with self._lock:
            left = [job for job in [*self.pending, *self.claimed.values()] if job.user_id == user]
            return len(left) + (user == "bob")


def test_waiting_for_some_jobs_ends_when_they_are_done_though_more_keep_arriving() -> None:
    queue = EndlessQueue(ana_jobs=3)
    worker = Worker(queue.claim, queue.run, queue.finish, queue.fail)
    worker.start()
    try:
        assert worker.wait_until(lambda: queue.unfinished("ana") == 0, timeout=30)
        # Waiting for the whole queue to be empty never ends while work keeps arriving.
        assert not worker.wait_idle(timeout=0.3)
    finally:
        worker.stop()
    assert [job.id for job in queue.done[:3]] == [1, 2, 3]


class BacklogFirst(EndlessQueue):
    """Bob's backlog never runs dry and sits ahead of Ana's jobs in queue order."""

    def claim(self) -> Job | None:
        with self._lock:
            job = self._job("bob")
            self.claimed[job.id] = job
            return job

    def claim_for(self, user: str) -> Job | None:
        with self._lock:
            job = next((job for job in self.pending if job.user_id == user), None)
            if job is not None:
                self.pending.remove(job)
                self.claimed[job.id] = job
            return job


def test_a_wait_for_one_users_work_runs_it_ahead_of_everyone_elses() -> None:
    queue = BacklogFirst(ana_jobs=3)
    worker = Worker(queue.claim, queue.run, queue.finish, queue.fail, claim_for=queue.claim_for)
    worker.start()
    try:
        # Queue order alone would never reach Ana's jobs.
        assert not worker.wait_until(lambda: queue.unfinished("ana") == 0, timeout=0.2)
        assert worker.wait_until(lambda: queue.unfinished("ana") == 0, timeout=30, user_id="ana")
    finally:
        worker.stop()
    assert [job.id for job in queue.done if job.user_id == "ana"] == [1, 2, 3]
    assert worker._awaited == []  # nobody waits any more: the queue runs in order again


class Chatty:
    """Bob's jobs keep coming, whoever asks; Ana has one, first in queue order or behind all of Bob's."""

    def __init__(self, *, anas_first: bool) -> None:
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._anas_first = anas_first
        self.anas: list[Job] = [Job(id=next(self._ids), kind="step", user_id="ana", payload={}, attempts=0)]
        self.done: list[Job] = []

    def claim(self) -> Job | None:
        with self._lock:
            if self._anas_first and self.anas:
                return self.anas.pop()
            return Job(id=next(self._ids), kind="step", user_id="bob", payload={}, attempts=0)

    def claim_for(self, user: str) -> Job | None:
        with self._lock:
            if user == "bob":
                return Job(id=next(self._ids), kind="step", user_id="bob", payload={}, attempts=0)
            return self.anas.pop() if self.anas else None

    def finish(self, job: Job) -> None:
        with self._lock:
            self.done.append(job)

    def anas_done(self) -> bool:
        with self._lock:
            return any(job.user_id == "ana" for job in self.done)


@pytest.mark.parametrize("anas_first", [True, False], ids=["in-queue-order", "also-awaited"])
def test_a_wait_on_a_user_whose_work_keeps_coming_starves_no_one(anas_first: bool) -> None:
    queue = Chatty(anas_first=anas_first)
    worker = Worker(queue.claim, lambda job: None, queue.finish, lambda *_: None, claim_for=queue.claim_for)
    stop_waiting = threading.Event()
    bobs_wait = threading.Thread(target=worker.wait_until, args=(stop_waiting.is_set, 30), kwargs={"user_id": "bob"})
    bobs_wait.start()
    try:
        while not worker._awaited:  # a flush of Bob's work waits first, and his jobs never run out
            threading.Event().wait(0.01)
        worker.start()
        # Ana's job runs all the same: in queue order, or in turn with Bob's when she waits for it too.
        assert worker.wait_until(queue.anas_done, timeout=10, user_id=None if anas_first else "ana")
    finally:
        stop_waiting.set()
        bobs_wait.join(30)
        worker.stop()


def test_users_whose_work_is_awaited_take_turns_and_queue_order_keeps_its_share() -> None:
    claimed: list[str] = []

    def job_of(user: str) -> Job:
        claimed.append(user)
        return Job(id=len(claimed), kind="step", user_id=user, payload={}, attempts=0)

    worker = Worker(lambda: job_of("queue"), lambda job: None, lambda job: None, lambda *_: None, claim_for=job_of)
    worker._awaited.extend(["u0", "u1", "u2", "u3"])  # four flushes wait, and everyone always has work
    for _ in range(400):
        worker._next_job()
    assert {user: claimed.count(user) for user in sorted(set(claimed))} == {
        "queue": 100,
        "u0": 75,
        "u1": 75,
        "u2": 75,
        "u3": 75,
    }


def test_waiting_times_out_when_the_work_never_finishes() -> None:
    queue = EndlessQueue(ana_jobs=0)
    worker = Worker(queue.claim, queue.run, queue.finish, queue.fail)
    worker.start()
    try:
        assert not worker.wait_until(lambda: queue.unfinished("bob") == 0, timeout=0.2)
    finally:
        worker.stop()


def test_two_waiters_keep_the_worker_hurried_until_both_are_done() -> None:
    queue = EndlessQueue(ana_jobs=0)
    worker = Worker(queue.claim, queue.run, queue.finish, queue.fail)
    other_is_waiting, release = threading.Event(), threading.Event()

    def other_done() -> bool:
        other_is_waiting.set()
        return release.is_set()

    waiting = threading.Thread(target=worker.wait_until, args=(other_done, 30))
    waiting.start()
    try:
        assert other_is_waiting.wait(30)
        assert worker.wait_until(lambda: True, timeout=1)
        assert worker._urgent.is_set()  # the other still waits: the worker must not yield to the foreground yet
    finally:
        release.set()
        waiting.join(30)
    assert not worker._urgent.is_set()


def test_a_slow_job_keeps_its_lease_while_it_runs_and_only_then() -> None:
    renewed: list[int] = []
    release = threading.Event()
    jobs = deque(
        [
            Job(id=1, kind="slow", user_id="ana", payload={}, attempts=1),
            Job(id=2, kind="quick", user_id="ana", payload={}, attempts=1),
        ]
    )
    finished: list[int] = []

    def run(job: Job) -> None:
        if job.kind == "slow":
            assert release.wait(30)

    def renew(job: Job) -> bool:
        renewed.append(job.id)
        if len(renewed) == 1:
            raise RuntimeError("a passing error does not stop the renewals")
        if len(renewed) >= 3:
            release.set()
        return True

    worker = Worker(
        lambda: jobs.popleft() if jobs else None,
        run,
        lambda job: finished.append(job.id),
        lambda job, error, retry: None,
        renew=renew,
        renew_every=0.01,
    )
    try:
        assert worker.drain() == 2
        count = len(renewed)
        threading.Event().wait(0.1)
        assert len(renewed) == count  # nothing runs: nothing is renewed
        assert worker._keeper is not None and worker._keeper._thread is None  # and no thread is left
    finally:
        worker.stop()
    assert set(renewed) == {1} and finished == [1, 2]


def test_a_busy_store_when_an_outcome_is_recorded_neither_stops_the_worker_nor_loses_the_outcome(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker_module, "RECORD_PAUSE_SECONDS", 0.01)
    jobs = deque(
        [
            Job(id=1, kind="step", user_id="ana", payload={}, attempts=1),
            Job(id=2, kind="step", user_id="ana", payload={}, attempts=1),
            Job(id=3, kind="step", user_id="ana", payload={}, attempts=1),
        ]
    )
    finished: list[int] = []
    busy = iter([True, True, False] + [False] * 10)  # job 1's outcome meets a locked database twice

    def finish(job: Job) -> None:
        if next(busy):
            raise StorageError("writing failed: database is locked")
        finished.append(job.id)

    def never_recorded(job: Job) -> None:
        raise StorageError("writing failed: database is locked")  # busy past every retry

    worker = Worker(lambda: jobs.popleft() if jobs else None, lambda job: None, finish, lambda *_: None)
    worker.start()
    try:
        assert worker.wait_until(lambda: len(finished) == 3, 10)
        assert finished == [1, 2, 3]
        # An outcome that cannot be recorded at all leaves the job leased (it runs again later),
        # and the thread goes on with the next.
        worker._finish = never_recorded  # type: ignore[method-assign]
        jobs.extend([Job(id=4, kind="step", user_id="ana", payload={}, attempts=1)])
        worker.wake()
        assert worker.wait_until(lambda: not jobs, 10)
        threading.Event().wait(0.2)
        assert worker._thread is not None and worker._thread.is_alive()
    finally:
        worker.stop()
