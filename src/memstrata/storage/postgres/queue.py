"""The durable job queue and the working set, in the same database as the turns.

Workers in any number of processes and machines claim jobs with ``FOR UPDATE SKIP
LOCKED``: a job row locked by one claimer is skipped by the others, and a claimed job
carries a lease (on the database's clock, so the machines' clocks need not agree); a job
whose lease ran out (its worker died) is claimed again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from psycopg.types.json import Jsonb

from memstrata.models import Role, Turn
from memstrata.storage.base import Job
from memstrata.storage.exchanges import ExchangeOpenings
from memstrata.storage.postgres.connection import Connected
from memstrata.storage.postgres.rows import Connection
from memstrata.storage.sql_queue import QueueStatements, fence

_CLAIM = """
    UPDATE jobs SET state = 'running', attempts = attempts + 1,
        lease_until = clock_timestamp() + make_interval(secs => %s)
    WHERE id = (
        SELECT id FROM jobs
        WHERE state IN ('pending', 'running')
            AND ((state = 'pending' AND (lease_until IS NULL OR lease_until <= clock_timestamp()))
                OR (state = 'running' AND lease_until < clock_timestamp()))
            AND (%s::text IS NULL OR user_id = %s)
        ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED
    )
    RETURNING id, kind, user_id, payload, attempts
"""

# Jobs whose lease ran out too often: every worker that ran them stopped.
_PARK = """
    UPDATE jobs SET state = 'failed', lease_until = NULL,
        error = 'its lease ran out on attempt ' || attempts || ' (its worker crashed or stalled)'
            || COALESCE('; last error: ' || error, '')
    WHERE state = 'running' AND lease_until < clock_timestamp() AND attempts >= %s
"""


def enqueue(connection: Connection, kind: str, user_id: str, payload: dict[str, Any]) -> int:
    """Add a pending job inside the caller's transaction."""
    row = connection.execute(
        "INSERT INTO jobs (kind, user_id, payload, created_at) VALUES (%s, %s, %s, %s) RETURNING id",
        (kind, user_id, Jsonb(payload), datetime.now(UTC)),
    ).fetchone()
    assert row is not None  # INSERT … RETURNING always returns the row
    return int(row[0])


# A stored time to the millisecond, as the Redis working set compares them.
_MILLISECONDS = "date_trunc('milliseconds', turns.created_at)"
_FIRST = datetime.min.replace(tzinfo=UTC)


def track_working(connection: Connection, turns: Sequence[tuple[int, Turn]], capacity: int) -> None:
    """Put new turns into their session's working set; move overflowing exchanges to mid-term.

    An exchange starts at each user message. When a session holds more than ``capacity``
    exchanges, the oldest leave the working set and a ``midterm`` job carrying their turns
    is queued in the same transaction: nothing is ever dropped. The oldest are those said
    first (their earliest turn's time), not those added first: turns back-filled into a live
    session leave before the newer ones. A reply joins the exchange in the set opened last at
    or before its own time (the latest added among equals), or starts its own when none was.
    Times count to the millisecond, as the Redis working set keeps them. The caller holds the
    users' writer locks, so two processes never number exchanges at once.
    """
    touched: dict[tuple[str, str], None] = {}
    openings: dict[tuple[str, str], ExchangeOpenings[datetime]] = {}
    for seq, turn in turns:
        key = (turn.user_id, turn.session_id or "")
        if key not in openings:  # read once per batch: placing a turn is then a binary search
            rows = connection.execute(
                f"SELECT working_items.exchange, MIN({_MILLISECONDS}) FROM working_items"
                " LEFT JOIN turns ON turns.seq = working_items.turn_seq"
                " WHERE working_items.user_id = %s AND working_items.session_key = %s GROUP BY working_items.exchange",
                key,
            ).fetchall()
            # An item whose turn is gone counts as opened first.
            openings[key] = ExchangeOpenings((opened or _FIRST, int(number)) for number, opened in rows)
        said = turn.created_at.replace(microsecond=turn.created_at.microsecond // 1000 * 1000)
        exchange = openings[key].place(said, starts=turn.role is Role.USER)
        inserted = connection.execute(
            "INSERT INTO working_items (turn_seq, user_id, session_key, exchange) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT DO NOTHING",
            (seq, key[0], key[1], exchange),
        )
        if inserted.rowcount == 0:  # already tracked: it opened no exchange
            openings[key].withdraw()
        touched[key] = None
    for user_id, session_key in touched:
        exchanges = [
            int(row[0])
            for row in connection.execute(
                "SELECT working_items.exchange FROM working_items LEFT JOIN turns ON turns.seq = working_items.turn_seq"
                " WHERE working_items.user_id = %s AND working_items.session_key = %s"
                f" GROUP BY working_items.exchange ORDER BY MIN({_MILLISECONDS}) NULLS FIRST, working_items.exchange",
                (user_id, session_key),
            )
        ]
        overflow = exchanges[: max(0, len(exchanges) - capacity)]
        if not overflow:
            continue
        rows = connection.execute(
            "DELETE FROM working_items WHERE user_id = %s AND session_key = %s AND exchange = ANY(%s::integer[])"
            " RETURNING turn_seq",
            (user_id, session_key, overflow),
        ).fetchall()
        enqueue(connection, "midterm", user_id, {"seqs": sorted(int(row[0]) for row in rows)})


class QueueMixin(Connected, QueueStatements[Connection]):
    """Job and working-set methods of the PostgreSQL store."""

    def claim_job(
        self, lease_seconds: float, max_attempts: int | None = None, *, user_id: str | None = None
    ) -> Job | None:
        """Take the next job to run (of ``user_id``, or anyone's; or one a crashed worker left), leased for a while.

        A job whose lease ran out after ``max_attempts`` claims is parked as failed instead: it
        stopped every worker that ran it.
        """

        def work(connection: Connection) -> Job | None:
            if max_attempts is not None:
                connection.execute(_PARK, (max_attempts,))
            row = connection.execute(_CLAIM, (lease_seconds, user_id, user_id)).fetchone()
            if row is None:
                return None
            return Job(
                id=int(row[0]), kind=str(row[1]), user_id=str(row[2]), payload=dict(row[3]), attempts=int(row[4])
            )

        return self._write(work)

    def renew_job(self, job_id: int, *, attempt: int, lease_seconds: float) -> bool:
        """Extend the lease of a job this claim still holds; False if another worker took it over."""
        return bool(
            self._write(
                lambda connection: (
                    connection.execute(
                        "UPDATE jobs SET lease_until = clock_timestamp() + make_interval(secs => %s)"
                        " WHERE id = %s AND state = 'running' AND attempts = %s",
                        (lease_seconds, job_id, attempt),
                    ).rowcount
                )
            )
        )

    def fail_job(
        self, job_id: int, error: str, *, retry: bool, attempt: int | None = None, retry_after: float = 0.0
    ) -> None:
        """Record a failure; the job is tried again ``retry_after`` seconds later, or parked as failed.

        With ``attempt``: see finish_job.
        """
        state = "pending" if retry else "failed"
        delay = retry_after if retry else 0.0
        held, parameters = fence(attempt)
        # The server's clock, as the claim compares it: a client clock ahead or behind moves nothing.
        self._write(
            lambda connection: connection.execute(
                "UPDATE jobs SET state = %s, error = %s,"
                " lease_until = CASE WHEN %s > 0 THEN clock_timestamp() + make_interval(secs => %s) END"
                f" WHERE id = %s{held}",
                (state, error[:2000], delay, delay, job_id, *parameters),
            )
        )

    def enqueue_job(self, kind: str, user_id: str, payload: dict[str, Any]) -> int:
        """Queue background work durably."""
        return self._write(lambda connection: enqueue(connection, kind, user_id, payload))
