"""The job-queue statements both stores share; claiming, renewing and failing (the clocks they read) stay apart."""

from __future__ import annotations

from typing import Any

from memstrata.storage.dialect import C, Runner


def of_user(statement: str, user_id: str | None) -> tuple[str, list[Any]]:
    """``statement`` (with a WHERE clause) limited to one user's rows when ``user_id`` is given."""
    return (statement, []) if user_id is None else (f"{statement} AND user_id = %s", [user_id])


def fence(attempt: int | None) -> tuple[str, tuple[int, ...]]:
    """The clause that limits a job update to the claim numbered ``attempt`` (none without one)."""
    if attempt is None:
        return "", ()
    return " AND state = 'running' AND attempts = %s", (attempt,)


class QueueStatements(Runner[C]):
    """The job methods of ``TierStore`` that both stores run alike."""

    def finish_job(self, job_id: int, *, attempt: int | None = None) -> None:
        """Delete a finished job (with ``attempt``: only if that claim still holds it)."""
        held, parameters = fence(attempt)
        statement = self.dialect.sql(f"DELETE FROM jobs WHERE id = %s{held}")
        self._write(lambda connection: connection.execute(statement, (job_id, *parameters)))

    def count_failed_jobs(self, user_id: str | None = None) -> int:
        """Jobs parked as failed (tried too often), of ``user_id`` or of everyone."""
        return self._count(*of_user("SELECT COUNT(*) FROM jobs WHERE state = 'failed'", user_id))

    def retry_failed_jobs(self, user_id: str | None = None) -> int:
        """Queue the failed jobs (of ``user_id``, or everyone's) again, with fresh attempts; how many."""
        statement, parameters = of_user(
            "UPDATE jobs SET state = 'pending', attempts = 0, lease_until = NULL WHERE state = 'failed'", user_id
        )
        statement = self.dialect.sql(statement)
        return int(self._write(lambda connection: connection.execute(statement, parameters).rowcount))

    def count_jobs(self, user_id: str | None = None) -> int:
        """Jobs not finished yet (pending or running)."""
        return self._count(*of_user("SELECT COUNT(*) FROM jobs WHERE state IN ('pending', 'running')", user_id))

    def _count(self, statement: str, parameters: list[Any]) -> int:
        statement = self.dialect.sql(statement)
        row = self._read(lambda connection: connection.execute(statement, parameters).fetchone())
        return int(row[0]) if row else 0
