"""Errors map to HTTP once: every memstrata error has a status, 5xx bodies say nothing internal, 413 before parsing."""

from __future__ import annotations

import inspect
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from tests.server.conftest import Caller, LiveServer

from memstrata import Memory, errors
from memstrata.config import load_settings
from memstrata.llms.none import NoLLM
from memstrata.models import KeyRole
from memstrata.server.app import create_app
from memstrata.server.errors import STATUSES, status_of
from memstrata.server.keys import ClosableKeyStore, create_key, revoke_key

ERROR_CLASSES = [
    value
    for _, value in inspect.getmembers(errors, inspect.isclass)
    if issubclass(value, errors.MemstrataError) and value is not errors.MemstrataError
]
EXPECTED = {
    errors.InvalidInput: 422,
    errors.IdConflict: 409,
    errors.NotFound: 404,
    errors.AccessDenied: 403,
    errors.ConfigError: 503,
    errors.MissingDependency: 503,
    errors.StorageError: 503,
    errors.SchemaTooNew: 503,
    errors.EmbeddingError: 503,
    errors.ProviderError: 502,
}


@pytest.mark.parametrize("kind", ERROR_CLASSES, ids=lambda kind: kind.__name__)
def test_every_error_class_has_a_status(kind: type[errors.MemstrataError]) -> None:
    assert any(issubclass(kind, mapped) for mapped, *_ in STATUSES), f"{kind.__name__} has no HTTP status"
    status, code, _ = status_of(kind("boom"))
    assert status != 500
    if kind in EXPECTED:
        assert status == EXPECTED[kind]
    assert code and code.isidentifier()


def test_statuses_are_most_specific_first() -> None:
    for index, (earlier, *_) in enumerate(STATUSES):
        for later, *_ in STATUSES[index + 1 :]:
            assert not issubclass(later, earlier), f"{later.__name__} is shadowed by {earlier.__name__}"


def test_a_feature_that_needs_an_llm_is_501_not_503() -> None:
    with pytest.raises(errors.LLMRequired) as raised:
        NoLLM().complete("summarise this")
    assert isinstance(raised.value, errors.ConfigError)  # callers catching ConfigError still do
    status, code, message = status_of(raised.value)
    assert (status, code) == (501, "llm_required")
    assert "LLM" in message
    assert status_of(errors.ConfigError("bad setting"))[0] == 503


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (errors.StorageError, 503),
        (errors.ConfigError, 503),
        (errors.EmbeddingError, 503),
        (errors.ProviderError, 502),
        (errors.SchemaTooNew, 503),
        (errors.MissingDependency, 503),
    ],
)
def test_server_errors_hide_their_details(error: type[errors.MemstrataError], expected: int) -> None:
    status, _, message = status_of(error("cannot open the store at /srv/secret/path.db with key sk-123"))
    assert status == expected
    assert "/srv/secret" not in message and "sk-123" not in message


@pytest.fixture
def failing(app: FastAPI, acme: Caller) -> Iterator[TestClient]:
    """The app with extra routes that fail in every way a route can."""

    def crash() -> None:
        raise RuntimeError("very secret internal detail at /srv/data")

    def needs_llm() -> None:
        NoLLM().complete("anything")

    def provider_down() -> None:
        raise errors.ProviderError("upstream said 500")

    app.add_api_route("/test/crash", crash)
    app.add_api_route("/test/llm", needs_llm)
    app.add_api_route("/test/provider", provider_down)
    with TestClient(app, raise_server_exceptions=False, headers=acme.headers) as http:
        yield http


def test_an_unexpected_error_is_a_generic_500(failing: TestClient) -> None:
    response = failing.get("/test/crash")
    assert response.status_code == 500
    assert response.json() == {"error": {"code": "internal_error", "message": "internal server error"}}
    for leak in ("Traceback", "RuntimeError", "secret", "/srv"):
        assert leak not in response.text


def test_llm_and_provider_failures(failing: TestClient) -> None:
    assert failing.get("/test/llm").status_code == 501
    provider = failing.get("/test/provider")
    assert provider.status_code == 502
    assert provider.json()["error"]["code"] == "provider_error"


def test_a_closed_store_is_503_without_details(client: httpx.Client, memory: Memory) -> None:
    memory.close()
    response = client.post("/v1/search", json={"query": "anything", "user_id": "ana"})
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "storage_unavailable"
    assert "closed" not in response.text


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [("GET", "/v1/nowhere", 404, "not_found"), ("PUT", "/v1/search", 405, "method_not_allowed")],
)
def test_unknown_routes_and_methods_use_the_error_shape(
    client: httpx.Client, method: str, path: str, status: int, code: str
) -> None:
    response = client.request(method, path)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


def test_validation_errors_name_each_field(client: httpx.Client) -> None:
    response = client.post("/v1/search", json={"query": 5, "limit": "many", "colour": "blue"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    locations = {detail["location"] for detail in error["details"]}
    assert {"body.query", "body.limit", "body.colour"} <= locations
    assert "body.query" in error["message"]


def test_a_body_naming_no_memory_says_to_name_a_user_or_a_space(client: httpx.Client) -> None:
    for body in ({"query": "x"}, {"query": "x", "user_id": "ana", "space": "team"}):
        response = client.post("/v1/search", json=body)
        assert response.status_code == 422
        assert "user_id" in response.json()["error"]["message"] and "space" in response.json()["error"]["message"]


def test_core_validation_errors_say_how_to_fix(client: httpx.Client) -> None:
    response = client.post("/v1/memories", json={"messages": "   ", "user_id": "ana"})
    assert response.status_code == 422
    assert response.json()["error"] == {
        "code": "invalid_input",
        "message": "message must not be empty or only whitespace",
    }


# -- body size -----------------------------------------------------------------------------

LIMIT = 2000


@pytest.fixture
def small(memory: Memory, keys: ClosableKeyStore, home: Path, acme: Caller) -> Iterator[httpx.Client]:
    """A live server accepting bodies of at most LIMIT bytes."""
    settings = load_settings(home=home, server_max_body_bytes=LIMIT)
    with (
        LiveServer(create_app(memory, settings=settings, keys=keys)) as server,
        httpx.Client(base_url=server.url, headers=acme.headers, timeout=30) as http,
    ):
        yield http


def _body(size: int) -> bytes:
    prefix, suffix = b'{"user_id": "ana", "messages": "', b'"}'
    return prefix + b"a" * (size - len(prefix) - len(suffix)) + suffix


def test_a_body_at_the_limit_is_accepted(small: httpx.Client) -> None:
    response = small.post("/v1/memories", content=_body(LIMIT), headers={"Content-Type": "application/json"})
    assert response.status_code == 201


def test_a_declared_length_over_the_limit_is_413(small: httpx.Client, memory: Memory) -> None:
    response = small.post("/v1/memories", content=_body(LIMIT + 1), headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert memory.info()["counts"]["turns"] == 0


def test_a_chunked_body_over_the_limit_is_413(small: httpx.Client, memory: Memory) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"user_id": "ana", "messages": "'
        for _ in range(10):
            yield b"a" * 500
        yield b'"}'

    response = small.post("/v1/memories", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert memory.info()["counts"]["turns"] == 0


def test_a_huge_body_is_refused_without_reading_it(client: httpx.Client, memory: Memory) -> None:
    response = client.post("/v1/import", content=b"x" * 20_000_000, headers={"Content-Type": "application/x-ndjson"})
    assert response.status_code == 413
    assert memory.info()["counts"]["turns"] == 0


# -- the key before the body's size ------------------------------------------------------------


@pytest.fixture
def small_server(memory: Memory, keys: ClosableKeyStore, home: Path) -> Iterator[LiveServer]:
    """A live server accepting bodies of at most LIMIT bytes, for callers with and without keys."""
    settings = load_settings(home=home, server_max_body_bytes=LIMIT)
    with LiveServer(create_app(memory, settings=settings, keys=keys)) as server:
        yield server


@pytest.mark.parametrize("authorization", [None, "Bearer ms_not-a-key", "Basic YW5hOmFuYQ=="])
def test_a_caller_without_a_valid_key_gets_401_not_413_for_an_oversized_body(
    small_server: LiveServer, memory: Memory, authorization: str | None
) -> None:
    headers = {"Content-Type": "application/json"} | ({"Authorization": authorization} if authorization else {})
    with httpx.Client(base_url=small_server.url, timeout=30) as http:
        declared = http.post("/v1/memories", content=_body(LIMIT + 1), headers=headers)
        chunked = http.post("/v1/memories", content=iter([_body(LIMIT + 1)[:1000]] * 3), headers=headers)
    assert [declared.status_code, chunked.status_code] == [401, 401]
    assert declared.json()["error"]["code"] == "unauthorized"
    assert declared.headers["www-authenticate"] == "Bearer"
    assert memory.info()["counts"]["turns"] == 0


def test_a_revoked_key_gets_403_not_413_for_an_oversized_body(
    small_server: LiveServer, keys: ClosableKeyStore, acme: Caller
) -> None:
    revoke_key(keys, acme.key_id)
    with httpx.Client(base_url=small_server.url, headers=acme.headers, timeout=30) as http:
        response = http.post("/v1/memories", content=_body(LIMIT + 1), headers={"Content-Type": "application/json"})
    assert response.status_code == 403


def test_an_unkeyed_oversized_body_is_refused_before_a_byte_of_it_is_read(small_server: LiveServer) -> None:
    host, port = small_server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        # Ten megabytes announced, none sent: the answer comes without waiting for them.
        connection.sendall(
            b"POST /v1/memories HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 10000000\r\n\r\n"
        )
        answer = connection.recv(65536)
    assert answer.startswith(b"HTTP/1.1 401 ")


def test_a_keyed_oversized_body_still_gets_413(small_server: LiveServer, acme: Caller) -> None:
    with httpx.Client(base_url=small_server.url, headers=acme.headers, timeout=30) as http:
        response = http.post("/v1/memories", content=_body(LIMIT + 1), headers={"Content-Type": "application/json"})
    assert response.status_code == 413


def test_an_anonymous_server_gives_an_unkeyed_oversized_body_413_and_a_bad_key_401(
    memory: Memory, keys: ClosableKeyStore, home: Path
) -> None:
    settings = load_settings(home=home, server_max_body_bytes=LIMIT, server_allow_anonymous=True)
    with (
        LiveServer(create_app(memory, settings=settings, keys=keys)) as server,
        httpx.Client(base_url=server.url, timeout=30) as http,
    ):
        headers = {"Content-Type": "application/json"}
        unkeyed = http.post("/v1/memories", content=_body(LIMIT + 1), headers=headers)
        bad_key = http.post(
            "/v1/memories", content=_body(LIMIT + 1), headers=headers | {"Authorization": "Bearer ms_not-a-key"}
        )
    assert [unkeyed.status_code, bad_key.status_code] == [413, 401]


@pytest.mark.parametrize(("path", "status"), [("/v1/memories", 403), ("/v1/search", 413)])
def test_an_oversized_body_gets_the_403_its_keys_role_would_get_first(
    small_server: LiveServer, keys: ClosableKeyStore, memory: Memory, path: str, status: int
) -> None:
    _, secret = create_key(keys, tenant="acme", name="reader", role=KeyRole.READ)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {secret}"}
    with httpx.Client(base_url=small_server.url, timeout=30) as http:
        response = http.post(path, content=_body(LIMIT + 1), headers=headers)
    assert response.status_code == status  # a read key may search (then the size counts), never add
    if status == 403:
        assert response.json()["error"]["code"] == "access_denied"
        assert "POST /v1/memories needs the write role" in response.json()["error"]["message"]
    assert memory.info()["counts"]["turns"] == 0
