"""The background worker: drains the durable job queue off the write path."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from memstrata.errors import StorageError
from memstrata.storage.base import Job

log = logging.getLogger("memstrata.worker")
IDLE_POLL_SECONDS = 1.0
QUIET_SECONDS = 0.2
MAX_DEFER_SECONDS = 5.0
POLL_SECONDS = 0.05
# A failed job waits before its next attempt (2 s, then 4 s ...), so a passing outage (a
# database restarting, a lock held for a while) does not use up its attempts at once.
FIRST_RETRY_DELAY_SECONDS = 2.0
MAX_RETRY_DELAY_SECONDS = 300.0
#: While someone waits on a user's work, every this-many-th job is still taken in queue order,
#: so other users' work (and another waiter's) goes on however much the awaited user queues.
QUEUE_ORDER_EVERY = 4
# Recording a finished job's outcome waits out a busy store this many times, longer each time.
RECORD_ATTEMPTS = 4
RECORD_PAUSE_SECONDS = 0.5


def retry_delay(attempts: int) -> float:
    """Seconds a job that failed its ``attempts``-th attempt waits before the next."""
    return min(MAX_RETRY_DELAY_SECONDS, FIRST_RETRY_DELAY_SECONDS * 2.0 ** min(max(attempts - 1, 0), 16))


class Activity:
    """Tracks foreground calls (add, search …) so background work can stay out of their way.

    On two cores a busy worker thread measurably slowed ``add`` (GIL and store lock
    hand-offs), so the worker starts a job only after the foreground has been quiet for
    ``QUIET_SECONDS`` — or after deferring ``MAX_DEFER_SECONDS``, so it never starves.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._last = 0.0

    def __enter__(self) -> None:
        with self._lock:
            self._active += 1

    def __exit__(self, *_: object) -> None:
        with self._lock:
            self._active -= 1
            self._last = time.monotonic()

    def quiet_for(self) -> float:
        """Seconds since the last foreground call ended (0 while one runs)."""
        with self._lock:
            return 0.0 if self._active else time.monotonic() - self._last


def yield_to_foreground(activity: Activity | None, stopped: Callable[[], bool]) -> None:
    """Wait until the foreground has been quiet ``QUIET_SECONDS``, at most ``MAX_DEFER_SECONDS``, or ``stopped()``."""
    if activity is None:
        return
    deferred_since = time.monotonic()
    while not stopped():
        quiet = activity.quiet_for()
        if quiet >= QUIET_SECONDS or time.monotonic() - deferred_since >= MAX_DEFER_SECONDS:
            return
        time.sleep(max(QUIET_SECONDS - quiet, 0.01))


class Worker:
    """Claims jobs from the store and runs them, in a daemon thread or on demand.

    Jobs are leased, not popped: ``renew`` (if given) extends a lease every ``renew_every``
    seconds, and ``finish`` and ``fail`` get the job as claimed, so a store can ignore a worker
    whose lease another took over. While ``wait_until`` waits for a user, ``claim_for`` takes
    that user's jobs first. See docs/tiers.md#off-the-write-path.
    """

    def __init__(
        self,
        claim: Callable[[], Job | None],
        run: Callable[[Job], None],
        finish: Callable[[Job], None],
        fail: Callable[[Job, str, bool], None],
        *,
        max_attempts: int = 3,
        activity: Activity | None = None,
        renew: Callable[[Job], bool] | None = None,
        renew_every: float = 40.0,
        claim_for: Callable[[str], Job | None] | None = None,
    ) -> None:
        self._claim, self._run, self._finish, self._fail = claim, run, finish, fail
        self._claim_for = claim_for
        self._max_attempts = max_attempts
        self._activity = activity
        self._keeper = LeaseKeeper(renew, renew_every) if renew is not None else None
        self._urgent = threading.Event()  # set while anyone waits on the work: no yielding then
        self._waiters = 0
        self._awaited: list[str] = []  # users someone waits on, once per waiter, first wait first
        self._claims_while_awaited = 0  # since someone began waiting on a user: every 4th follows queue order
        self._next_awaited = 0  # which awaited user's job the next such claim tries first
        self._waiters_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the daemon thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="memstrata-worker", daemon=True)
            self._thread.start()

    def wake(self) -> None:
        """New work was queued."""
        self._idle.clear()
        self._wake.set()

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the current job and stop."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._keeper is not None:
            self._keeper.stop()

    def drain(self, until: Callable[[], bool] | None = None, *, user_id: str | None = None) -> int:
        """Run jobs in the calling thread, in queue order, until none is left or ``until()`` holds; how many ran.

        With ``user_id`` (and a ``claim_for``), only that user's jobs: the work others queued earlier waits.
        """
        claim = self._claim
        if user_id is not None and self._claim_for is not None:
            claim_for, user = self._claim_for, user_id

            def claim() -> Job | None:
                return claim_for(user)

        done = 0
        while not (until is not None and until()) and (job := claim()) is not None:
            self._execute(job)
            done += 1
        return done

    def wait_idle(self, timeout: float | None) -> bool:
        """Block until the thread found the queue empty; False on timeout. Work runs at once meanwhile."""
        with self._hurried():
            return self._idle.wait(timeout)

    def wait_until(self, done: Callable[[], bool], timeout: float | None, *, user_id: str | None = None) -> bool:
        """Block until ``done()`` holds, checked every ``POLL_SECONDS``; False on timeout.

        Unlike ``wait_idle`` this returns as soon as the awaited work is done; with ``user_id`` (and
        a ``claim_for``) the thread runs that user's jobs ahead of the queue meanwhile.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._hurried(user_id):
            while not done():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                time.sleep(POLL_SECONDS if remaining is None else min(POLL_SECONDS, remaining))
        return True

    @contextmanager
    def _hurried(self, user_id: str | None = None) -> Iterator[None]:
        """While someone waits, the thread runs jobs without yielding to the foreground (``user_id``'s first)."""
        with self._waiters_lock:
            self._waiters += 1
            self._urgent.set()
            if user_id is not None:
                self._awaited.append(user_id)
        try:
            self.wake()
            yield
        finally:
            with self._waiters_lock:
                self._waiters -= 1
                if user_id is not None:
                    self._awaited.remove(user_id)
                if self._waiters == 0:
                    self._urgent.clear()

    def _yield_to_foreground(self) -> None:
        """Wait for a quiet moment in the foreground, but not forever."""
        yield_to_foreground(self._activity, lambda: self._stop.is_set() or self._urgent.is_set())

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._yield_to_foreground()
            try:
                job = self._next_job()
            except StorageError as exc:  # e.g. the store was closed under us
                log.warning("worker cannot claim jobs: %s", exc)
                job = None
                time.sleep(IDLE_POLL_SECONDS)
            if job is None:
                self._idle.set()
                self._wake.wait(IDLE_POLL_SECONDS)
                self._wake.clear()
                continue
            try:
                self._execute(job)
            except StorageError as exc:
                # Recording the outcome failed ("database is locked" past the busy timeout, a
                # dropped connection): the job stays leased and runs again once the lease ends.
                log.warning("cannot record the outcome of job %s (%s): %s", job.id, job.kind, exc)
                time.sleep(IDLE_POLL_SECONDS)

    def _next_job(self) -> Job | None:
        """The oldest job of a user someone waits on (each such user in turn), else the oldest of all.

        Every ``QUEUE_ORDER_EVERY``-th claim while anyone waits is taken in queue order.
        """
        if self._claim_for is not None:
            with self._waiters_lock:
                awaited = list(dict.fromkeys(self._awaited))
            if not awaited:
                self._claims_while_awaited = 0
            else:
                self._claims_while_awaited += 1
                if self._claims_while_awaited % QUEUE_ORDER_EVERY:
                    first = self._next_awaited % len(awaited)
                    self._next_awaited += 1
                    for user in awaited[first:] + awaited[:first]:
                        job = self._claim_for(user)
                        if job is not None:
                            return job
        return self._claim()

    def _execute(self, job: Job) -> None:
        # The outcome is recorded while the lease is still renewed: waiting out a busy store
        # must not let the lease run out and the job be taken over.
        with self._keeper.holding(job) if self._keeper is not None else contextlib.nullcontext():
            try:
                self._run(job)
            except Exception as exc:  # a bad job must not kill the worker; it is retried, then parked
                log.exception("job %s (%s) failed", job.id, job.kind)
                reason = f"{type(exc).__name__}: {exc}"
                _recorded(lambda: self._fail(job, reason, job.attempts < self._max_attempts))
                return
            _recorded(lambda: self._finish(job))


class LeaseKeeper:
    """Renews the leases of the jobs running now, from a daemon thread that lives while any runs.

    The thread ends at its first wake-up with nothing running (and starts again with the
    next job), so an idle or forgotten Memory holds no thread and no reference to its store.
    """

    def __init__(self, renew: Callable[[Job], bool], every: float) -> None:
        self._renew, self._every = renew, every
        self._running: dict[int, Job] = {}
        self._lost: set[int] = set()  # jobs another worker took over: said once
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None

    @contextmanager
    def holding(self, job: Job) -> Iterator[None]:
        """Keep ``job``'s lease while the block runs."""
        with self._lock:
            self._running[job.id] = job
            if self._thread is None and not self._stopped:
                self._thread = threading.Thread(target=self._loop, name="memstrata-lease", daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._running.pop(job.id, None)
                self._lost.discard(job.id)

    def stop(self) -> None:
        """Stop renewing for good (the thread ends at once)."""
        with self._lock:
            self._stopped = True
            thread, self._thread = self._thread, None
        self._stop.set()
        if thread is not None:
            thread.join(5.0)

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            with self._lock:
                if not self._running:
                    self._thread = None
                    return
                jobs = [job for job in self._running.values() if job.id not in self._lost]
            for job in jobs:
                self._keep(job)

    def _keep(self, job: Job) -> None:
        try:
            if self._renew(job):
                return
        except Exception as exc:  # a passing storage error: the next round tries again
            log.warning("cannot renew the lease of job %s: %s", job.id, exc)
            return
        with self._lock:
            if job.id not in self._running:
                return  # it finished while this round renewed the others: nothing was taken over
            self._lost.add(job.id)
        log.warning(
            "job %s (%s) was taken over by another worker; this run's outcome will not be recorded", job.id, job.kind
        )


def _recorded(record: Callable[[], None]) -> None:
    """Record a job's outcome, trying again a few times when the store is busy past its timeout.

    Otherwise the job would stay leased, unrecorded, until its lease ends, and run again.
    """
    for attempt in range(1, RECORD_ATTEMPTS + 1):
        try:
            record()
            return
        except StorageError:
            if attempt == RECORD_ATTEMPTS:
                raise
            time.sleep(RECORD_PAUSE_SECONDS * attempt)
