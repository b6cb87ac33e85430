"""Load on the real REST server: concurrent clients add and search, then every acknowledged add is checked.

The server runs as ``memstrata serve`` in a subprocess on 127.0.0.1 with its own data
directory; with ``kill`` it is SIGKILLed halfway through and started again on the same
data, and the check afterwards shows whether any acknowledged write was lost.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
from rich.console import Console

from memstrata.bench.datasets import synthetic_texts
from memstrata.bench.ingest_search import machine, percentile
from memstrata.errors import StorageError

HOST = "127.0.0.1"
START_TIMEOUT_SECONDS = 120.0
TENANT = "bench"


@dataclass(kw_only=True, frozen=True, slots=True)
class ServeBenchOptions:
    """What to run; ``embedder=None`` means the server's own setting."""

    clients: int = 4
    seconds: float = 10.0
    max_adds: int | None = None
    users: int = 8
    kill: bool = False
    embedder: str | None = None
    home: Path | None = None


@dataclass
class _Tally:
    """What one kind of request did, across clients."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0

    def summary(self, seconds: float) -> dict[str, float | int]:
        done = len(self.latencies_ms)
        return {
            "ok": done,
            "errors": self.errors,
            "per_second": done / seconds if seconds else 0.0,
            "p50_ms": percentile(self.latencies_ms, 0.50) if done else 0.0,
            "p99_ms": percentile(self.latencies_ms, 0.99) if done else 0.0,
        }


class ServerProcess:
    """``memstrata serve`` in a subprocess, on a fixed port so a restart keeps the address."""

    def __init__(self, home: Path, port: int, embedder: str | None) -> None:
        self.home = home
        self.port = port
        self.url = f"http://{HOST}:{port}"
        self._environment = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
        self._environment["MEMSTRATA_HOME"] = str(home)
        if embedder is not None:
            self._environment["MEMSTRATA_EMBEDDER"] = embedder
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def memstrata(self, *arguments: str) -> str:
        """Run another memstrata command on the same data directory; its stdout."""
        done = subprocess.run(
            [sys.executable, "-m", "memstrata", *arguments],
            env=self._environment,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_SECONDS,
            check=False,
        )
        if done.returncode != 0:
            raise StorageError(f"memstrata {' '.join(arguments)} failed: {done.stderr.strip()}")
        return done.stdout

    def start(self) -> float:
        """Start the server and wait until it answers; seconds it took."""
        began = time.perf_counter()
        self._log = (self.home / "server.log").open("ab")
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memstrata",
                "serve",
                "--host",
                HOST,
                "--port",
                str(self.port),
                "--log-level",
                "warning",
            ],
            env=self._environment,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = began + START_TIMEOUT_SECONDS
        while time.perf_counter() < deadline:
            if self._process.poll() is not None:
                raise StorageError(f"the server exited with {self._process.returncode}; see {self.home / 'server.log'}")
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1.0).status_code == 200:
                    return time.perf_counter() - began
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.kill()
        raise StorageError(f"the server did not answer within {START_TIMEOUT_SECONDS:.0f} s")

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash or an OOM kill."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(timeout=30)
        self._close_log()

    def stop(self) -> None:
        """SIGTERM and wait for a clean shutdown (SIGKILL after 30 s)."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def run_serve_bench(options: ServeBenchOptions, console: Console | None = None) -> dict[str, Any]:
    """Start the server, load it for ``seconds`` (or ``max_adds`` per client), verify, report."""
    if options.clients < 1 or options.seconds <= 0 or options.users < 1:
        raise ValueError("clients and users must be at least 1 and seconds above 0")
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-serve-") as scratch:
        home = options.home or Path(scratch)
        home.mkdir(parents=True, exist_ok=True)
        server = ServerProcess(home, free_port(), options.embedder)
        created = json.loads(server.memstrata("keys", "create", "--tenant", TENANT, "--name", "bench", "--json"))
        headers = {"Authorization": f"Bearer {created['secret']}"}
        try:
            startup = server.start()
            _say(
                console,
                f"server up on {server.url} in {startup:.1f} s; {options.clients} clients for {options.seconds:g} s",
            )
            return _load_and_verify(server, headers, options, startup, console)
        finally:
            server.stop()


def _load_and_verify(
    server: ServerProcess, headers: dict[str, str], options: ServeBenchOptions, startup: float, console: Console | None
) -> dict[str, Any]:
    adds, searches = _Tally(), _Tally()
    acknowledged: list[tuple[str, str]] = []
    lock = threading.Lock()
    began = time.perf_counter()
    deadline = began + options.seconds
    restart: dict[str, float] = {}

    def client(number: int) -> None:
        texts = synthetic_texts(10**9, seed=number)
        with httpx.Client(base_url=server.url, headers=headers, timeout=60.0) as http:
            sent = 0
            while time.perf_counter() < deadline and (options.max_adds is None or sent < options.max_adds):
                sent += 1
                user, memory_id, text = f"user-{sent % options.users}", f"c{number}-{sent}", next(texts)
                body = {"messages": text, "user_id": user, "id": memory_id}
                if _timed(http, "POST", "/v1/memories", body, expected=201, tally=adds, lock=lock):
                    with lock:
                        acknowledged.append((user, memory_id))
                _timed(
                    http,
                    "POST",
                    "/v1/search",
                    {"query": text, "user_id": user, "limit": 5},
                    expected=200,
                    tally=searches,
                    lock=lock,
                )

    with ThreadPoolExecutor(max_workers=options.clients) as pool:
        running = [pool.submit(client, number) for number in range(options.clients)]
        if options.kill:
            restart = _kill_and_restart(server, began + options.seconds / 2, console)
        for future in running:
            future.result()
    elapsed = time.perf_counter() - began
    missing = _verify(server, headers, acknowledged, options.clients)
    _say(console, f"{len(acknowledged)} acknowledged adds, {len(missing)} missing afterwards")
    return {
        "benchmark": "serve",
        "clients": options.clients,
        "seconds": round(elapsed, 3),
        "users": options.users,
        "embedder": options.embedder or "server default",
        "startup_seconds": round(startup, 3),
        "add": adds.summary(elapsed),
        "search": searches.summary(elapsed),
        "kill": restart or None,
        "verified": {
            "acknowledged": len(acknowledged),
            "found": len(acknowledged) - len(missing),
            "missing": len(missing),
            "missing_ids": [memory_id for _, memory_id in missing[:20]],
        },
        "machine": machine(),
    }


def _timed(
    http: httpx.Client,
    method: str,
    path: str,
    body: dict[str, Any],
    *,
    expected: int,
    tally: _Tally,
    lock: threading.Lock,
) -> bool:
    """One request, timed; True when it got the expected status."""
    began = time.perf_counter()
    try:
        response = http.request(method, path, json=body)
    except httpx.TransportError:
        with lock:
            tally.errors += 1
        time.sleep(0.05)  # the server is down (being restarted): do not spin
        return False
    took = (time.perf_counter() - began) * 1000
    with lock:
        if response.status_code == expected:
            tally.latencies_ms.append(took)
        else:
            tally.errors += 1
    return response.status_code == expected


def _kill_and_restart(server: ServerProcess, when: float, console: Console | None) -> dict[str, float]:
    time.sleep(max(0.0, when - time.perf_counter()))
    killed = time.perf_counter()
    server.kill()
    _say(console, "server SIGKILLed mid-load; restarting it on the same data")
    startup = server.start()
    return {"down_seconds": round(time.perf_counter() - killed, 3), "restart_seconds": round(startup, 3)}


def _verify(
    server: ServerProcess, headers: dict[str, str], acknowledged: list[tuple[str, str]], clients: int
) -> list[tuple[str, str]]:
    """Acknowledged adds the server cannot find by id now."""

    def missing(share: list[tuple[str, str]]) -> list[tuple[str, str]]:
        with httpx.Client(base_url=server.url, headers=headers, timeout=60.0) as http:
            return [
                (user, memory_id)
                for user, memory_id in share
                if http.get(f"/v1/memories/{memory_id}", params={"user_id": user}).status_code != 200
            ]

    shares = [acknowledged[start::clients] for start in range(clients)]
    with ThreadPoolExecutor(max_workers=clients) as pool:
        return [item for found in pool.map(missing, shares) for item in found]


def _say(console: Console | None, message: str) -> None:
    if console is not None:
        console.print(message, highlight=False)
