"""A real uvicorn server on 127.0.0.1 (a free port, in a thread) over the test Memory, and two tenants' keys."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from memstrata import Memory
from memstrata.server.app import create_app
from memstrata.server.keys import ClosableKeyStore, create_key, open_key_store


@dataclass(frozen=True)
class Caller:
    """A tenant's API key as a client holds it."""

    tenant: str
    key_id: str
    secret: str

    @property
    def headers(self) -> dict[str, str]:
        """The Authorization header."""
        return {"Authorization": f"Bearer {self.secret}"}


class LiveServer:
    """uvicorn serving ``app`` on 127.0.0.1 in a thread, on a port the OS picked."""

    def __init__(self, app: FastAPI) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="test-uvicorn", daemon=True)
        self.url = ""

    def __enter__(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)


@pytest.fixture
def keys(memory: Memory) -> Iterator[ClosableKeyStore]:
    """The key store in the Memory's own database."""
    store = open_key_store(memory.settings.resolved_storage_url, memory.settings)
    yield store
    store.close()


def make_caller(keys: ClosableKeyStore, tenant: str, agent_id: str | None = None) -> Caller:
    """A fresh key for ``tenant`` (acting as ``agent_id`` in shared spaces)."""
    key, secret = create_key(keys, tenant=tenant, name=f"{tenant}-test", agent_id=agent_id)
    return Caller(tenant, key.id, secret)


@pytest.fixture
def acme(keys: ClosableKeyStore) -> Caller:
    """The tenant most tests act as."""
    return make_caller(keys, "acme")


@pytest.fixture
def globex(keys: ClosableKeyStore) -> Caller:
    """Another tenant, whose data acme must never see."""
    return make_caller(keys, "globex")


@pytest.fixture
def app(memory: Memory, keys: ClosableKeyStore) -> FastAPI:
    """The app over the test Memory."""
    return create_app(memory, keys=keys)


@pytest.fixture
def live(app: FastAPI) -> Iterator[LiveServer]:
    """The app served by uvicorn on 127.0.0.1."""
    with LiveServer(app) as server:
        yield server


@pytest.fixture
def client(live: LiveServer, acme: Caller) -> Iterator[httpx.Client]:
    """An HTTP client with acme's key."""
    with httpx.Client(base_url=live.url, headers=acme.headers, timeout=30) as http:
        yield http


@pytest.fixture
def anonymous(live: LiveServer) -> Iterator[httpx.Client]:
    """An HTTP client without a key."""
    with httpx.Client(base_url=live.url, timeout=30) as http:
        yield http
