"""The durable job queue and the working set, kept in the same SQLite file as the turns."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from memstrata.models import Role, Turn, format_time
from memstrata.storage.base import Job
from memstrata.storage.exchanges import ExchangeOpenings
from memstrata.storage.sql_queue import QueueStatements, fence
from memstrata.storage.sqlite.rows import SQLITE, chunks
from memstrata.storage.sqlite.shared import SQLiteRunner


def enqueue(connection: sqlite3.Connection, kind: str, user_id: str, payload: dict[str, Any], now: datetime) -> int:
    """Add a pending job inside the caller's transaction."""
    cursor = connection.execute(
        "INSERT INTO jobs (kind, user_id, payload, created_at) VALUES (?, ?, ?, ?)",
        (kind, user_id, json.dumps(payload, sort_keys=True), format_time(now)),
    )
    return int(cursor.lastrowid or 0)


# A stored time to the millisecond: "YYYY-MM-DDTHH:MM:SS.fff" (format_time is fixed-width).
_MILLISECOND_TEXT = 23
_MILLISECONDS = f"substr(turns.created_at, 1, {_MILLISECOND_TEXT})"


def track_working(
    connection: sqlite3.Connection, turns: Sequence[tuple[int, Turn]], capacity: int, now: datetime
) -> None:
    """Put new turns into their session's working set; move overflowing exchanges to mid-term.

    An exchange starts at each user message. When a session holds more than ``capacity``
    exchanges, the oldest leave the working set and a ``midterm`` job carrying their turns
    is queued in the same transaction: nothing is ever dropped. The oldest are those said
    first (their earliest turn's time), not those added first: turns back-filled into a live
    session leave before the newer ones. A reply joins the exchange in the set opened last at
    or before its own time (the latest added among equals), or starts its own when none was.
    Times count to the millisecond, as the Redis working set keeps them.
    """
    touched: set[tuple[str, str]] = set()
    openings: dict[tuple[str, str], ExchangeOpenings[str]] = {}
    for seq, turn in turns:
        key = (turn.user_id, turn.session_id or "")
        if key not in openings:  # read once per batch: placing a turn is then a binary search
            openings[key] = ExchangeOpenings(
                (opened or "", int(number))  # an item whose turn is gone counts as opened first
                for number, opened in connection.execute(
                    f"SELECT working_items.exchange, MIN({_MILLISECONDS}) FROM working_items"
                    " LEFT JOIN turns ON turns.seq = working_items.turn_seq"
                    " WHERE working_items.user_id = ? AND working_items.session_key = ?"
                    " GROUP BY working_items.exchange",
                    key,
                )
            )
        said = format_time(turn.created_at)[:_MILLISECOND_TEXT]
        exchange = openings[key].place(said, starts=turn.role is Role.USER)
        inserted = connection.execute(
            "INSERT OR IGNORE INTO working_items (turn_seq, user_id, session_key, exchange) VALUES (?, ?, ?, ?)",
            (seq, key[0], key[1], exchange),
        )
        if inserted.rowcount == 0:  # already tracked: it opened no exchange
            openings[key].withdraw()
        touched.add(key)
    for user_id, session_key in touched:
        exchanges = [
            int(row[0])
            for row in connection.execute(
                "SELECT working_items.exchange FROM working_items LEFT JOIN turns ON turns.seq = working_items.turn_seq"
                " WHERE working_items.user_id = ? AND working_items.session_key = ?"
                f" GROUP BY working_items.exchange ORDER BY MIN({_MILLISECONDS}), working_items.exchange",
                (user_id, session_key),
            )
        ]
        overflow = exchanges[: max(0, len(exchanges) - capacity)]
        if not overflow:
            continue
        seqs: list[int] = []
        for part in chunks(overflow):
            marks = ",".join("?" * len(part))
            seqs.extend(
                int(row[0])
                for row in connection.execute(
                    "SELECT turn_seq FROM working_items WHERE user_id = ? AND session_key = ?"
                    f" AND exchange IN ({marks})",
                    (user_id, session_key, *part),
                )
            )
            connection.execute(
                f"DELETE FROM working_items WHERE user_id = ? AND session_key = ? AND exchange IN ({marks})",
                (user_id, session_key, *part),
            )
        enqueue(connection, "midterm", user_id, {"seqs": sorted(seqs)}, now)


def claim(
    connection: sqlite3.Connection,
    lease_seconds: float,
    now: datetime,
    max_attempts: int | None = None,
    user_id: str | None = None,
) -> Job | None:
    """Take the oldest pending job (of ``user_id``, or anyone's), or one whose worker's lease ran out (it crashed).

    A job whose lease ran out after ``max_attempts`` claims is parked as failed instead: it
    stopped every worker that ran it.
    """
    if max_attempts is not None:
        connection.execute(
            "UPDATE jobs SET state = 'failed', lease_until = NULL,"
            " error = 'its lease ran out on attempt ' || attempts || ' (its worker crashed or stalled)'"
            " || COALESCE('; last error: ' || error, '')"
            " WHERE state = 'running' AND lease_until < ? AND attempts >= ?",
            (format_time(now), max_attempts),
        )
    # A pending job's lease_until is when a failed attempt may be tried again (none: at once).
    # One user's: by the index of open jobs by user (the state term lets SQLite use that partial index).
    mine, parameters = (
        (" AND user_id = ? AND state IN ('pending', 'running')", (user_id,)) if user_id is not None else ("", ())
    )
    row = connection.execute(
        "SELECT id FROM jobs WHERE ((state = 'pending' AND (lease_until IS NULL OR lease_until <= ?))"
        f" OR (state = 'running' AND lease_until < ?)){mine} ORDER BY id LIMIT 1",
        (format_time(now), format_time(now), *parameters),
    ).fetchone()
    if row is None:
        return None
    lease = format_time(now + timedelta(seconds=lease_seconds))
    claimed = connection.execute(
        "UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_until = ? WHERE id = ?"
        " RETURNING id, kind, user_id, payload, attempts",
        (lease, row[0]),
    ).fetchone()
    return Job(
        id=int(claimed[0]),
        kind=str(claimed[1]),
        user_id=str(claimed[2]),
        payload=json.loads(claimed[3]),
        attempts=int(claimed[4]),
    )


class QueueMixin(SQLiteRunner, QueueStatements[sqlite3.Connection]):
    """The job-queue methods of the store; mixed into SQLiteStore, which provides ``_read`` and ``_write``."""

    def claim_job(
        self, lease_seconds: float, max_attempts: int | None = None, *, user_id: str | None = None
    ) -> Job | None:
        """Take the next job to run (of ``user_id``, or anyone's; or one a crashed worker left), leased for a while."""
        # The time is read once the write lock is held: a wait for it does not shorten the lease.
        job: Job | None = self._write(
            lambda connection: claim(connection, lease_seconds, datetime.now(UTC), max_attempts, user_id)
        )
        return job

    def renew_job(self, job_id: int, *, attempt: int, lease_seconds: float) -> bool:
        """Extend the lease of a job this claim still holds; False if another worker took it over."""

        def work(connection: sqlite3.Connection) -> int:
            lease = format_time(datetime.now(UTC) + timedelta(seconds=lease_seconds))  # read under the lock
            return connection.execute(
                "UPDATE jobs SET lease_until = ? WHERE id = ? AND state = 'running' AND attempts = ?",
                (lease, job_id, attempt),
            ).rowcount

        return bool(self._write(work))

    def fail_job(
        self, job_id: int, error: str, *, retry: bool, attempt: int | None = None, retry_after: float = 0.0
    ) -> None:
        """Record a failure; the job is tried again ``retry_after`` seconds later, or parked as failed.

        With ``attempt``: see finish_job.
        """
        state = "pending" if retry else "failed"
        not_before = format_time(datetime.now(UTC) + timedelta(seconds=retry_after)) if retry and retry_after else None
        held, parameters = fence(attempt)
        self._write(
            lambda connection: connection.execute(
                SQLITE.sql(f"UPDATE jobs SET state = %s, error = %s, lease_until = %s WHERE id = %s{held}"),
                (state, error[:2000], not_before, job_id, *parameters),
            )
        )

    def enqueue_job(self, kind: str, user_id: str, payload: dict[str, Any]) -> int:
        """Queue background work durably."""
        return int(self._write(lambda connection: enqueue(connection, kind, user_id, payload, datetime.now(UTC))))
