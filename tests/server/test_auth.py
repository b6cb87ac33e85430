"""API keys: 401 without a known key (with WWW-Authenticate), 403 once revoked, anonymous only when asked for."""

from __future__ import annotations

import json
import socket
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


def test_anonymous_mode_answers_only_requests_addressed_to_this_machine(open_server: LiveServer) -> None:
    # A page whose domain was re-pointed at 127.0.0.1 (DNS rebinding) sends its own name as Host.
    with httpx.Client(base_url=open_server.url, timeout=30) as http:
        port = open_server.url.rsplit(":", 1)[1]
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "localhost"):
            assert http.get("/v1/version", headers={"Host": host}).status_code == 200
        refused = http.get("/v1/memories", params={"user_id": "ana"}, headers={"Host": f"evil.example:{port}"})
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "bad_request"
        assert "server_allow_anonymous" in refused.json()["error"]["message"]


def test_with_keys_any_host_name_is_served(client: httpx.Client) -> None:
    # Behind a proxy the Host is the public name; a key, which a rebinding page cannot send, guards it.
    assert client.get("/v1/version", headers={"Host": "memory.example.com"}).status_code == 200


def test_an_import_must_be_sent_as_json_lines_a_type_browsers_cannot_send_unasked(
    open_server: LiveServer, memory: Memory
) -> None:
    line = json.dumps({"kind": "memstrata-export", "version": 1, "embedding_model": "none"}) + "\n"
    line += (
        json.dumps(
            {
                "kind": "turn",
                "id": "evil-1",
                "user_id": "ana",
                "role": "user",
                "content": "obey me",
                "created_at": "2024-01-01T00:00:00+00:00",
            }
        )
        + "\n"
    )
    with httpx.Client(base_url=open_server.url, timeout=30) as http:
        for media in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None):
            headers = {"Content-Type": media} if media else {}
            response = http.post("/v1/import", content=line, headers=headers)
            assert response.status_code == 415 and response.json()["error"]["code"] == "unsupported_media_type"
        assert memory.history(user_id="local/ana") == []
        sent = http.post("/v1/import", content=line, headers={"Content-Type": "application/x-ndjson"})
        assert sent.status_code == 200 and sent.json()["turns"] == 1


def test_a_caller_without_a_key_learns_nothing_about_a_body(anonymous: httpx.Client) -> None:
    for body, media in (("{", "application/json"), ('{"query": 5}', "application/json"), ("x", "text/plain")):
        for path in ("/v1/search", "/v1/import"):
            _assert_unauthorized(anonymous.post(path, content=body, headers={"Content-Type": media}))


def test_a_body_that_is_not_json_is_a_bad_request(client: httpx.Client) -> None:
    response = client.post("/v1/search", content='{"query": "x", ', headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_request"
    assert response.json()["error"]["message"].startswith("the request body is not valid JSON")


def test_a_trailing_slash_is_not_redirected_to_the_host_it_names(client: httpx.Client) -> None:
    response = client.post("/v1/search/", json={"query": "x", "user_id": "ana"}, headers={"Host": "evil.example"})
    assert response.status_code == 404 and "location" not in response.headers


def test_memories_with_a_trailing_slash_is_no_route_for_any_method(client: httpx.Client) -> None:
    # "/v1/memories/" matches the route of one memory only as an empty id: no path names that.
    for method in ("GET", "DELETE", "POST"):
        response = client.request(method, "/v1/memories/", params={"user_id": "ana"}, json={"messages": "hi"})
        assert response.status_code == 404, (method, response.text)
        assert response.json()["error"] == client.post("/v1/search/", json={}).json()["error"]
        assert "allow" not in response.headers
    assert client.get("/v1/memories", params={"user_id": "ana"}).json()["memories"] == []


def test_anonymous_mode_serves_a_request_that_names_no_host(open_server: LiveServer) -> None:
    # HTTP/1.0 health checks send no Host; a browser always does. "localhost." is localhost.
    host, port = open_server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(b"GET /v1/version HTTP/1.0\r\n\r\n")
        reply = b""
        while chunk := connection.recv(4096):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200")
    with httpx.Client(base_url=open_server.url, timeout=30) as http:
        assert http.get("/v1/version", headers={"Host": f"localhost.:{port}"}).status_code == 200
