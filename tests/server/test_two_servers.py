"""Two ``memstrata serve`` processes on one store (a SQLite data dir, or one PostgreSQL database).

Clients write to both servers at once, retry the same message id on the other server
(one after the other, and racing), then read everything back through both: every
acknowledged add is there exactly once, and no history lists a memory twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from memstrata.bench.serve import free_port

HOST = "127.0.0.1"
CLIENTS = 4  # in pairs: the two clients of a pair race on the same ids
ADDS_PER_CLIENT = 24
RACES_PER_PAIR = 8
USERS = 3
PAGE = 7  # small, so history is read across several pages


class Server:
    """``memstrata serve`` in a subprocess on a free port, its output in a log file."""

    def __init__(self, environment: dict[str, str], log: Path) -> None:
        self.url = f"http://{HOST}:{free_port()}"
        port = self.url.rsplit(":", 1)[1]
        self._log: IO[bytes] = log.open("wb")
        self.log = log
        self._process = subprocess.Popen(
            [sys.executable, "-m", "memstrata", "serve", "--host", HOST, "--port", port, "--log-level", "warning"],
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait_until_up(self, seconds: float = 60.0) -> None:
        """Poll /v1/health until it answers; fail with the log if the process dies or stays silent."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                pytest.fail(f"the server exited with {self._process.returncode}:\n{self.log.read_text()}")
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        pytest.fail(f"the server did not answer within {seconds:.0f} s:\n{self.log.read_text()}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited within 30 s."""
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=30)
        self._log.close()


@pytest.fixture(params=["sqlite", "postgres"])
def environment(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The servers' environment: one data dir, the hash embedder, and for postgres one shared database."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
    environment["MEMSTRATA_HOME"] = str(tmp_path / "home")
    environment["MEMSTRATA_EMBEDDER"] = "hash"
    if request.param == "postgres":
        environment["MEMSTRATA_STORAGE_URL"] = request.getfixturevalue("migrated_postgres_url")
    return environment


@pytest.fixture
def secret(environment: dict[str, str]) -> str:
    """One API key, made with ``memstrata keys create`` in the servers' store."""
    done = subprocess.run(
        [sys.executable, "-m", "memstrata", "keys", "create", "--tenant", "acme", "--json"],
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    created: str = json.loads(done.stdout)["secret"]
    return created


@pytest.fixture
def servers(environment: dict[str, str], secret: str, tmp_path: Path) -> Iterator[tuple[Server, Server]]:
    """Two servers on the same store, started side by side."""
    started = [Server(environment, tmp_path / f"server-{number}.log") for number in (1, 2)]
    try:
        for server in started:
            server.wait_until_up()
        yield started[0], started[1]
    finally:
        for server in started:
            server.stop()


class Writes:
    """What the clients did: acknowledged ids per user, and every unexpected answer."""

    def __init__(self) -> None:
        self.acknowledged: dict[str, set[str]] = {}
        self.failures: list[str] = []
        self.acknowledgements = 0
        self._lock = threading.Lock()

    def add(self, http: httpx.Client, server: Server, body: dict[str, Any]) -> None:
        """POST one message; record the acknowledgement (201 with the same id and text) or the failure."""
        try:
            response = http.post(f"{server.url}/v1/memories", json=body)
        except httpx.TransportError as exc:
            with self._lock:
                self.failures.append(f"{body['id']} → {server.url}: {exc!r}")
            return
        stored = response.json().get("memories") if response.status_code == 201 else None
        with self._lock:
            if stored and [(m["id"], m["content"], m["user_id"]) for m in stored] == [
                (body["id"], body["messages"], body["user_id"])
            ]:
                self.acknowledged.setdefault(body["user_id"], set()).add(body["id"])
                self.acknowledgements += 1
            else:
                self.failures.append(f"{body['id']} → {server.url}: {response.status_code} {response.text[:300]}")


def _body(memory_id: str, number: int) -> dict[str, Any]:
    return {
        "messages": f"note {memory_id}: the tram to Belém leaves at {number % 24}:15",
        "user_id": f"u{number % USERS}",
        "id": memory_id,
    }


def _client(
    number: int, servers: tuple[Server, Server], headers: dict[str, str], writes: Writes, race: threading.Barrier
) -> None:
    """Adds to both servers alternately, retrying every third on the other; then races its twin on shared ids."""
    with httpx.Client(headers=headers, timeout=60.0) as http:
        for sent in range(ADDS_PER_CLIENT):
            first, other = servers[(number + sent) % 2], servers[(number + sent + 1) % 2]
            body = _body(f"c{number}-{sent}", sent)
            writes.add(http, first, body)
            if sent % 3 == 0:  # the client did not see the answer: it retries on the other server
                writes.add(http, other, body)
        for round_ in range(RACES_PER_PAIR):
            body = _body(f"race{number // 2}-{round_}", round_)
            race.wait(timeout=60)  # both twins send the same message at once, each to its own server
            writes.add(http, servers[number % 2], body)


def _history_ids(http: httpx.Client, server: Server, user: str) -> list[str]:
    """Every memory id of ``user``'s history, read a page at a time."""
    ids: list[str] = []
    offset: int | None = 0
    while offset is not None:
        response = http.get(f"{server.url}/v1/memories", params={"user_id": user, "limit": PAGE, "offset": offset})
        assert response.status_code == 200, response.text
        page = response.json()
        ids.extend(memory["id"] for memory in page["memories"])
        offset = page["next_offset"]
    return ids


@pytest.mark.slow
def test_two_servers_on_one_store_lose_and_duplicate_no_write(servers: tuple[Server, Server], secret: str) -> None:
    headers = {"Authorization": f"Bearer {secret}"}
    writes = Writes()
    barriers = [threading.Barrier(2) for _ in range(CLIENTS // 2)]
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        running = [
            pool.submit(_client, number, servers, headers, writes, barriers[number // 2]) for number in range(CLIENTS)
        ]
        for future in running:
            future.result()

    assert writes.failures == []
    retries = CLIENTS * len(range(0, ADDS_PER_CLIENT, 3)) + CLIENTS // 2 * RACES_PER_PAIR
    unique = CLIENTS * ADDS_PER_CLIENT + CLIENTS // 2 * RACES_PER_PAIR
    assert writes.acknowledgements == unique + retries
    assert sum(len(ids) for ids in writes.acknowledged.values()) == unique

    with httpx.Client(headers=headers, timeout=60.0) as http:
        for server in servers:
            for user, ids in writes.acknowledged.items():
                history = _history_ids(http, server, user)
                assert len(history) == len(set(history)), f"{server.url}: {user}'s history repeats a memory"
                assert set(history) == ids, f"{server.url}: {user}'s history differs from what was acknowledged"
                for memory_id in ids:
                    found = http.get(f"{server.url}/v1/memories/{memory_id}", params={"user_id": user})
                    assert found.status_code == 200, f"{server.url}: {memory_id} {found.text}"
                    assert found.json()["id"] == memory_id
    for server in servers:
        assert "Traceback" not in server.log.read_text(), server.log.read_text()
