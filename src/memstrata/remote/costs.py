"""The cost log: one JSON line per successful provider call in ``<data_dir>/costs.jsonl``, and its summary.

Lines are appended whole (one ``write`` under an exclusive file lock, then fsync), so several
processes can log at once. Costs are estimates from the price table in settings, or null
when the model has no price.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstrata.errors import InvalidInput
from memstrata.prices import ModelPrice, default_prices, estimate_cost
from memstrata.remote.usage import Usage

if TYPE_CHECKING:
    from memstrata.config import Settings

logger = logging.getLogger(__name__)

COST_LOG_FILE_NAME = "costs.jsonl"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass(kw_only=True, frozen=True, slots=True)
class CostRecord:
    """One logged provider call."""

    time: datetime
    provider: str
    model: str
    purpose: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cost_usd: float | None
    latency_ms: float

    def to_json(self) -> str:
        """The record as one JSON line (without the newline)."""
        values: dict[str, Any] = {
            "time": self.time.astimezone(UTC).isoformat(),
            "provider": self.provider,
            "model": self.model,
            "purpose": self.purpose,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": self.cost_usd,
            "latency_ms": round(self.latency_ms, 1),
        }
        return json.dumps(values, ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> CostRecord | None:
        """Parse one line; None if it is not a whole record (a line torn by a crash)."""
        try:
            values = json.loads(line)
            time = datetime.fromisoformat(values["time"])
            cost = values.get("cost_usd")
            return cls(
                time=time if time.tzinfo else time.replace(tzinfo=UTC),
                provider=str(values["provider"]),
                model=str(values["model"]),
                purpose=str(values.get("purpose", "")),
                input_tokens=int(values.get("input_tokens", 0)),
                output_tokens=int(values.get("output_tokens", 0)),
                cached_tokens=int(values.get("cached_tokens", 0)),
                cost_usd=None if cost is None else _finite(cost),
                latency_ms=_finite(values.get("latency_ms", 0.0)),
            )
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError):  # OverflowError: int(1e999)
            return None


def _finite(value: object) -> float:
    """``value`` as a finite float; ValueError for ``NaN`` or infinity (such a line is no record)."""
    if not isinstance(value, int | float | str):
        raise TypeError(f"{value!r} is not a number")
    number = float(value)  # ValueError for text that is no number
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a finite number")
    return number


class CostLog:
    """Appends a :class:`CostRecord` per successful call; safe across threads and processes."""

    def __init__(self, path: Path, prices: Mapping[str, ModelPrice] | None = None) -> None:
        self._path = path
        self._prices = dict(default_prices() if prices is None else prices)
        self._lock = threading.Lock()

    @classmethod
    def for_settings(cls, settings: Settings) -> CostLog:
        """The log in the settings' data directory, priced with its price table."""
        return cls(settings.data_dir / COST_LOG_FILE_NAME, settings.llm_prices)

    def __repr__(self) -> str:
        return f"CostLog({str(self._path)!r})"

    @property
    def path(self) -> Path:
        """The JSON-lines file."""
        return self._path

    def record(
        self,
        *,
        provider: str,
        model: str,
        purpose: str,
        usage: Usage,
        latency_ms: float,
        time: datetime | None = None,
    ) -> CostRecord:
        """Price one call, append it, and return the record (logging problems warn, never fail the call)."""
        entry = CostRecord(
            time=time or datetime.now(UTC),
            provider=provider,
            model=model,
            purpose=purpose,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cached_tokens=usage.cached_tokens,
            cost_usd=estimate_cost(
                model,
                self._prices,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cached_tokens=usage.cached_tokens,
            ),
            latency_ms=latency_ms,
        )
        try:
            self.append(entry)
        except OSError as exc:
            logger.warning("could not append to the cost log %s: %s", self._path, exc)
        return entry

    def append(self, entry: CostRecord) -> None:
        """Write one whole line: one write under an exclusive lock, then fsync."""
        data = (entry.to_json() + "\n").encode("utf-8")
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            descriptor = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                with _exclusive(descriptor):
                    written = 0
                    while written < len(data):
                        written += os.write(descriptor, data[written:])
                    os.fsync(descriptor)
            finally:
                os.close(descriptor)


@contextmanager
def _exclusive(descriptor: int) -> Iterator[None]:
    if sys.platform == "win32":  # appends of one short line are atomic enough; the thread lock still holds
        yield
        return
    import fcntl  # POSIX only

    fcntl.flock(descriptor, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(descriptor, fcntl.LOCK_UN)


def read_costs(path: str | os.PathLike[str], since: datetime | None = None) -> Iterator[CostRecord]:
    """The records in ``path`` at or after ``since``, skipping lines that are not whole records."""
    path = Path(path)
    if not path.is_file():
        return
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            entry = CostRecord.from_json(line) if line.strip() else None
            if entry is not None and (since is None or entry.time >= since):
                yield entry


@dataclass(kw_only=True, frozen=True, slots=True)
class CostTotals:
    """Calls, tokens and estimated dollars of a group of calls."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    """Calls whose model has no price: their cost is missing from ``cost_usd``."""
    cached_share: float = 0.0
    """Share of input tokens read from a cached prompt prefix."""

    def plus(self, entry: CostRecord) -> CostTotals:
        """These totals with one more call."""
        input_tokens = self.input_tokens + entry.input_tokens
        cached_tokens = self.cached_tokens + entry.cached_tokens
        return CostTotals(
            calls=self.calls + 1,
            input_tokens=input_tokens,
            output_tokens=self.output_tokens + entry.output_tokens,
            cached_tokens=cached_tokens,
            cost_usd=round(self.cost_usd + (entry.cost_usd or 0.0), 8),
            unpriced_calls=self.unpriced_calls + (entry.cost_usd is None),
            cached_share=cached_tokens / input_tokens if input_tokens else 0.0,
        )


@dataclass(kw_only=True, frozen=True, slots=True)
class CostSummary:
    """Totals of the cost log overall, per model and per purpose."""

    path: Path
    since: datetime | None
    total: CostTotals
    by_model: dict[str, CostTotals] = field(default_factory=dict)
    by_purpose: dict[str, CostTotals] = field(default_factory=dict)
    first: datetime | None = None
    last: datetime | None = None


def summarize_costs(path: str | os.PathLike[str], since: datetime | None = None) -> CostSummary:
    """Add up the cost log at ``path`` (calls at or after ``since``) per model and per purpose."""
    path = Path(path)
    total = CostTotals()
    by_model: dict[str, CostTotals] = {}
    by_purpose: dict[str, CostTotals] = {}
    first: datetime | None = None
    last: datetime | None = None
    for entry in read_costs(path, since):
        total = total.plus(entry)
        by_model[entry.model] = by_model.get(entry.model, CostTotals()).plus(entry)
        by_purpose[entry.purpose] = by_purpose.get(entry.purpose, CostTotals()).plus(entry)
        first = entry.time if first is None else min(first, entry.time)
        last = entry.time if last is None else max(last, entry.time)
    return CostSummary(
        path=path,
        since=since,
        total=total,
        by_model=dict(sorted(by_model.items())),
        by_purpose=dict(sorted(by_purpose.items())),
        first=first,
        last=last,
    )


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """A start time from a duration back from ``now`` (``90m``, ``12h``, ``7d``, ``2w``) or an ISO date/time."""
    match = _DURATION.match(text)
    if match:
        amount, unit = float(match.group(1)), match.group(2).lower()
        try:
            return (now or datetime.now(UTC)) - timedelta(seconds=amount * _UNIT_SECONDS[unit])
        except OverflowError:
            raise InvalidInput(
                f"{text!r} reaches back before the year 1; give a shorter duration, or an ISO date such as 2026-01-31"
            ) from None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(
            f"cannot read {text!r} as a time; give a duration such as 7d, 12h or 30m, "
            "or an ISO date or time such as 2026-01-31 or 2026-01-31T09:00:00+00:00"
        ) from None
    try:
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is before the calendar's first moment in UTC
        raise InvalidInput(f"{text!r} is at the edge of the calendar; give a date between 0002 and 9998") from None
