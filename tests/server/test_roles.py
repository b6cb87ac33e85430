"""API key roles over real HTTP: every route of the app with a key of every role.

The table below holds every route with the least role that may call it. A route added
later without a role fails to build (``check_declared``); one added with a role but not
to this table fails ``test_every_route_is_in_the_table``, so each gets a decision here.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from tests.server.conftest import LiveServer

from memstrata import ConfigError, KeyRole, Memory
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.server.app import create_app
from memstrata.server.auth import TenantDep
from memstrata.server.keys import ClosableKeyStore, create_key, list_keys, open_key_store
from memstrata.server.roles import READ, check_declared, route_roles

READ_ROLE, WRITE_ROLE, ADMIN_ROLE = KeyRole.READ, KeyRole.WRITE, KeyRole.ADMIN
AGENT = "bot"
USER = {"user_id": "ana"}


@dataclass(frozen=True)
class Call:
    """One request to a route, and what it answers a key whose role may make it."""

    role: KeyRole
    path: str
    ok: int = 200
    params: dict[str, Any] = field(default_factory=dict)
    json: Any = None
    is_import: bool = False  # the body is an export of ana, sent as JSONL


#: Every route that takes a key: the least role that may call it, and a request that succeeds with it.
ROUTES: dict[tuple[str, str], Call] = {
    ("POST", "/v1/memories"): Call(WRITE_ROLE, "/v1/memories", 201, json={**USER, "messages": "I drink green tea"}),
    ("GET", "/v1/memories"): Call(READ_ROLE, "/v1/memories", params=USER),
    ("GET", "/v1/memories/{memory_id}"): Call(READ_ROLE, "/v1/memories/m1", params=USER),
    ("DELETE", "/v1/memories/{memory_id}"): Call(WRITE_ROLE, "/v1/memories/m1", 204, params=USER),
    ("POST", "/v1/search"): Call(READ_ROLE, "/v1/search", json={**USER, "query": "tea"}),
    ("POST", "/v1/context"): Call(READ_ROLE, "/v1/context", json={**USER, "query": "tea"}),
    ("POST", "/v1/chat"): Call(WRITE_ROLE, "/v1/chat", json={**USER, "message": "What do I drink?"}),
    ("POST", "/v1/forget"): Call(ADMIN_ROLE, "/v1/forget", json=USER),
    ("GET", "/v1/users"): Call(READ_ROLE, "/v1/users"),
    ("GET", "/v1/sessions"): Call(READ_ROLE, "/v1/sessions", params=USER),
    ("GET", "/v1/inspect"): Call(READ_ROLE, "/v1/inspect", params=USER),
    ("GET", "/v1/segments/{segment_id}/turns"): Call(READ_ROLE, "/v1/segments/none/turns", 404, params=USER),
    ("POST", "/v1/consolidate"): Call(WRITE_ROLE, "/v1/consolidate", json=USER),
    ("GET", "/v1/consolidations"): Call(READ_ROLE, "/v1/consolidations", params=USER),
    ("GET", "/v1/profile"): Call(READ_ROLE, "/v1/profile", params=USER),
    ("GET", "/v1/cells"): Call(READ_ROLE, "/v1/cells", params=USER),
    ("GET", "/v1/patterns"): Call(READ_ROLE, "/v1/patterns", params=USER),
    ("GET", "/v1/graph"): Call(READ_ROLE, "/v1/graph", params={**USER, "query": "tea"}),
    ("POST", "/v1/prune"): Call(ADMIN_ROLE, "/v1/prune", json={**USER, "tier": "episodic", "keep_last": 0}),
    ("POST", "/v1/jobs/retry"): Call(WRITE_ROLE, "/v1/jobs/retry", json=USER),
    ("GET", "/v1/export"): Call(READ_ROLE, "/v1/export", params=USER),
    ("POST", "/v1/import"): Call(WRITE_ROLE, "/v1/import", is_import=True),
    ("POST", "/v1/spaces"): Call(ADMIN_ROLE, "/v1/spaces", 201, json={"space": "fresh"}),
    ("GET", "/v1/spaces"): Call(READ_ROLE, "/v1/spaces"),
    ("DELETE", "/v1/spaces/{space}"): Call(ADMIN_ROLE, "/v1/spaces/team"),
    ("GET", "/v1/spaces/{space}/grants"): Call(READ_ROLE, "/v1/spaces/team/grants"),
    ("PUT", "/v1/spaces/{space}/grants/{agent_id}"): Call(
        ADMIN_ROLE, "/v1/spaces/team/grants/other", json={"access": "write"}
    ),
    ("DELETE", "/v1/spaces/{space}/grants/{agent_id}"): Call(ADMIN_ROLE, "/v1/spaces/team/grants/other", 204),
    ("POST", "/v1/spaces/{space}/share"): Call(WRITE_ROLE, "/v1/spaces/team/share", 201, json={**USER, "ids": ["m1"]}),
    ("GET", "/v1/trust"): Call(READ_ROLE, "/v1/trust"),
    ("PUT", "/v1/trust/{of_agent}"): Call(WRITE_ROLE, "/v1/trust/other", json={"weight": 0.5}),
    ("GET", "/v1/version"): Call(READ_ROLE, "/v1/version"),
}
#: Routes that take no key: the service's health, the inspector's page and files, the API's own description.
PUBLIC = {
    ("GET", "/v1/health"),
    ("GET", "/ui"),
    ("GET", "/ui/{name}"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"),
    ("GET", "/redoc"),
}


@dataclass
class World:
    """The server, a client per role (all of tenant acme, acting as one agent), and ana's export."""

    url: str
    clients: dict[KeyRole, httpx.Client]
    export: bytes
    database: Path

    def send(self, role: KeyRole, method: str, call: Call) -> httpx.Response:
        """Make ``call`` with the key of ``role``."""
        if call.is_import:
            headers = {"Content-Type": "application/x-ndjson"}
            return self.clients[role].request(method, call.path, content=self.export, headers=headers)
        return self.clients[role].request(method, call.path, params=call.params, json=call.json)


@pytest.fixture
def world(live: LiveServer, keys: ClosableKeyStore, memory: Memory) -> Iterator[World]:
    clients = {
        role: httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {secret}"}, timeout=30)
        for role in KeyRole
        for _, secret in [create_key(keys, tenant="acme", name=f"acme-{role}", agent_id=AGENT, role=role)]
    }
    admin = clients[ADMIN_ROLE]
    made = admin.post("/v1/memories", json={**USER, "id": "m1", "messages": "I like green tea"})
    assert made.status_code == 201, made.text
    assert admin.post("/v1/spaces", json={"space": "team"}).status_code == 201
    assert admin.put("/v1/spaces/team/grants/other", json={"access": "read"}).status_code == 200
    export = admin.get("/v1/export", params=USER)
    assert export.status_code == 200
    database = Path(memory.settings.resolved_storage_url.removeprefix("sqlite:///"))
    yield World(live.url, clients, export.content, database)
    for client in clients.values():
        client.close()


def _snapshot(database: Path) -> list[str]:
    """Everything the database holds, as SQL."""
    with closing(sqlite3.connect(database)) as connection:
        return list(connection.iterdump())


def test_every_route_is_in_the_table(app: FastAPI) -> None:
    declared = route_roles(app)
    assert set(declared) == set(ROUTES) | PUBLIC, "decide the role of each new route in ROUTES (or PUBLIC)"
    assert {route: declared[route] for route in ROUTES} == {route: call.role for route, call in ROUTES.items()}
    assert all(declared[route] is None for route in PUBLIC)


@pytest.mark.parametrize("role", list(KeyRole), ids=str)
@pytest.mark.parametrize("route", list(ROUTES), ids=" ".join)
def test_each_route_answers_each_role(world: World, route: tuple[str, str], role: KeyRole) -> None:
    method, _ = route
    call = ROUTES[route]
    before = _snapshot(world.database)
    response = world.send(role, method, call)
    if role.allows(call.role):
        assert response.status_code == call.ok, response.text
        return
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "access_denied"
    assert f"this API key has the {role} role; {method} {route[1]} needs the {call.role} role" in error["message"]
    assert f"memstrata keys create --role {call.role}" in error["message"]
    assert _snapshot(world.database) == before  # a refused call changes nothing


@pytest.mark.parametrize("path", ["/v1/health", "/ui"])
def test_public_routes_need_no_key(anonymous: httpx.Client, path: str) -> None:
    assert anonymous.get(path).status_code == 200


def test_version_names_the_role_of_the_key(world: World) -> None:
    for role, client in world.clients.items():
        assert client.get("/v1/version").json()["role"] == role


@pytest.mark.parametrize(
    ("content", "media"),
    [(b"{not json", "application/json"), (b'{"user_id": "ana"}', "application/json"), (b"[]", "text/plain")],
)
def test_a_refused_role_is_told_before_anything_about_the_body(world: World, content: bytes, media: str) -> None:
    response = world.clients[READ_ROLE].post("/v1/memories", content=content, headers={"Content-Type": media})
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "access_denied"
    assert "has the read role" in response.json()["error"]["message"]


def test_an_app_with_a_keyed_route_that_declares_no_role_is_refused() -> None:
    app = FastAPI()

    @app.get("/v1/open", dependencies=[READ])
    def declared(tenant: TenantDep) -> None:
        """Declares its role."""

    check_declared(app)

    @app.get("/v1/forgotten")
    def forgotten(tenant: TenantDep) -> None:
        """Takes a key and says nothing about roles."""

    with pytest.raises(ConfigError, match="GET /v1/forgotten"):
        check_declared(app)


@pytest.fixture(params=["sqlite", "postgres"])
def backend_memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """A Memory on each backend in turn."""
    overrides: dict[str, Any] = {}
    if request.param == "postgres":
        overrides["storage_url"] = request.getfixturevalue("migrated_postgres_url")
    with Memory(tmp_path / "home", embedder=HashEmbedder(), background=False, **overrides) as opened:
        yield opened


def test_roles_are_stored_and_enforced_on_each_backend(backend_memory: Memory) -> None:
    store = open_key_store(backend_memory.settings.resolved_storage_url, backend_memory.settings)
    try:
        secrets = {role: create_key(store, tenant="acme", name=str(role), role=role)[1] for role in KeyRole}
        assert [key.role for key in list_keys(store, "acme")] == list(KeyRole)
        with LiveServer(create_app(backend_memory, keys=store)) as server:

            def client(role: KeyRole) -> httpx.Client:
                return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {secrets[role]}"})

            with client(READ_ROLE) as reader, client(WRITE_ROLE) as writer, client(ADMIN_ROLE) as admin:
                assert reader.post("/v1/memories", json={**USER, "messages": "hi"}).status_code == 403
                assert reader.get("/v1/memories", params=USER).json()["memories"] == []
                assert writer.post("/v1/memories", json={**USER, "messages": "hi"}).status_code == 201
                assert reader.post("/v1/search", json={**USER, "query": "hi"}).json()["hits"]
                assert writer.post("/v1/forget", json=USER).status_code == 403
                assert len(reader.get("/v1/memories", params=USER).json()["memories"]) == 1
                assert admin.post("/v1/forget", json=USER).json()["turns"] == 1
    finally:
        store.close()
