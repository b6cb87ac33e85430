"""A real Redis for the tests: Debian's ``redis-server``, started once per session on 127.0.0.1 and a free port.

Each test that asks for ``redis_url`` gets the server emptied first. Tests that stop Redis
start a :class:`RedisServer` of their own. Where ``redis-server`` (or redis-py) is missing
the tests skip with the reason, except in CI (``CI=true``), where they fail: a backend that
silently stops being tested is worse than a red build. CI installs it with
``apt-get install -y redis-server`` (see ``.ci/run``); no system service is needed.
"""

from __future__ import annotations

import importlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, TracebackType
from typing import NoReturn

import pytest

START_TIMEOUT_SECONDS = 15.0


def _unavailable(reason: str, *, module_level: bool = False) -> NoReturn:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"Redis tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"Redis tests skipped: {reason}", allow_module_level=module_level)


def require_driver() -> ModuleType:
    """redis-py, for test modules that use it directly (skips them locally, fails them in CI, when missing)."""
    try:
        return importlib.import_module("redis")
    except ImportError:
        _unavailable("redis-py is not installed; run pip install -e '.[test]'", module_level=True)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class RedisServer:
    """One redis-server process with no persistence, in a temporary directory; ``stop`` and ``start`` again at will."""

    def __init__(self, port: int | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            _unavailable("redis-server is not installed; run apt-get install -y redis-server")
        try:
            import redis  # noqa: F401
        except ImportError:
            _unavailable("redis-py is not installed; run pip install -e '.[test]'")
        self.binary = binary
        self.port = port or free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="memstrata-redis-"))
        self._process: subprocess.Popen[bytes] | None = None

    def url(self, db: int = 0) -> str:
        """The ``working_url`` of one database of this server."""
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> RedisServer:
        """Start the server and wait until it answers."""
        import redis

        log = (self.directory / "redis.log").open("ab")
        self._process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
                "--logfile",
                "",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=1)
        try:
            while True:
                try:
                    client.ping()
                    return self
                except redis.ConnectionError:
                    if self._process.poll() is not None or time.monotonic() > deadline:
                        details = (self.directory / "redis.log").read_text(errors="replace")[-2000:]
                        self.stop()
                        _unavailable(f"redis-server did not start on port {self.port}:\n{details}")
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        """Stop the server (its data goes with it)."""
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
            self._process = None

    def flush(self) -> None:
        """Empty every database."""
        import redis

        with redis.Redis(host="127.0.0.1", port=self.port) as client:
            client.flushall()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A redis-server for the whole test session, stopped (and its directory deleted) at the end."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """The URL of database 0 of the session's Redis, emptied for this test."""
    redis_server.flush()
    return redis_server.url()
