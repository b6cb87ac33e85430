"""The Redis working set against a real redis-server: exchanges, overflow, leases, expiry, forgetting, failures."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memstrata.errors import ConfigError, StorageError
from memstrata.models import Role, Turn
from memstrata.storage import open_working_set
from memstrata.storage.base import Overflow
from tests.redis_server import free_port, require_driver

redis = require_driver()

from memstrata.storage.redis import working as working_module  # noqa: E402
from memstrata.storage.redis.working import RedisWorkingSet, open_redis_working  # noqa: E402

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _turn(seq: int, role: Role = Role.USER, *, user: str = "ana", session: str | None = "s") -> tuple[int, Turn]:
    turn = Turn(id=f"t{seq}", user_id=user, role=role, content=f"message {seq}", created_at=NOW, session_id=session)
    return seq, turn


def _exchange(first_seq: int, **scope: str | None) -> list[tuple[int, Turn]]:
    """A user message and the assistant's reply."""
    return [_turn(first_seq, **scope), _turn(first_seq + 1, Role.ASSISTANT, **scope)]  # type: ignore[arg-type]


@pytest.fixture
def working(redis_url: str) -> Iterator[RedisWorkingSet]:
    """A working set on the emptied test Redis, with a short lease on pending overflows."""
    opened = open_redis_working(redis_url, lease_seconds=0.5)
    yield opened
    opened.close()


def _keys(redis_url: str) -> list[str]:
    with redis.Redis.from_url(redis_url, decode_responses=True) as client:
        return sorted(str(key) for key in client.keys("*"))


def test_the_oldest_exchanges_overflow_past_the_capacity(working: RedisWorkingSet) -> None:
    pairs = [pair for n in range(4) for pair in _exchange(10 + 2 * n)]
    overflows = working.track(pairs, 2)
    assert [(o.user_id, o.seqs) for o in overflows] == [("ana", (10, 11, 12, 13))]
    assert working.working_seqs("ana") == [14, 15, 16, 17]
    assert working.working_seqs("ana", "s") == [14, 15, 16, 17] and working.working_seqs("ana", "other") == []
    assert working.working_seqs("bob") == []
    # An assistant message continues the exchange it follows; only a user message starts one.
    assert working.track([_turn(18, Role.ASSISTANT)], 2) == []
    assert [o.seqs for o in working.track(_exchange(19), 2)] == [(14, 15)]
    assert working.working_seqs("ana") == [16, 17, 18, 19, 20]


def test_sessions_and_users_are_separate(working: RedisWorkingSet) -> None:
    working.track([*_exchange(1, session="a"), *_exchange(3, session=None), *_exchange(5, user="bob")], 1)
    assert working.working_seqs("ana", "a") == [1, 2]
    assert working.working_seqs("ana", "") == [3, 4]  # the turns without a session
    assert working.working_seqs("ana") == [1, 2, 3, 4] and working.working_seqs("bob") == [5, 6]
    overflows = working.track([*_exchange(7, session="a"), *_exchange(9, user="bob")], 1)
    assert sorted((o.user_id, o.seqs) for o in overflows) == [("ana", (1, 2)), ("bob", (5, 6))]


def test_tracking_is_idempotent_per_turn_and_per_batch(working: RedisWorkingSet) -> None:
    pairs = [pair for n in range(3) for pair in _exchange(1 + 2 * n)]
    first = working.track(pairs, 2, batch="b1")
    assert [o.seqs for o in first] == [(1, 2)]
    assert working.track(pairs, 2) == []  # the same turns again: nothing moves, nothing is added
    assert working.working_seqs("ana") == [3, 4, 5, 6]
    # A replay of a named batch is skipped whole, even after its turns left the session.
    working.acknowledge(first)
    time.sleep(0.01)
    assert working.expire_idle(0.001, 10) != []
    assert working.track(pairs, 2, batch="b1") == [] and working.working_seqs("ana") == []
    assert working.is_tracked("b1") and not working.is_tracked("b2")
    working.release("b1")
    assert not working.is_tracked("b1")
    assert working.track(pairs[:2], 2, batch="b1") == [] and working.working_seqs("ana") == [1, 2]


def _said_in_order(count: int, *, user: str) -> list[tuple[int, Turn]]:
    """``count`` turns one second apart, a user message then a reply, in time order."""
    return [
        (
            seq,
            Turn(
                id=f"{user}{seq}",
                user_id=user,
                role=Role.USER if seq % 2 else Role.ASSISTANT,
                content=f"message {seq}",
                created_at=NOW + timedelta(seconds=seq),
                session_id="s",
            ),
        )
        for seq in range(1, count + 1)
    ]


def _moved(overflows: list[Overflow]) -> list[int]:
    return sorted(seq for overflow in overflows for seq in overflow.seqs)


@pytest.mark.parametrize("newest_first", [False, True])
def test_a_batch_larger_than_a_script_call_is_tracked_in_parts_as_one_call_would(
    working: RedisWorkingSet, monkeypatch: pytest.MonkeyPatch, newest_first: bool
) -> None:
    def said(user: str) -> list[tuple[int, Turn]]:
        pairs = _said_in_order(60, user=user)
        return pairs[::-1] if newest_first else pairs

    whole = working.track(said("ana"), 4, batch="whole")
    monkeypatch.setattr(working_module, "TRACK_CHUNK", 7)
    parts = working.track(said("bob"), 4, batch="parts")

    assert len(parts) > 1  # one overflow per part that moved exchanges out
    assert _moved(parts) == _moved(whole) and working.working_seqs("bob") == working.working_seqs("ana")
    assert sorted(_moved(parts) + working.working_seqs("bob")) == list(range(1, 61))
    assert working.is_tracked("parts") and not any("#" in name for name in _batch_names(working))
    assert working.track(said("bob"), 4, batch="parts") == []  # a replay is skipped whole


def test_a_replay_after_a_failure_part_way_tracks_only_the_parts_left(
    working: RedisWorkingSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(working_module, "TRACK_CHUNK", 10)
    pairs = _said_in_order(45, user="ana")  # parts of 10, 10, 10, 10 and 5 turns
    real = working._track_part
    calls: list[str | None] = []

    def third_call_fails(turns: Any, capacity: int, batch: str | None) -> list[Overflow]:
        calls.append(batch)
        if len(calls) == 3:
            raise StorageError("the connection dropped")
        return real(turns, capacity, batch)

    monkeypatch.setattr(working, "_track_part", third_call_fails)
    with pytest.raises(StorageError):
        working.track(pairs, 2, batch="b1")
    assert not working.is_tracked("b1") and set(calls[:2]) == _batch_names(working)
    # The session expires before the replay comes, so no seq remembers the parts tracked.
    time.sleep(0.01)
    expired = working.expire_idle(0.001, 10)
    working.acknowledge(expired)

    replayed = working.track(pairs, 2, batch="b1")
    working.acknowledge(replayed)

    assert len(calls) == 8 and calls[3:5] == calls[:2] and calls[5] == calls[2] and calls[-1] == "b1"
    assert _moved(expired) == list(range(17, 21))  # what the first two parts left in the session
    assert sorted(_moved(replayed) + working.working_seqs("ana")) == list(range(21, 46))
    time.sleep(0.6)  # the first two parts' overflows stayed pending; their lease runs out
    assert _moved(working.reclaim(10)) == list(range(1, 17))  # every turn moves exactly once
    assert working.is_tracked("b1") and _batch_names(working) == {"b1"}


def test_a_replay_whose_turns_moved_between_parts_tracks_every_turn_left(
    working: RedisWorkingSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(working_module, "TRACK_CHUNK", 10)
    pairs = _said_in_order(45, user="ana")
    real = working._track_part
    calls = 0

    def third_call_fails(turns: Any, capacity: int, batch: str | None) -> list[Overflow]:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise StorageError("the connection dropped")
        return real(turns, capacity, batch)

    monkeypatch.setattr(working, "_track_part", third_call_fails)
    with pytest.raises(StorageError):
        working.track(pairs, 2, batch="b1")
    # Turn 3 is deleted before the replay, which reads the turns left: every part shifts by one.
    replayed = working.track([pair for pair in pairs if pair[0] != 3], 2, batch="b1")
    working.acknowledge(replayed)

    time.sleep(0.6)  # the failed add's overflows come back once their lease runs out
    moved = _moved(replayed) + _moved(working.reclaim(10)) + working.working_seqs("ana")
    assert 21 in moved  # in the add's failed part; in the replay, at the end of its second part
    # Turn 3 left with the add's first part, before its delete (which discards it from Redis).
    assert sorted(moved) == list(range(1, 46))  # every turn once: none lost, none moved twice


def _batch_names(working: RedisWorkingSet) -> set[str]:
    return {str(name) for name in working._client.smembers(working_module._key("batches"))}


def test_an_overflow_stays_pending_until_acknowledged_and_is_reclaimed_after_its_lease(
    working: RedisWorkingSet,
) -> None:
    pairs = [pair for n in range(3) for pair in _exchange(1 + 2 * n)]
    (taken,) = working.track(pairs, 2)  # the taker "dies" here, before queueing it
    assert working.reclaim(10) == []  # still leased to its taker
    time.sleep(0.6)
    (again,) = working.reclaim(10)
    assert again == taken
    assert working.reclaim(10) == []  # leased again, to this caller
    working.acknowledge([again])
    time.sleep(0.6)
    assert working.reclaim(10) == []


def test_idle_sessions_expire_whole_as_overflows(working: RedisWorkingSet, redis_url: str) -> None:
    working.track(_exchange(1, session="old"), 5)
    time.sleep(0.6)
    working.track(_exchange(3, session="fresh"), 5)
    (expired,) = working.expire_idle(0.5, 10)
    assert (expired.user_id, expired.seqs) == ("ana", (1, 2))
    assert working.working_seqs("ana") == [3, 4]
    assert not any("old" in key for key in _keys(redis_url) if "pending" not in key)
    working.acknowledge([expired])
    assert working.expire_idle(0.5, 10) == []  # "fresh" is not idle yet
    # A new turn in an expired session starts it afresh.
    working.track(_exchange(5, session="old"), 5)
    assert working.working_seqs("ana", "old") == [5, 6]


def test_discarding_removes_only_the_turns_named_and_sessions_with_none_left_go_whole(
    working: RedisWorkingSet, redis_url: str
) -> None:
    working.track([*_exchange(1, user="ana-x"), *_exchange(3, user="ana-x", session="t"), *_exchange(5, user="bob")], 1)
    pending = working.track([*_exchange(7, user="ana-x"), *_exchange(9, user="bob")], 1)  # left pending
    assert working.sessions("ana-x") == {"s": [7, 8], "t": [3, 4]} and working.sessions("ana-x", "t") == {"t": [3, 4]}
    assert working.tracked("ana-x") == {"s": [1, 2, 7, 8], "t": [3, 4]}  # 1 and 2 left for mid-term
    (held,) = working.pending("ana-x")
    assert held.seqs == (1, 2) and working.pending("ana-x", "t") == [] and len(pending) == 2
    working.discard("ana-x", {"s": [8], "t": [3, 4, 99]})
    assert working.sessions("ana-x") == {"s": [7]}  # one turn out of "s"; "t" has none left, so it went
    assert not any(":t:" in key for key in _keys(redis_url))
    # "s" still remembers 1 and 2, which left for mid-term: a replay of their add stays a no-op.
    working.discard("ana-x", {"s": [7]})
    assert working.working_seqs("ana-x") == [] and working.tracked("ana-x") == {"s": [1, 2]}
    assert working.track(_exchange(1, user="ana-x"), 1) == [] and working.working_seqs("ana-x") == []
    working.discard("ana-x", {"s": [1, 2]}, [held.token])
    assert working.pending("ana-x") == [] and not any("ana-x" in key for key in _keys(redis_url))
    time.sleep(0.6)
    assert [o.user_id for o in working.reclaim(10)] == ["bob"]  # ana-x's pending overflow went
    assert working.working_seqs("bob") == [9, 10]


def _said_fields(redis_url: str, user: str = "ana", session: str = "s") -> dict[str, str]:
    """The ``t<exchange>`` fields of a session's meta hash: when each exchange in the set was said."""
    with redis.Redis.from_url(redis_url, decode_responses=True) as client:
        meta = client.hgetall(f"memstrata:working:session:{user}:{session}:meta")
    return {field: value for field, value in meta.items() if field.startswith("t")}


def test_exchanges_leave_in_the_order_said_and_a_late_reply_joins_no_newer_one(
    working: RedisWorkingSet, redis_url: str
) -> None:
    def said(seq: int, role: Role, when: datetime) -> tuple[int, Turn]:
        return seq, Turn(id=f"t{seq}", user_id="ana", role=role, content="m", created_at=when, session_id="s")

    later = datetime(2026, 6, 1, tzinfo=UTC)
    working.track([said(1, Role.USER, later), said(2, Role.ASSISTANT, later)], 2)
    working.track([said(3, Role.USER, later), said(4, Role.ASSISTANT, later)], 2)
    assert sorted(_said_fields(redis_url)) == ["t0", "t1"]
    # A question said long before, back-filled: the oldest, so it is the one that leaves.
    assert [o.seqs for o in working.track([said(5, Role.USER, NOW)], 2)] == [(5,)]
    assert working.working_seqs("ana") == [1, 2, 3, 4] and sorted(_said_fields(redis_url)) == ["t0", "t1"]
    # Its reply, back-filled in the next add, does not join exchange 1, which was said later: it leaves too.
    assert [o.seqs for o in working.track([said(6, Role.ASSISTANT, NOW)], 2)] == [(6,)]
    assert working.working_seqs("ana") == [1, 2, 3, 4]
    # A live reply said after exchange 1 still continues it.
    assert working.track([said(7, Role.ASSISTANT, later)], 2) == []
    assert working.working_seqs("ana") == [1, 2, 3, 4, 7]
    working.discard("ana", {"s": [3, 4, 7]})
    assert sorted(_said_fields(redis_url)) == ["t0"]  # none of exchange 1's turns is left


def test_an_exchange_tracked_by_an_older_version_stays_oldest_when_replies_join_it(
    working: RedisWorkingSet, redis_url: str
) -> None:
    with redis.Redis.from_url(redis_url, decode_responses=True) as client:  # as the version before times wrote it
        client.zadd("memstrata:working:session:ana:s:items", {"1": 0})
        client.sadd("memstrata:working:session:ana:s:seen", "1")
        client.hset("memstrata:working:session:ana:s:meta", mapping={"exchange": 0, "user": "ana", "session": "s"})

    def reply(seq: int, when: datetime) -> tuple[int, Turn]:
        return seq, Turn(id=f"t{seq}", user_id="ana", role=Role.ASSISTANT, content="m", created_at=when, session_id="s")

    working.track([reply(2, datetime(2026, 6, 1, tzinfo=UTC))], 5)
    working.track([reply(3, datetime(2026, 5, 1, tzinfo=UTC))], 5)  # said before the first reply: still joins
    with redis.Redis.from_url(redis_url, decode_responses=True) as client:
        scores = dict(client.zrange("memstrata:working:session:ana:s:items", 0, -1, withscores=True))
    assert scores == {"1": 0.0, "2": 0.0, "3": 0.0}
    assert "t0" not in _said_fields(redis_url)


def test_concurrent_tracking_moves_every_exchange_exactly_once(redis_url: str) -> None:
    writers = [open_redis_working(redis_url) for _ in range(4)]
    moved: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(len(writers))

    def write(index: int) -> None:
        start.wait()
        for n in range(50):
            first = 1000 * index + 2 * n
            overflows = writers[index].track(_exchange(first), 3)
            writers[index].acknowledge(overflows)
            with lock:
                moved.extend(seq for overflow in overflows for seq in overflow.seqs)

    threads = [threading.Thread(target=write, args=(index,)) for index in range(len(writers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    kept = writers[0].working_seqs("ana")
    every = sorted(1000 * index + k for index in range(len(writers)) for k in range(100))
    assert sorted(moved + kept) == every  # nothing lost, nothing twice
    assert len(kept) == 6  # three exchanges of two turns stay
    for writer in writers:
        writer.close()


def test_an_unreachable_redis_raises_storage_error_naming_it_without_the_password() -> None:
    working = open_redis_working(f"redis://:hunter2@127.0.0.1:{free_port()}/0")
    assert "hunter2" not in working.location and "***" in working.location
    with pytest.raises(StorageError, match="is redis-server running") as caught:
        working.track(_exchange(1), 2)
    assert "hunter2" not in str(caught.value)
    with pytest.raises(StorageError):
        working.working_seqs("ana")


def test_working_urls_are_chosen_by_scheme() -> None:
    assert isinstance(open_working_set("redis://127.0.0.1:1/0"), RedisWorkingSet)
    with pytest.raises(ConfigError, match="redis://"):
        open_working_set("memcached://127.0.0.1:11211")
    with pytest.raises(ConfigError, match="invalid working_url"):
        open_working_set("redis://127.0.0.1:not-a-port/0")
