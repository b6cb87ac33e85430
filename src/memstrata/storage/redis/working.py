"""The working set in Redis: one sorted set of turn seqs per session, changed only by atomic Lua scripts.

Keys (under ``memstrata:working:``), with ``sid`` = the URL-quoted user id and session key:

- ``session:{sid}:items`` sorted set, turn seq → exchange number (the working set itself);
- ``session:{sid}:seen`` set of the seqs ever tracked in the session (replays are no-ops);
- ``session:{sid}:meta`` hash: the latest exchange number, user id, session key, and for each
  exchange in the working set, ``t<number>``: when it opened, i.e. its earliest turn there was said (ms),
  so the exchanges said first leave first, even when they were added last (a back-fill), and
  for each turn in it, ``s<seq>``: when that turn was said (a delete recomputes ``t<number>``);
- ``user:{user}:sessions`` set of the user's sids; ``idle`` sorted set, sid → last activity (ms);
- ``pending`` hash, token → overflow not yet acknowledged; ``pending-due`` sorted set, token → lease end;
- ``batches`` set of batch names already tracked (and of the parts tracked of a large batch not yet
  whole, ``<batch>#<part>``); ``counter`` for overflow tokens.

Times come from the Redis server's clock, so the processes' clocks need not agree. Use a
standalone Redis (or a primary with replicas), not Redis Cluster: a script touches
several sessions' keys.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from memstrata.errors import ConfigError, StorageError
from memstrata.models import Role, Turn
from memstrata.storage.base import Overflow

if TYPE_CHECKING:
    from memstrata.storage.base import WorkingSet

T = TypeVar("T")
log = logging.getLogger("memstrata.working")
PREFIX = "memstrata:working:"
SOCKET_TIMEOUT_SECONDS = 5.0
#: Turns per call of the tracking script (``track``). ``scripts/redis_track_timing.py`` tracked
#: 131,000 turns of one session newest first in calls of 1,000, none holding Redis over 19 ms; in
#: one call, 40,000 held it for 5.5-5.7 s, past ``SOCKET_TIMEOUT_SECONDS`` (docs/storage.md).
TRACK_CHUNK = 1_000
DEFAULT_LEASE_SECONDS = 60.0
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _part_name(batch: str, part: Sequence[tuple[int, Turn]]) -> str:
    """``<batch>#<digest of the part's seqs>``: a replay's part of other turns is another part."""
    digest = hashlib.sha256(",".join(str(seq) for seq, _ in part).encode()).hexdigest()[:16]
    return f"{batch}#{digest}"


def open_redis_working(url: str, *, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> RedisWorkingSet:
    """Connect to ``redis://[:password@]host:port/db`` (or ``rediss://`` for TLS); nothing is sent until first use."""
    try:
        client = redis.Redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=SOCKET_TIMEOUT_SECONDS,
            socket_connect_timeout=SOCKET_TIMEOUT_SECONDS,
            health_check_interval=30,
            # One immediate retry replaces a pooled connection the server closed; a server that is
            # down fails at once, and the caller decides (every script is safe to run twice).
            retry=Retry(NoBackoff(), 1),
        )
    except ValueError as exc:
        raise ConfigError(f"invalid working_url {_redacted(url)!r}: {exc}; use redis://host:port/db") from exc
    return RedisWorkingSet(client, _redacted(url), lease_seconds=lease_seconds)


class RedisWorkingSet:
    """Working memory shared by every process that points at the same Redis database."""

    def __init__(self, client: redis.Redis, location: str, *, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        self.location = location
        self._client = client
        self._lease_ms = max(1, int(lease_seconds * 1000))
        self._track = client.register_script(_script("track.lua"))
        self._expire = client.register_script(_script("expire.lua"))
        self._reclaim = client.register_script(_script("reclaim.lua"))
        self._discard = client.register_script(_script("discard.lua"))
        self._eviction_checked = False

    def close(self) -> None:
        """Close the connection pool."""
        self._call(self._client.close)

    def track(self, turns: Sequence[tuple[int, Turn]], capacity: int, *, batch: str | None = None) -> list[Overflow]:
        """Add (seq, turn) pairs to their sessions; the overflows moved out.

        Up to ``TRACK_CHUNK`` turns go in one atomic script call. Redis serves no one else
        while a script runs, and a call's work grows with its turns (with the square of them
        for turns that arrive newest first), so a larger batch (an import) is tracked in
        parts, each a script call of its own named after the batch and the turns it holds:
        a replay after a failure part-way skips the parts already tracked (their turns may
        have left since) and tracks the rest; a part whose turns differ (one was deleted
        meanwhile) is tracked again, its turns already there ignored. The last part carries
        the batch's own name, and the parts' names are dropped once it is tracked (a process
        that dies part-way leaves them, a few bytes each; the overflows its parts moved stay
        pending and are reclaimed when their lease runs out).
        """
        if len(turns) <= TRACK_CHUNK:
            return self._track_part(turns, capacity, batch)
        if batch and self.is_tracked(batch):
            return []
        parts = [turns[start : start + TRACK_CHUNK] for start in range(0, len(turns), TRACK_CHUNK)]
        names = [_part_name(batch, part) for part in parts[:-1]] if batch else []
        overflows: list[Overflow] = []
        for number, part in enumerate(parts):
            overflows += self._track_part(part, capacity, names[number] if number < len(names) else batch)
        if names:
            self._call(lambda: self._client.srem(_key("batches"), *names))
        return overflows

    def _track_part(self, turns: Sequence[tuple[int, Turn]], capacity: int, batch: str | None) -> list[Overflow]:
        """Add (seq, turn) pairs to their sessions in one atomic script; the overflows it moved out."""
        sessions: dict[tuple[str, str], list[tuple[int, Turn]]] = {}
        for seq, turn in turns:
            sessions.setdefault((turn.user_id, turn.session_id or ""), []).append((seq, turn))
        if not sessions:
            return []
        keys = [_key("idle"), _key("pending"), _key("pending-due"), _key("counter"), _key("batches")]
        arguments: list[Any] = [capacity, self._lease_ms, batch or "", len(sessions)]
        for (user_id, session_key), members in sessions.items():
            sid = _sid(user_id, session_key)
            keys += [_session_key(sid, "items"), _session_key(sid, "seen"), _session_key(sid, "meta")]
            keys.append(_user_key(user_id))
            arguments += [user_id, session_key, sid, len(members)]
            for seq, turn in members:
                arguments += [seq, 1 if turn.role is Role.USER else 0, _milliseconds(turn.created_at)]
        reply = self._call(lambda: self._track(keys=keys, args=arguments))
        self._warn_if_evicting()  # after a call that answered: a stalled server is not waited on twice
        return _overflows(reply)

    def _warn_if_evicting(self) -> None:
        """Once: say so when the server may evict working sets (they carry no expiry, so only ``allkeys-*`` can)."""
        if self._eviction_checked:
            return
        try:
            policy = str(self._client.config_get("maxmemory-policy").get("maxmemory-policy", ""))
        except redis.ResponseError:
            self._eviction_checked = True  # managed services often refuse CONFIG; the docs say what to set
            return
        except redis.RedisError:
            return  # unreachable just now: asked again after the next tracking
        self._eviction_checked = True
        if policy.startswith("allkeys"):
            log.warning(
                "the Redis working set at %s runs with maxmemory-policy %s: when it fills up, Redis may evict"
                " working sets, and their exchanges then never reach mid-term (the turns stay in the store);"
                " use maxmemory-policy noeviction",
                self.location,
                policy,
            )

    def acknowledge(self, overflows: Sequence[Overflow]) -> None:
        """Forget pending overflows whose mid-term jobs are queued durably."""
        tokens = [overflow.token for overflow in overflows if overflow.token]
        if not tokens:
            return

        def work() -> None:
            with self._client.pipeline(transaction=True) as pipeline:
                pipeline.hdel(_key("pending"), *tokens)
                pipeline.zrem(_key("pending-due"), *tokens)
                pipeline.execute()

        self._call(work)

    def reclaim(self, limit: int) -> list[Overflow]:
        """Pending overflows whose lease ran out, leased again to this caller."""
        keys = [_key("pending"), _key("pending-due")]
        reply = self._call(lambda: self._reclaim(keys=keys, args=[self._lease_ms, limit]))
        return _overflows(reply)

    def expire_idle(self, idle_seconds: float, limit: int) -> list[Overflow]:
        """Move whole sessions idle for ``idle_seconds`` out, as overflows."""
        idle_ms = max(1, int(idle_seconds * 1000))

        def candidates() -> list[str]:
            seconds, microseconds = self._client.time()
            now = int(seconds) * 1000 + int(microseconds) // 1000
            found = self._client.zrangebyscore(_key("idle"), "-inf", now - idle_ms, start=0, num=limit)
            return [str(sid) for sid in found]

        moved: list[Overflow] = []
        for sid in self._call(candidates):
            user_id, session_key = _split_sid(sid)
            keys = [
                _key("idle"),
                _key("pending"),
                _key("pending-due"),
                _key("counter"),
                _session_key(sid, "items"),
                _session_key(sid, "seen"),
                _session_key(sid, "meta"),
                _user_key(user_id),
            ]
            arguments: list[str | int] = [sid, idle_ms, self._lease_ms, user_id, session_key]
            moved += _overflows(self._call(functools.partial(self._expire, keys, arguments)))
        return moved

    def is_tracked(self, batch: str) -> bool:
        """Whether a batch of that name was tracked (and not released since)."""
        return bool(self._call(lambda: self._client.sismember(_key("batches"), batch)))

    def release(self, batch: str) -> None:
        """Forget a batch name once no replay of it can come."""
        self._call(lambda: self._client.srem(_key("batches"), batch))

    def working_seqs(self, user_id: str, session_id: str | None = None) -> list[int]:
        """Turns in working memory (one session, or all of the user's), oldest first."""
        return sorted(seq for seqs in self.sessions(user_id, session_id).values() for seq in seqs)

    def sessions(self, user_id: str, session_id: str | None = None) -> dict[str, list[int]]:
        """Session key ('' for turns without one) → its turns in working memory, for one session or all."""
        return self._per_session(user_id, session_id, "items")

    def tracked(self, user_id: str, session_id: str | None = None) -> dict[str, list[int]]:
        """Session key → every turn tracked there and not discarded (those that left for mid-term too)."""
        return self._per_session(user_id, session_id, "seen")

    def _per_session(self, user_id: str, session_id: str | None, part: str) -> dict[str, list[int]]:
        """The seqs in each session's ``items`` (sorted set) or ``seen`` (set), read in one round trip."""

        def work() -> dict[str, list[int]]:
            if session_id is not None:
                sids = [_sid(user_id, session_id)]
            else:
                sids = sorted(str(sid) for sid in self._client.smembers(_user_key(user_id)))
            with self._client.pipeline(transaction=False) as pipeline:
                for sid in sids:
                    key = _session_key(sid, part)
                    if part == "items":
                        pipeline.zrange(key, 0, -1)
                    else:
                        pipeline.smembers(key)
                replies: list[Any] = pipeline.execute()
            held = zip(sids, replies, strict=True)
            return {_split_sid(sid)[1]: sorted(int(seq) for seq in seqs) for sid, seqs in held if seqs}

        return self._call(work)

    def pending(self, user_id: str, session_id: str | None = None) -> list[Overflow]:
        """Overflows of the user's (or one session's) not acknowledged yet, whoever holds their lease."""

        def work() -> list[Overflow]:
            found = []
            for token, payload in self._client.hgetall(_key("pending")).items():
                item = json.loads(payload)
                if item["user"] == user_id and (session_id is None or item.get("session") == session_id):
                    found.append((str(token), payload))
            return _overflows([part for pair in found for part in pair])

        return self._call(work)

    def discard(self, user_id: str, seqs: Mapping[str, Sequence[int]], tokens: Sequence[str] = ()) -> None:
        """Remove these turns (session key → seqs) and these pending overflows; a session with no turn left goes."""
        sessions = {key: list(found) for key, found in seqs.items() if found}
        if not sessions and not tokens:
            return
        keys = [_key("idle"), _key("pending"), _key("pending-due"), _user_key(user_id)]
        arguments: list[str | int] = [len(sessions), len(tokens)]
        for session_key, found in sessions.items():
            sid = _sid(user_id, session_key)
            keys += [_session_key(sid, part) for part in ("items", "seen", "meta")]
            arguments += [sid, len(found), *found]
        arguments += list(tokens)
        self._call(lambda: self._discard(keys=keys, args=arguments))

    def _call(self, work: Callable[[], T]) -> T:
        """Run ``work``, translating redis-py's errors into StorageError that say what to check."""
        try:
            return work()
        except redis.ConnectionError as exc:
            raise StorageError(
                f"cannot reach the Redis working set at {self.location}: {exc}; is redis-server running there?"
                " (check the working_url setting)"
            ) from exc
        except redis.TimeoutError as exc:
            raise StorageError(f"the Redis working set at {self.location} timed out: {exc}; retry") from exc
        except redis.RedisError as exc:
            raise StorageError(f"the Redis working set at {self.location} failed: {exc}") from exc


def _overflows(reply: Any) -> list[Overflow]:
    """Decode a script's flat (token, payload, token, payload …) reply."""
    items = list(reply or [])
    result: list[Overflow] = []
    for token, payload in zip(items[0::2], items[1::2], strict=True):
        decoded = json.loads(payload)
        seqs = decoded.get("seqs") or []  # cjson writes an empty list as {}
        result.append(Overflow(str(token), str(decoded["user"]), tuple(sorted(int(seq) for seq in seqs))))
    return result


def _script(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _key(name: str) -> str:
    return PREFIX + name


def _sid(user_id: str, session_key: str) -> str:
    return f"{quote(user_id, safe='')}:{quote(session_key, safe='')}"


def _split_sid(sid: str) -> tuple[str, str]:
    user, _, session = sid.partition(":")
    return unquote(user), unquote(session)


def _session_key(sid: str, part: str) -> str:
    return f"{PREFIX}session:{sid}:{part}"


def _user_key(user_id: str) -> str:
    return f"{PREFIX}user:{quote(user_id, safe='')}:sessions"


def _redacted(url: str) -> str:
    """The URL without its credentials, fit for messages and ``info``."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]))


if TYPE_CHECKING:

    def _satisfies_the_protocol(working: RedisWorkingSet) -> WorkingSet:
        """mypy proves here that the adapter implements the seam."""
        return working


def _milliseconds(moment: datetime) -> int:
    """Whole milliseconds since the epoch (exact in Lua's doubles for any year 1–9999)."""
    return (moment - _EPOCH) // timedelta(milliseconds=1)
