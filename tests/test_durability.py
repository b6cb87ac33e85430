"""Crash and concurrency tests: real child processes, real SIGKILL, real SQLite files."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.config import DATABASE_FILE_NAME
from memstrata.embeddings.hashing import HashEmbedder

pytestmark = pytest.mark.slow

CHILD_TIMEOUT = 120  # seconds; only a hang would come near it

WRITE_UNTIL_KILLED = """
import sys
from memstrata import Memory
home, round_ = sys.argv[1], sys.argv[2]
with Memory(home) as memory:
    index = 0
    while True:
        token = f"ack{round_}x{index:05d}"
        turn = memory.add(f"durable message {index} carries {token}", user_id="crash", session_id=f"r{round_}")[0]
        print(turn.id, token, flush=True)
        index += 1
"""

WRITER = """
import sys
from memstrata import Memory
home, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
with Memory(home) as memory:
    print("ready", flush=True)
    sys.stdin.readline()
    searches = 0
    for index in range(count):
        token = f"tag{name}{index:04d}"
        memory.add(f"writer {name} wrote item {index} {token}", user_id="shared", id=f"{name}-{index:04d}")
        if index % 40 == 0:
            found = [hit.id for hit in memory.search(token, user_id="shared", limit=5)]
            assert f"{name}-{index:04d}" in found, (token, found)
            searches += 1
    print("done", searches, flush=True)
"""

SAME_MESSAGES = """
import sys
from memstrata import Memory
home, order = sys.argv[1], sys.argv[2]
messages = [
    {"role": ("user", "assistant")[i % 2], "content": f"retry message {i} token r{i:03d}", "id": f"msg-{i:03d}"}
    for i in range(50)
]
ids = [message["id"] for message in messages]
with Memory(home) as memory:
    print("ready", flush=True)
    sys.stdin.readline()
    for step in order.split(","):
        if step == "batch":
            assert [t.id for t in memory.add(messages, user_id="retry", session_id="s")] == ids
        else:
            for message in messages:
                assert [t.id for t in memory.add([message], user_id="retry", session_id="s")] == [message["id"]]
    print("done", flush=True)
"""

READER = """
import sys
import time
from memstrata import Memory
home, expected = sys.argv[1], set(sys.argv[2].split(","))
with Memory(home) as memory:
    first = memory.search("catchup marker", user_id="live", mode="vector", limit=100)
    print("ready", len(first), flush=True)
    seen = set()
    for attempt in range(2000):
        found = {hit.id for hit in memory.search("catchup marker", user_id="live", mode="vector", limit=100)}
        seen = found & expected
        if seen == expected:
            hybrid = {hit.id for hit in memory.search("catchup marker", user_id="live", limit=100)}
            assert expected <= hybrid, sorted(expected - hybrid)
            print("seen", attempt, flush=True)
            break
        time.sleep(0.01)
    else:
        print("missing", sorted(expected - seen), flush=True)
        sys.exit(1)
"""


def child_env() -> dict[str, str]:
    """The parent's environment without MEMSTRATA_* settings, plus the fast hash embedder."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
    env["MEMSTRATA_EMBEDDER"] = "hash"
    return env


def spawn(script: str, *args: str) -> subprocess.Popen[str]:
    """Start ``python -c script args…`` with pipes on all three streams."""
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
        text=True,
    )


def wait_ready(process: subprocess.Popen[str]) -> str:
    """Read the child's ``ready`` line; fail with its stderr if it died first."""
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("ready"):
        process.kill()
        _, errors = process.communicate(timeout=CHILD_TIMEOUT)
        pytest.fail(f"child did not start: {line!r}\n{errors}")
    return line


def finish(process: subprocess.Popen[str]) -> str:
    """Wait for a child; return its remaining stdout; fail with its stderr on a non-zero exit."""
    try:
        output, errors = process.communicate(timeout=CHILD_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        output, errors = process.communicate()
        pytest.fail(f"child hung\nstdout: {output}\nstderr: {errors}")
    assert process.returncode == 0, f"child exited {process.returncode}\nstdout: {output}\nstderr: {errors}"
    return output


def kill_all(processes: list[subprocess.Popen[str]]) -> None:
    """Clean up children this test started, if an assertion left any running."""
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.communicate()


def check_database(home: Path) -> sqlite3.Connection:
    """Open the SQLite file directly and assert both SQLite's and FTS5's integrity checks pass."""
    connection = sqlite3.connect(home / DATABASE_FILE_NAME, isolation_level=None)
    assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    # Raises sqlite3.DatabaseError (SQLITE_CORRUPT_VTAB) if the index disagrees with the turns.
    connection.execute("INSERT INTO turns_fts(turns_fts) VALUES('integrity-check')")
    return connection


def test_acknowledged_adds_survive_sigkill(home: Path) -> None:
    acknowledged: list[tuple[str, str]] = []
    for round_, target in enumerate((30, 45, 60)):
        process = spawn(WRITE_UNTIL_KILLED, str(home), str(round_))
        assert process.stdout is not None
        lines: list[str] = []
        try:
            while len(lines) < target and (line := process.stdout.readline()):
                lines.append(line)
            os.kill(process.pid, signal.SIGKILL)
            rest, errors = process.communicate(timeout=CHILD_TIMEOUT)
        finally:
            kill_all([process])
        assert len(lines) >= target, f"child acknowledged only {len(lines)} adds\n{errors}"
        assert process.returncode == -signal.SIGKILL, errors
        # Lines printed before the kill landed were acknowledged too; a torn last line was not.
        lines += [line for line in rest.splitlines(keepends=True) if line.endswith("\n")]
        for line in lines:
            turn_id, token = line.split()
            acknowledged.append((turn_id, token))

    connection = check_database(home)
    try:
        stored = dict(connection.execute("SELECT id, content FROM turns").fetchall())
        unembedded = connection.execute(
            "SELECT COUNT(*) FROM turns t WHERE NOT EXISTS (SELECT 1 FROM turn_vectors v WHERE v.turn_seq = t.seq)"
        ).fetchone()[0]
    finally:
        connection.close()
    assert unembedded == 0, "a turn was committed without its vector"
    assert len(stored) >= len(acknowledged)

    with Memory(home, embedder=HashEmbedder()) as memory:
        for turn_id, token in acknowledged:
            assert token in memory.get(turn_id, user_id="crash").content
            found = [hit.id for hit in memory.search(token, user_id="crash", mode="fulltext", limit=5)]
            assert turn_id in found, (token, found)
        assert memory.info()["counts"]["turns"] == len(stored)


def test_two_writer_processes_lose_and_duplicate_nothing(home: Path) -> None:
    processes = [spawn(WRITER, str(home), name, "200") for name in ("A", "B")]
    try:
        for process in processes:
            wait_ready(process)
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        outputs = [finish(process) for process in processes]
    finally:
        kill_all(processes)
    assert all(output.split()[:2] == ["done", "5"] for output in outputs), outputs

    expected = {f"{name}-{index:04d}" for name in ("A", "B") for index in range(200)}
    connection = check_database(home)
    try:
        total, distinct = connection.execute("SELECT COUNT(*), COUNT(DISTINCT id) FROM turns").fetchone()
        ids = {row[0] for row in connection.execute("SELECT id FROM turns")}
        vectors = connection.execute("SELECT COUNT(*) FROM turn_vectors").fetchone()[0]
    finally:
        connection.close()
    assert (total, distinct, vectors) == (400, 400, 400)
    assert ids == expected
    with Memory(home, embedder=HashEmbedder()) as memory:
        assert memory.get("A-0199", user_id="shared").content.endswith("tagA0199")
        assert memory.get("B-0000", user_id="shared").content.endswith("tagB0000")


def test_concurrent_retries_of_the_same_messages_store_them_once(home: Path) -> None:
    processes = [spawn(SAME_MESSAGES, str(home), order) for order in ("batch,single", "single,batch")]
    try:
        for process in processes:
            wait_ready(process)
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        for process in processes:
            finish(process)
    finally:
        kill_all(processes)

    connection = check_database(home)
    try:
        rows = connection.execute("SELECT id, content FROM turns ORDER BY id").fetchall()
        vectors = connection.execute("SELECT COUNT(*) FROM turn_vectors").fetchone()[0]
    finally:
        connection.close()
    assert rows == [(f"msg-{i:03d}", f"retry message {i} token r{i:03d}") for i in range(50)]
    assert vectors == 50


def test_reader_process_sees_turns_written_after_it_opened(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder()) as writer:
        for index in range(5):
            writer.add(f"seed turn {index} catchup marker", user_id="live", id=f"seed-{index}")
        expected = [f"live-{index:02d}" for index in range(20)]
        reader = spawn(READER, str(home), ",".join(expected))
        try:
            assert wait_ready(reader).split() == ["ready", "5"]
            for index, turn_id in enumerate(expected):
                writer.add(f"writer turn {index} catchup marker", user_id="live", id=turn_id)
            output = finish(reader)
        finally:
            kill_all([reader])
    assert output.startswith("seen"), output


def test_vector_search_catches_up_with_another_instance(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder()) as first:
        for index in range(5):
            first.add(f"first instance note {index}", user_id="u", id=f"a-{index}")
        assert len(first.search("note", user_id="u", mode="vector", limit=50)) == 5  # index loaded now
        with Memory(home, embedder=HashEmbedder()) as second:
            for index in range(5):
                second.add(f"second instance remark {index} pelican", user_id="u", id=f"b-{index}")
        # The second instance committed to the store; the first one's in-memory index never saw
        # those writes and must catch up from the store before searching.
        hits = first.search("second instance remark pelican", user_id="u", mode="vector", limit=50)
        assert {f"b-{index}" for index in range(5)} <= {hit.id for hit in hits}
        assert {hit.id for hit in hits[:5]} == {f"b-{index}" for index in range(5)}
        assert {hit.id for hit in first.search("pelican", user_id="u", limit=5)} == {f"b-{i}" for i in range(5)}


def test_vector_search_catches_up_after_another_instance_deletes_the_newest_turn(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder()) as first:
        for index in range(20):
            first.add(f"old note {index}", user_id="u", id=f"old-{index}")
        first.search("old note", user_id="u", mode="vector")  # loads the index
        with Memory(home, embedder=HashEmbedder()) as second:
            second.delete("old-19", user_id="u")
            second.add("zebra giraffe savanna", user_id="u", id="new-0")
        # The deleted turn's vector must not answer for the new turn ...
        top = first.search("old note 19", user_id="u", mode="vector", limit=1)[0]
        assert top.content.startswith("old note"), f"a deleted turn's vector returned {top.id}: {top.content!r}"
        # ... and the new turn must be found by its own vector.
        assert first.search("zebra giraffe savanna", user_id="u", mode="vector", limit=1)[0].id == "new-0"
