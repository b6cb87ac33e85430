"""API keys: 401 without a known key (with WWW-Authenticate), 403 once revoked, anonymous only when asked for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from tests.server.conftest import Caller, LiveServer

from memstrata import Memory
from memstrata.config import load_settings
from memstrata.server.app import create_app
from memstrata.server.keys import ClosableKeyStore, revoke_key


def _routes(app: FastAPI) -> list[tuple[str, str]]:
    """(method, path with ids filled in) of every route but health."""
    return sorted(
        (method.upper(), path.replace("{memory_id}", "some-id"))
        for path, operations in app.openapi()["paths"].items()
        for method in operations
        if path != "/v1/health"
    )


def _assert_unauthorized(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"]["code"] == "unauthorized"


def test_every_route_but_health_needs_a_key(app: FastAPI, anonymous: httpx.Client) -> None:
    routes = _routes(app)
    assert len(routes) >= 18
    for method, path in routes:
        # A body that is also invalid still gets 401: who asks is checked first.
        _assert_unauthorized(anonymous.request(method, path, params={"user_id": "ana"}, json={}))


@pytest.mark.parametrize(
    "header",
    [
        "Bearer msk_not-a-real-key",
        "bearer msk_lowercase-scheme",
        "Bearer msk_one msk_two",
        "Bearer",
        "Basic YWxhZGRpbjpvcGVuc2VzYW1l",
        "msk_missing-scheme",
        "Bearer " + "x" * 5000,
    ],
)
def test_unknown_or_malformed_keys_get_401(anonymous: httpx.Client, header: str) -> None:
    _assert_unauthorized(anonymous.get("/v1/version", headers={"Authorization": header}))


def test_a_revoked_key_gets_403_at_once_and_other_keys_still_work(
    anonymous: httpx.Client, keys: ClosableKeyStore, acme: Caller, globex: Caller
) -> None:
    assert anonymous.get("/v1/version", headers=acme.headers).status_code == 200
    revoke_key(keys, acme.key_id)
    response = anonymous.get("/v1/version", headers=acme.headers)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert acme.key_id in response.json()["error"]["message"]
    assert anonymous.get("/v1/version", headers=globex.headers).json()["tenant"] == "globex"


def test_the_secret_is_case_sensitive(anonymous: httpx.Client, acme: Caller) -> None:
    flipped = acme.secret[:4] + acme.secret[4:].swapcase()
    _assert_unauthorized(anonymous.get("/v1/version", headers={"Authorization": f"Bearer {flipped}"}))


@pytest.fixture
def open_server(memory: Memory, keys: ClosableKeyStore, home: Path) -> Iterator[LiveServer]:
    """A server with server_allow_anonymous on."""
    settings = load_settings(home=home, server_allow_anonymous=True)
    with LiveServer(create_app(memory, settings=settings, keys=keys)) as server:
        yield server


def test_anonymous_mode_acts_as_tenant_local(open_server: LiveServer, memory: Memory, acme: Caller) -> None:
    with httpx.Client(base_url=open_server.url, timeout=30) as http:
        assert http.get("/v1/version").json()["tenant"] == "local"
        stored = http.post("/v1/memories", json={"messages": "hello", "user_id": "ana"}).json()["memories"][0]
        assert memory.get(f"local/{stored['id']}", user_id="local/ana").content == "hello"
        # A key, when sent, still has to be a real one, and still picks its own tenant.
        _assert_unauthorized(http.get("/v1/version", headers={"Authorization": "Bearer msk_wrong"}))
        assert http.get("/v1/version", headers=acme.headers).json()["tenant"] == "acme"
        assert http.get("/v1/memories", params={"user_id": "ana"}, headers=acme.headers).json()["memories"] == []


def test_anonymous_mode_is_off_by_default() -> None:
    assert load_settings().server_allow_anonymous is False
