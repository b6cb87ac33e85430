"""Time how long tracking one large batch holds a Redis server, in one script call or in parts.

    python scripts/redis_track_timing.py redis://127.0.0.1:6399/0 --turns 131000 [--newest-first] [--one-call]

Point it at a Redis that holds nothing else: it empties the database first. It tracks
``--turns`` turns of one session (a user message, then a reply, one second apart),
through ``RedisWorkingSet.track`` with a capacity of 10 exchanges, and prints the total
time and the longest command Redis logged in its slow log (``SLOWLOG``, microseconds):
how long the server served no one else. ``--one-call`` tracks the whole batch in a single
script call, as versions before parts did; ``--newest-first`` gives the turns in reverse
time order, the costliest order for the script.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta

import redis

from memstrata.errors import StorageError
from memstrata.models import Role, Turn
from memstrata.storage.redis import working
from memstrata.storage.redis.working import open_redis_working


def main() -> None:
    """Parse the arguments, track the batch and print what it cost."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--turns", type=int, default=131_000)
    parser.add_argument("--newest-first", action="store_true")
    parser.add_argument("--one-call", action="store_true")
    arguments = parser.parse_args()

    client = redis.Redis.from_url(arguments.url)
    client.flushdb()
    client.config_set("slowlog-log-slower-than", 10_000)  # commands over 10 ms
    client.slowlog_reset()
    start = datetime(2024, 1, 1, tzinfo=UTC)
    pairs = [
        (
            number + 1,
            Turn(
                id=f"t{number}",
                user_id="ana",
                role=Role.USER if number % 2 == 0 else Role.ASSISTANT,
                content="x",
                created_at=start + timedelta(seconds=number),
                session_id="s",
            ),
        )
        for number in range(arguments.turns)
    ]
    if arguments.newest_first:
        pairs.reverse()
    if arguments.one_call:
        working.TRACK_CHUNK = len(pairs)
    working_set = open_redis_working(arguments.url, lease_seconds=600)
    began = time.perf_counter()
    try:
        overflows = working_set.track(pairs, 10, batch="timing")
        outcome = f"{sum(len(overflow.seqs) for overflow in overflows)} moved out"
    except StorageError as exc:  # a call longer than the client's timeout fails, and Redis stays busy
        outcome = f"failed: {exc}"
    took = time.perf_counter() - began
    while True:  # the slow log is read once the server answers again
        try:
            longest = max((entry["duration"] for entry in client.slowlog_get(1_000)), default=0)
            break
        except (redis.BusyLoadingError, redis.ResponseError):
            time.sleep(0.5)
    print(f"{arguments.turns} turns: {took:.2f} s in all, longest command {longest / 1e6:.3f} s, {outcome}")
    working_set.close()


if __name__ == "__main__":
    main()
