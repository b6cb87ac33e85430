"""Tenants are isolated through every endpoint: another tenant's data is never seen, changed or deleted.

globex stores memories for user "ana" and in a shared space "ana", acting as agent "ana";
acme, acting as an agent of the same name, then calls every endpoint naming the same user,
space and ids (and ids spelling globex's namespace). Each call must find nothing, change
nothing of globex's, and never echo globex's text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI
from tests.server.conftest import Caller, LiveServer, make_caller

from memstrata import Memory
from memstrata.server.keys import ClosableKeyStore

SECRET = "GLOBEX-SECRET lives in Lisbon and works at the hospital"
JSONL = {"Content-Type": "application/x-ndjson"}
QUERY = "where does she live and work? Lisbon hospital"
UNKNOWN_SEGMENT = "01JB2Q8V6Z3N4M5K6J7H8G9F0E"


@dataclass(frozen=True)
class Case:
    """One endpoint called by acme about globex's user; ``check`` asserts on acme's response."""

    method: str
    path: str
    call: Callable[[httpx.Client, str], httpx.Response]
    check: Callable[[httpx.Response], None]


def _status(expected: int) -> Callable[[httpx.Response], None]:
    def check(response: httpx.Response) -> None:
        assert response.status_code == expected, response.text

    return check


def _empty(key: str, empty: object = ()) -> Callable[[httpx.Response], None]:
    def check(response: httpx.Response) -> None:
        assert response.status_code == 200, response.text
        value = response.json()[key]
        assert value == type(value)(empty) if not isinstance(value, int) else value == empty

    return check


def _context_empty(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    assert response.json()["turn_ids"] == []


def _chat_knows_nothing(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["memories"] == [] and "GLOBEX" not in body["answer"] and body["is_extractive"]


def _inspection_empty(response: httpx.Response) -> None:
    body = response.json()
    assert response.status_code == 200
    assert body["working"] == body["cells"] == body["events"] == []
    assert body["counts"]["episodic"] == 0


def _export_empty(response: httpx.Response) -> None:
    assert response.status_code == 200
    assert [json.loads(line)["kind"] for line in response.text.splitlines()] == ["memstrata-export", "end"]


def _created_in_acme_or_refused(response: httpx.Response) -> None:
    # "ana" is a fine name for acme's own space; "globex/ana" is no space name at all.
    assert response.status_code in (201, 422), response.text


def _only_acme_trust(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    trust = response.json()["trust"]  # acme's own weights on the agents the case named; never globex's 0.25
    assert set(trust) <= set(USERS) and set(trust.values()) == {0.5}


def _export_line(user: str, turn_id: str, content: str) -> bytes:
    header = {"kind": "memstrata-export", "version": 1, "embedding_model": "none"}
    turn = {
        "kind": "turn",
        "id": turn_id,
        "user_id": user,
        "role": "user",
        "content": content,
        "created_at": "2024-01-01T00:00:00+00:00",
    }
    return (json.dumps(header) + "\n" + json.dumps(turn) + "\n").encode()


def _globex_id(user: str) -> str:
    """One of globex's ids, a different one per user (ids are unique within a tenant)."""
    return "g-1" if user == "ana" else "g-2"


def _stored_in_acme(response: httpx.Response) -> None:
    assert response.status_code in (200, 201), response.text


CASES = {
    "get": Case(
        "GET", "/v1/memories/{memory_id}", lambda c, u: c.get("/v1/memories/g-1", params={"user_id": u}), _status(404)
    ),
    "get-namespaced-id": Case(
        "GET",
        "/v1/memories/{memory_id}",
        lambda c, u: c.get("/v1/memories/globex/g-1", params={"user_id": u}),
        _status(404),
    ),
    "delete": Case(
        "DELETE",
        "/v1/memories/{memory_id}",
        lambda c, u: c.delete("/v1/memories/g-1", params={"user_id": u}),
        _status(404),
    ),
    "history": Case(
        "GET", "/v1/memories", lambda c, u: c.get("/v1/memories", params={"user_id": u}), _empty("memories")
    ),
    "add-same-id": Case(
        "POST",
        "/v1/memories",
        lambda c, u: c.post("/v1/memories", json={"messages": "acme's own words", "user_id": u, "id": _globex_id(u)}),
        _stored_in_acme,
    ),
    "search": Case(
        "POST",
        "/v1/search",
        lambda c, u: c.post(
            "/v1/search",
            json={"query": QUERY, "user_id": u, "tiers": ["longterm", "scene", "midterm", "consolidation"]},
        ),
        _empty("hits"),
    ),
    "search-fulltext": Case(
        "POST",
        "/v1/search",
        lambda c, u: c.post("/v1/search", json={"query": QUERY, "user_id": u, "mode": "fulltext"}),
        _empty("hits"),
    ),
    "context": Case(
        "POST", "/v1/context", lambda c, u: c.post("/v1/context", json={"query": QUERY, "user_id": u}), _context_empty
    ),
    "chat": Case(
        "POST",
        "/v1/chat",
        lambda c, u: c.post("/v1/chat", json={"message": QUERY, "user_id": u}),
        _chat_knows_nothing,
    ),
    "forget": Case("POST", "/v1/forget", lambda c, u: c.post("/v1/forget", json={"user_id": u}), _empty("turns", 0)),
    "inspect": Case("GET", "/v1/inspect", lambda c, u: c.get("/v1/inspect", params={"user_id": u}), _inspection_empty),
    # globex's segment ids are made when its turns are filed; test_acme_cannot_list_globexs_segment names real ones.
    "segment-turns": Case(
        "GET",
        "/v1/segments/{segment_id}/turns",
        lambda c, u: c.get(f"/v1/segments/{UNKNOWN_SEGMENT}/turns", params={"user_id": u}),
        _status(404),
    ),
    "consolidate": Case(
        "POST", "/v1/consolidate", lambda c, u: c.post("/v1/consolidate", json={"user_id": u}), _empty("consolidations")
    ),
    "consolidations": Case(
        "GET",
        "/v1/consolidations",
        lambda c, u: c.get("/v1/consolidations", params={"user_id": u}),
        _empty("consolidations"),
    ),
    "users": Case("GET", "/v1/users", lambda c, u: c.get("/v1/users", params={"prefix": u}), _empty("users")),
    "sessions": Case(
        "GET", "/v1/sessions", lambda c, u: c.get("/v1/sessions", params={"user_id": u}), _empty("sessions")
    ),
    "profile": Case(
        "GET", "/v1/profile", lambda c, u: c.get("/v1/profile", params={"user_id": u}), _empty("profile", {})
    ),
    "cells": Case(
        "GET",
        "/v1/cells",
        lambda c, u: c.get("/v1/cells", params={"user_id": u, "include_superseded": "true"}),
        _empty("cells"),
    ),
    "patterns": Case(
        "GET",
        "/v1/patterns",
        lambda c, u: c.get("/v1/patterns", params={"user_id": u, "query": "hospital"}),
        _empty("patterns"),
    ),
    "graph": Case(
        "GET",
        "/v1/graph",
        lambda c, u: c.get("/v1/graph", params={"user_id": u, "query": "Lisbon hospital"}),
        _empty("nodes"),
    ),
    "prune": Case(
        "POST",
        "/v1/prune",
        lambda c, u: c.post("/v1/prune", json={"user_id": u, "tier": "episodic", "keep_last": 0}),
        _empty("deleted", 0),
    ),
    "retry-jobs": Case(
        "POST", "/v1/jobs/retry", lambda c, u: c.post("/v1/jobs/retry", json={"user_id": u}), _empty("requeued", 0)
    ),
    "export-all": Case("GET", "/v1/export", lambda c, u: c.get("/v1/export"), _export_empty),
    "export-user": Case("GET", "/v1/export", lambda c, u: c.get("/v1/export", params={"user_id": u}), _export_empty),
    "import-same-ids": Case(
        "POST",
        "/v1/import",
        lambda c, u: c.post("/v1/import", content=_export_line(u, _globex_id(u), "acme's import"), headers=JSONL),
        _stored_in_acme,
    ),
    "history-space": Case("GET", "/v1/memories", lambda c, u: c.get("/v1/memories", params={"space": u}), _status(404)),
    "add-space": Case(
        "POST",
        "/v1/memories",
        lambda c, u: c.post("/v1/memories", json={"messages": "acme's words", "space": u}),
        _status(404),
    ),
    "search-space": Case(
        "POST", "/v1/search", lambda c, u: c.post("/v1/search", json={"query": QUERY, "space": u}), _status(404)
    ),
    "search-all-spaces": Case(
        "POST",
        "/v1/search",
        lambda c, u: c.post("/v1/search", json={"query": QUERY, "user_id": u, "spaces": "all"}),
        _empty("hits"),
    ),
    "context-all-spaces": Case(
        "POST",
        "/v1/context",
        lambda c, u: c.post("/v1/context", json={"query": QUERY, "user_id": u, "spaces": "all"}),
        _context_empty,
    ),
    "forget-space": Case("POST", "/v1/forget", lambda c, u: c.post("/v1/forget", json={"space": u}), _status(404)),
    "inspect-space": Case("GET", "/v1/inspect", lambda c, u: c.get("/v1/inspect", params={"space": u}), _status(404)),
    "export-space": Case("GET", "/v1/export", lambda c, u: c.get("/v1/export", params={"space": u}), _status(404)),
    "spaces-create": Case(
        "POST", "/v1/spaces", lambda c, u: c.post("/v1/spaces", json={"space": u}), _created_in_acme_or_refused
    ),
    "spaces-list": Case("GET", "/v1/spaces", lambda c, u: c.get("/v1/spaces"), _empty("spaces")),
    "spaces-delete": Case("DELETE", "/v1/spaces/{space}", lambda c, u: c.delete(f"/v1/spaces/{u}"), _status(404)),
    "grants": Case("GET", "/v1/spaces/{space}/grants", lambda c, u: c.get(f"/v1/spaces/{u}/grants"), _status(404)),
    "grant": Case(
        "PUT",
        "/v1/spaces/{space}/grants/{agent_id}",
        lambda c, u: c.put(f"/v1/spaces/{u}/grants/ana", json={"access": "admin"}),
        _status(404),
    ),
    "revoke": Case(
        "DELETE",
        "/v1/spaces/{space}/grants/{agent_id}",
        lambda c, u: c.delete(f"/v1/spaces/{u}/grants/bob"),
        _status(404),
    ),
    "share": Case(
        "POST",
        "/v1/spaces/{space}/share",
        lambda c, u: c.post(f"/v1/spaces/{u}/share", json={"ids": ["g-1"], "user_id": u}),
        _status(404),
    ),
    "share-from-space": Case(
        "POST",
        "/v1/spaces/{space}/share",
        lambda c, u: c.post("/v1/spaces/mine/share", json={"ids": ["g-3"], "space": u}),
        _status(404),
    ),
    "trust": Case("GET", "/v1/trust", lambda c, u: c.get("/v1/trust"), _empty("trust", {})),
    "trust-set": Case(
        "PUT", "/v1/trust/{of_agent}", lambda c, u: c.put(f"/v1/trust/{u}", json={"weight": 0.5}), _only_acme_trust
    ),
    "version": Case("GET", "/v1/version", lambda c, u: c.get("/v1/version"), lambda r: None),
    "health": Case("GET", "/v1/health", lambda c, u: c.get("/v1/health"), _status(200)),
}

# "ana" is globex's user by name; "globex/ana" spells its stored id.
USERS = ["ana", "globex/ana"]


@pytest.fixture
def acme(keys: ClosableKeyStore) -> Caller:
    """acme, acting as an agent called as globex's is."""
    return make_caller(keys, "acme", agent_id="ana")


@pytest.fixture
def globex(keys: ClosableKeyStore) -> Caller:
    """globex, acting as agent "ana" (the admin of its space "ana")."""
    return make_caller(keys, "globex", agent_id="ana")


@pytest.fixture
def seeded(live: LiveServer, globex: Caller, memory: Memory) -> httpx.Client:
    """globex's client, after storing (and deriving tiers from) memories of user "ana" and of space "ana"."""
    http = httpx.Client(base_url=live.url, headers=globex.headers, timeout=30)
    assert http.post("/v1/spaces", json={"space": "ana"}).status_code == 201
    assert http.put("/v1/spaces/ana/grants/bob", json={"access": "read"}).status_code == 200
    assert http.put("/v1/trust/mallory", json={"weight": 0.25}).status_code == 200
    shared = [{"role": "user", "content": SECRET + " (shared)", "id": "g-3"}]
    assert http.post("/v1/memories", json={"messages": shared, "space": "ana"}).status_code == 201
    messages = [
        {"role": "user", "content": SECRET, "id": "g-1"},
        {"role": "assistant", "content": "GLOBEX-SECRET noted: the hospital in Lisbon", "id": "g-2"},
    ]
    assert (
        http.post("/v1/memories", json={"messages": messages, "user_id": "ana", "session_id": "s1"}).status_code == 201
    )
    memory.flush()
    assert http.post("/v1/consolidate", json={"user_id": "ana"}).status_code == 200
    return http


def _globex_view(http: httpx.Client) -> object:
    return {
        "history": http.get("/v1/memories", params={"user_id": "ana"}).json(),
        "inspect": http.get("/v1/inspect", params={"user_id": "ana"}).json()["counts"],
        "export": http.get("/v1/export").text,
        "space": http.get("/v1/memories", params={"space": "ana"}).json(),
        "grants": http.get("/v1/spaces/ana/grants").json(),
        "spaces": http.get("/v1/spaces").json(),
        "trust": http.get("/v1/trust").json(),
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_acme_cannot_see_or_touch_globex(name: str, seeded: httpx.Client, client: httpx.Client) -> None:
    before = _globex_view(seeded)
    case = CASES[name]
    for user in USERS:
        response = case.call(client, user)
        case.check(response)
        assert "GLOBEX-SECRET" not in response.text
        # Ids acme sent itself may be quoted back; no other id of globex's namespace, and none of acme's, may show.
        assert "globex/" not in response.text.replace(user, "").replace("globex/g-1", "")
        assert "acme/" not in response.text
        assert _globex_view(seeded) == before
    seeded.close()


def test_every_route_has_an_isolation_case(app: FastAPI) -> None:
    routes = {(method.upper(), path) for path, operations in app.openapi()["paths"].items() for method in operations}
    covered = {(case.method, case.path) for case in CASES.values()}
    assert routes == covered, f"routes without an isolation case: {sorted(routes - covered)}"


def test_acme_cannot_list_globexs_segment(seeded: httpx.Client, client: httpx.Client, memory: Memory) -> None:
    # Ten more exchanges push the secret out of working memory (ten per session) into a mid-term segment.
    filler = [{"role": "user", "content": f"Unrelated note {n} about subject{n}"} for n in range(10)]
    messages = [message for note in filler for message in (note, {"role": "assistant", "content": "Noted."})]
    assert seeded.post("/v1/memories", json={"messages": messages, "user_id": "ana", "session_id": "s1"}).is_success
    memory.flush()
    [segment] = seeded.get("/v1/inspect", params={"user_id": "ana"}).json()["segments"]
    path = f"/v1/segments/{segment['id']}/turns"
    filed = seeded.get(path, params={"user_id": "ana"}).json()["turns"]
    assert [(turn["id"], turn["content"]) for turn in filed] == [
        ("g-1", SECRET),
        ("g-2", "GLOBEX-SECRET noted: the hospital in Lisbon"),
    ], "globex reads its own segment"
    for user in USERS:
        response = client.get(path, params={"user_id": user})
        assert response.status_code == 404, response.text
        assert "GLOBEX-SECRET" not in response.text and "globex/" not in response.text.replace(user, "")
    seeded.close()


def test_globex_still_reads_its_own_data(seeded: httpx.Client, client: httpx.Client) -> None:
    assert seeded.get("/v1/memories/g-1", params={"user_id": "ana"}).json()["content"] == SECRET
    hits = seeded.post("/v1/search", json={"query": "GLOBEX-SECRET hospital", "user_id": "ana"}).json()["hits"]
    assert hits and hits[0]["id"] in {"g-1", "g-2"}
    seeded.close()
