"""The inspector over HTTP: its page and assets (with their CSP), the routes it reads, and ``memstrata ui``'s secret."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from importlib import resources

import httpx
import pytest
from fastapi import FastAPI
from tests.server.conftest import Caller, LiveServer

from memstrata import Memory
from memstrata.server import inspector
from memstrata.server.app import create_app
from memstrata.server.keys import ClosableKeyStore, new_secret
from memstrata.server.routes import users as users_routes

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ASSETS = resources.files("memstrata.server.inspector").joinpath("assets")
#: What would put data into markup, or run text as code: memory text is untrusted.
UNSAFE_SINKS = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|srcdoc")


def _assert_locked_down(response: httpx.Response) -> None:
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "script-src 'self'" in policy and "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy
    assert "frame-ancestors 'none'" in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"


def test_the_page_is_served_without_a_key_and_locked_down(anonymous: httpx.Client) -> None:
    page = anonymous.get("/ui")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "<title>memstrata inspector</title>" in page.text
    _assert_locked_down(page)


@pytest.mark.parametrize("name", [name for name in inspector.asset_names() if name != inspector.PAGE])
def test_every_asset_is_served_with_its_type_and_policy(anonymous: httpx.Client, name: str) -> None:
    response = anonymous.get(f"/ui/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"] == inspector.MEDIA_TYPES[name[name.rfind(".") :]]
    assert response.content == ASSETS.joinpath(name).read_bytes()
    _assert_locked_down(response)


def test_the_assets_include_the_page_scripts_and_style() -> None:
    assert {"index.html", "inspector.js", "inspector.css", "graph.js"} <= set(inspector.asset_names())


@pytest.mark.parametrize(
    "path",
    [
        "/ui/",
        "/ui/index.html",
        "/ui/nope.js",
        "/ui/..%2F__init__.py",
        "/ui/%2e%2e/app.py",
        "/ui/assets",
        "/ui/" + "a" * 300,
    ],
)
def test_nothing_but_the_shipped_assets_is_served(anonymous: httpx.Client, path: str) -> None:
    response = anonymous.get(path)
    assert response.status_code == 404, response.text
    assert "import" not in response.text


def test_the_page_loads_nothing_from_elsewhere() -> None:
    for name in inspector.asset_names():
        text = ASSETS.joinpath(name).read_text(encoding="utf-8")
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", ""), name
        assert "https://" not in text and "//cdn" not in text, name
    page = ASSETS.joinpath(inspector.PAGE).read_text(encoding="utf-8")
    references = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert references and all(ref.startswith("ui/") or ref.startswith("data:") for ref in references), references
    assert "<script>" not in page and re.search(r"\son[a-z]+=", page) is None, "no inline code"


def test_the_scripts_never_turn_data_into_markup() -> None:
    for name in inspector.asset_names():
        if name.endswith(".js"):
            assert UNSAFE_SINKS.search(ASSETS.joinpath(name).read_text(encoding="utf-8")) is None, name


# -- /v1/users and /v1/sessions -----------------------------------------------------------------


def _add(http: httpx.Client, user: str, session: str | None, content: str, minutes: int) -> None:
    body: dict[str, object] = {"messages": content, "user_id": user, "timestamp": _at(minutes)}
    if session is not None:
        body["session_id"] = session
    assert http.post("/v1/memories", json=body).status_code == 201


def _at(minutes: int) -> str:
    return (START + timedelta(minutes=minutes)).isoformat()


@pytest.fixture
def other(live: LiveServer, globex: Caller) -> Iterator[httpx.Client]:
    """globex's client."""
    with httpx.Client(base_url=live.url, headers=globex.headers, timeout=30) as http:
        yield http


def test_users_lists_the_tenants_own_users_only(client: httpx.Client, other: httpx.Client, memory: Memory) -> None:
    _add(client, "ana", "s1", "I live in Lisbon", 0)
    _add(client, "bob", None, "I like tea", 1)
    _add(other, "carol", "s9", "GLOBEX-SECRET", 2)
    _add(other, "ana", "s9", "GLOBEX-SECRET too", 3)
    memory.add("stored by the library, in no tenant", user_id="dave")
    assert client.get("/v1/users").json() == {"users": ["ana", "bob"]}
    assert client.get("/v1/users", params={"prefix": "b"}).json() == {"users": ["bob"]}
    assert client.get("/v1/users", params={"prefix": "carol"}).json() == {"users": []}
    assert client.get("/v1/users", params={"prefix": "../globex/"}).json() == {"users": []}
    assert other.get("/v1/users").json() == {"users": ["ana", "carol"]}


def test_sessions_counts_turns_per_session_most_recent_first(client: httpx.Client, other: httpx.Client) -> None:
    _add(client, "ana", "monday", "one", 0)
    _add(client, "ana", "monday", "two", 1)
    _add(client, "ana", None, "no session", 2)
    _add(client, "ana", "thursday", "three", 60)
    _add(other, "ana", "globex-session", "GLOBEX-SECRET", 90)
    answer = client.get("/v1/sessions", params={"user_id": "ana"}).json()
    assert answer["is_complete"] is True and (answer["user_id"], answer["space"]) == ("ana", None)
    assert [(one["session_id"], one["turns"]) for one in answer["sessions"]] == [
        ("thursday", 1),
        (None, 1),
        ("monday", 2),
    ]
    monday = answer["sessions"][2]
    assert (monday["first_at"], monday["last_at"]) == (_at(0).replace("+00:00", "Z"), _at(1).replace("+00:00", "Z"))
    assert client.get("/v1/sessions", params={"user_id": "nobody"}).json()["sessions"] == []


def test_sessions_says_when_it_counted_only_the_newest_turns(
    client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    for minute in range(5):
        _add(client, "ana", f"s{minute}", f"note {minute}", minute)
    monkeypatch.setattr(users_routes, "SCAN_PAGE", 2)
    monkeypatch.setattr(users_routes, "MAX_SCANNED", 4)
    answer = client.get("/v1/sessions", params={"user_id": "ana"}).json()
    assert answer["is_complete"] is False
    assert [one["session_id"] for one in answer["sessions"]] == ["s4", "s3", "s2", "s1"]


@pytest.mark.parametrize(
    ("params", "status", "code"),
    [
        ({}, 422, "invalid_input"),
        ({"user_id": "ana", "space": "team"}, 422, "invalid_input"),
        ({"user_id": ""}, 422, "invalid_request"),
        ({"user_id": "   "}, 422, "invalid_input"),
        ({"user_id": "x" * 300}, 422, "invalid_request"),
        ({"space": "no-such-space"}, 403, "access_denied"),
    ],
)
def test_sessions_refuses_bad_input(client: httpx.Client, params: dict[str, str], status: int, code: str) -> None:
    response = client.get("/v1/sessions", params=params)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


def test_users_refuses_a_prefix_too_long(client: httpx.Client) -> None:
    response = client.get("/v1/users", params={"prefix": "x" * 300})
    assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request"


@pytest.mark.parametrize("path", ["/v1/users", "/v1/sessions?user_id=ana"])
def test_the_new_routes_need_a_key(anonymous: httpx.Client, path: str) -> None:
    response = anonymous.get(path)
    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"


# -- the secret of `memstrata ui` ---------------------------------------------------------------


@pytest.fixture
def owner_secret() -> str:
    """The secret `memstrata ui` makes for one run."""
    return new_secret()


@pytest.fixture
def owner_app(memory: Memory, keys: ClosableKeyStore, owner_secret: str) -> FastAPI:
    """The app as `memstrata ui` builds it."""
    return create_app(memory, keys=keys, owner_secret=owner_secret)


@pytest.fixture
def owner_server(owner_app: FastAPI) -> Iterator[LiveServer]:
    """That app, served."""
    with LiveServer(owner_app) as server:
        yield server


def test_the_owner_secret_sees_the_data_directory_as_the_cli_does(
    owner_server: LiveServer, owner_secret: str, acme: Caller, memory: Memory
) -> None:
    memory.add("I live in Lisbon", user_id="ana", session_id="monday")
    with httpx.Client(base_url=owner_server.url, timeout=30) as http:
        assert http.post("/v1/memories", json={"messages": "hi", "user_id": "bob"}, headers=acme.headers).is_success
        owner = {"Authorization": f"Bearer {owner_secret}"}
        assert http.get("/v1/version", headers=owner).json()["tenant"] == "*"
        assert http.get("/v1/users", headers=owner).json() == {"users": ["acme/bob", "ana"]}
        history = http.get("/v1/memories", params={"user_id": "ana"}, headers=owner).json()["memories"]
        assert [(turn["user_id"], turn["content"]) for turn in history] == [("ana", "I live in Lisbon")]
        sessions = http.get("/v1/sessions", params={"user_id": "ana"}, headers=owner).json()["sessions"]
        assert [one["session_id"] for one in sessions] == ["monday"]
        # An API key on the same server still sees its tenant only.
        assert http.get("/v1/users", headers=acme.headers).json() == {"users": ["bob"]}


@pytest.mark.parametrize("wrong", ["almost", "msk_" + "A" * 43])
def test_only_the_exact_owner_secret_is_taken(owner_server: LiveServer, owner_secret: str, wrong: str) -> None:
    with httpx.Client(base_url=owner_server.url, timeout=30) as http:
        for secret in (wrong, owner_secret[:-1], owner_secret + "x", owner_secret.upper()):
            assert http.get("/v1/users", headers={"Authorization": f"Bearer {secret}"}).status_code == 401
        assert http.get("/v1/users").status_code == 401, "no keyless access, whatever the settings say"


def test_a_secret_in_any_latin1_text_is_refused_not_crashed_on(owner_server: LiveServer, owner_secret: str) -> None:
    with httpx.Client(base_url=owner_server.url, timeout=30) as http:
        for header in (b"Bearer caf\xe9", b"Bearer " + owner_secret.encode() + b"\xff"):
            response = http.get("/v1/users", headers={"Authorization": header})
            assert response.status_code == 401, response.text


def test_without_an_owner_secret_no_key_sees_the_whole_store(
    client: httpx.Client, memory: Memory, owner_secret: str
) -> None:
    memory.add("outside every tenant", user_id="ana")
    assert client.get("/v1/users").json() == {"users": []}
    assert client.get("/v1/users", headers={"Authorization": f"Bearer {owner_secret}"}).status_code == 401


def test_the_owner_server_answers_only_requests_addressed_to_this_machine(
    owner_server: LiveServer, owner_secret: str
) -> None:
    owner = {"Authorization": f"Bearer {owner_secret}"}
    with httpx.Client(base_url=owner_server.url, timeout=30) as http:
        port = owner_server.url.rsplit(":", 1)[1]
        assert http.get("/v1/users", headers={**owner, "Host": f"localhost:{port}"}).status_code == 200
        refused = http.get("/v1/users", headers={**owner, "Host": f"evil.example:{port}"})
        assert refused.status_code == 400 and "memstrata ui" in refused.json()["error"]["message"]
        assert http.get("/ui", headers={"Host": f"evil.example:{port}"}).status_code == 400
