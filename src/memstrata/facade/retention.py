"""Retention policies: the ``retention`` setting applied to every user and space, now or by a background thread.

Each rule prunes one tier as ``Memory.prune`` does (each deletion is written to the audit
log as a ``retention`` event); a pass is logged at INFO with what it deleted per tier,
never silently, and names no user (a user id can be personal data).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from memstrata.config import RetentionRule
from memstrata.errors import MemstrataError
from memstrata.tiers.worker import Activity, yield_to_foreground

logger = logging.getLogger("memstrata.retention")

Prune = Callable[[str, str, timedelta | None, int | None], int]
"""Deletes one tier's items of one owner (user or space scope id), older than an age or beyond a count; how many."""


@dataclass(kw_only=True, slots=True)
class Retention:
    """Applies the rules to every owner the store holds."""

    rules: Mapping[str, RetentionRule]
    owners: Callable[[], Iterable[str]]
    prune: Prune
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(self) -> dict[str, int]:
        """One pass over every owner: items deleted per tier (tiers without a rule are absent)."""
        with self._lock:  # a pass on demand and the background one never interleave
            deleted = dict.fromkeys(self.rules, 0)
            owners = 0
            for owner in self.owners():
                owners += 1
                for tier, rule in self.rules.items():
                    older_than = timedelta(days=rule.max_age_days) if rule.max_age_days is not None else None
                    deleted[tier] += self.prune(owner, tier, older_than, rule.keep_last)
            if any(deleted.values()):
                logger.info("retention deleted %s across %d memories", _counts(deleted), owners)
            else:
                logger.debug("retention: nothing to delete across %d memories", owners)
            return deleted


class RetentionKeeper:
    """A daemon thread that applies retention every ``interval_seconds`` (the first pass soon after start)."""

    def __init__(
        self,
        retention: Retention,
        interval_seconds: float,
        *,
        first_after_seconds: float = 5.0,
        activity: Activity | None = None,
    ) -> None:
        self._retention = retention
        self._activity = activity  # a pass waits for a quiet moment in the foreground, as tier jobs do
        self._interval = interval_seconds
        self._first_after = min(first_after_seconds, interval_seconds)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="memstrata-retention", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the pass in progress, if any."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _loop(self) -> None:
        wait = self._first_after
        while not self._stop.wait(wait):
            yield_to_foreground(self._activity, self._stop.is_set)
            if self._stop.is_set():
                return
            try:
                self._retention.apply()
            except MemstrataError as exc:  # a busy or unreachable store: the next pass tries again
                logger.warning("retention pass failed, tried again in %.0f s: %s", self._interval, exc)
            except Exception:  # a bug must not end retention for the life of the process
                logger.exception("retention pass failed, tried again in %.0f s", self._interval)
            wait = self._interval


def _counts(deleted: Mapping[str, int]) -> str:
    return ", ".join(f"{count} {tier}" for tier, count in deleted.items())
