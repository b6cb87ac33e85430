"""Shared spaces over REST, on every storage backend: each request acts as its key's agent and is checked.

Tenant acme has agents alice (admin of space "team", which she creates), bob (read on it)
and carol (no access); tenant globex has an agent also called alice. Each refused request
must change nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from tests.server.conftest import LiveServer

from memstrata import Memory
from memstrata.config import Settings
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.server.app import create_app
from memstrata.server.keys import ClosableKeyStore, create_key

BACKENDS = ("sqlite", "postgres")
SPACE_MARK = "\ufdd0"
AgentClient = Callable[..., httpx.Client]


@pytest.fixture(params=BACKENDS)
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """A Memory on each backend in turn (the server fixtures build the app and keys on it)."""
    overrides: dict[str, Any] = {}
    if request.param == "postgres":
        overrides["storage_url"] = request.getfixturevalue("migrated_postgres_url")
    with Memory(tmp_path / "home", embedder=HashEmbedder(), background=False, **overrides) as opened:
        yield opened


@pytest.fixture
def agent(live: LiveServer, keys: ClosableKeyStore) -> Iterator[AgentClient]:
    """Makes an HTTP client whose key acts as ``agent`` (None: a key without one) of ``tenant``."""
    opened: list[httpx.Client] = []

    def make(agent_id: str | None, tenant: str = "acme") -> httpx.Client:
        _, secret = create_key(keys, tenant=tenant, name=f"{tenant}-{agent_id}", agent_id=agent_id)
        client = httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {secret}"}, timeout=30)
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.close()


@pytest.fixture
def alice(agent: AgentClient) -> httpx.Client:
    """acme's agent that creates (and so administers) space "team"."""
    return agent("alice")


@pytest.fixture
def bob(agent: AgentClient, alice: httpx.Client) -> httpx.Client:
    """acme's agent with read access to "team"."""
    client = agent("bob")
    assert alice.post("/v1/spaces", json={"space": "team", "description": "ops notes"}).status_code == 201
    assert alice.put("/v1/spaces/team/grants/bob", json={"access": "read"}).status_code == 200
    return client


@pytest.fixture
def carol(agent: AgentClient) -> httpx.Client:
    """acme's agent with no access to any space."""
    return agent("carol")


def _error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    error: dict[str, str] = response.json()["error"]
    assert error["code"] == code, error
    return error["message"]


def _history(client: httpx.Client, **params: str) -> list[str]:
    response = client.get("/v1/memories", params=params)
    assert response.status_code == 200, response.text
    return [item["content"] for item in response.json()["memories"]]


def _grants(client: httpx.Client) -> dict[str, str]:
    response = client.get("/v1/spaces/team/grants")
    assert response.status_code == 200, response.text
    return {grant["agent_id"]: grant["access"] for grant in response.json()["grants"]}


def _shows_no_namespace(response: httpx.Response) -> None:
    assert SPACE_MARK not in response.text and "\\ufdd0" not in response.text
    assert "acme/" not in response.text, response.text


# -- the spaces ------------------------------------------------------------------------------


def test_create_list_and_delete_a_space(alice: httpx.Client, carol: httpx.Client) -> None:
    created = alice.post("/v1/spaces", json={"space": "team", "description": "ops notes"})
    assert created.status_code == 201, created.text
    assert created.json()["space"] == "team" and created.json()["description"] == "ops notes"
    _error(alice.post("/v1/spaces", json={"space": "team"}), 409, "id_conflict")
    assert [space["space"] for space in alice.get("/v1/spaces").json()["spaces"]] == ["team"]
    assert carol.get("/v1/spaces").json() == {"spaces": []}  # only the spaces the agent may read
    assert alice.get("/v1/spaces", params={"prefix": "x"}).json() == {"spaces": []}
    assert _grants(alice) == {"alice": "admin"}  # the creator administers it

    assert alice.post("/v1/memories", json={"space": "team", "messages": "The deploy key is in the vault"}).is_success
    _error(carol.delete("/v1/spaces/team"), 403, "access_denied")
    assert _history(alice, space="team") == ["The deploy key is in the vault"]

    deleted = alice.delete("/v1/spaces/team")
    assert deleted.status_code == 200, deleted.text
    assert deleted.json() == {"user_id": None, "space": "team", "turns": 1, "agent_id": None, "session_id": None}
    assert alice.get("/v1/spaces").json() == {"spaces": []}
    _error(alice.delete("/v1/spaces/team"), 404, "not_found")
    _error(alice.get("/v1/memories", params={"space": "team"}), 404, "not_found")


def test_grant_and_revoke_need_admin(alice: httpx.Client, bob: httpx.Client, carol: httpx.Client) -> None:
    assert _grants(bob) == {"alice": "admin", "bob": "read"}  # read access shows who else has access
    _error(bob.put("/v1/spaces/team/grants/carol", json={"access": "write"}), 403, "access_denied")
    _error(bob.put("/v1/spaces/team/grants/bob", json={"access": "admin"}), 403, "access_denied")
    _error(bob.delete("/v1/spaces/team/grants/alice"), 403, "access_denied")
    _error(carol.get("/v1/spaces/team/grants"), 403, "access_denied")
    assert _grants(alice) == {"alice": "admin", "bob": "read"}  # nothing changed

    granted = alice.put("/v1/spaces/team/grants/carol", json={"access": "write"})
    assert granted.status_code == 200, granted.text
    assert {key: granted.json()[key] for key in ("space", "agent_id", "access")} == {
        "space": "team",
        "agent_id": "carol",
        "access": "write",
    }
    assert alice.put("/v1/spaces/team/grants/carol", json={"access": "read"}).json()["access"] == "read"
    assert alice.delete("/v1/spaces/team/grants/carol").status_code == 204
    _error(alice.delete("/v1/spaces/team/grants/carol"), 404, "not_found")  # it had none left
    assert alice.delete("/v1/spaces/team/grants/bob").status_code == 204
    _error(bob.get("/v1/spaces/team/grants"), 403, "access_denied")
    assert _grants(alice) == {"alice": "admin"}


# -- acting agents -----------------------------------------------------------------------------


def test_an_agent_without_a_grant_is_denied_everything(alice: httpx.Client, carol: httpx.Client) -> None:
    assert alice.post("/v1/spaces", json={"space": "team"}).status_code == 201
    added = alice.post("/v1/memories", json={"space": "team", "messages": "The deploy key is in the vault"})
    memory_id = added.json()["memories"][0]["id"]
    refused = [
        carol.get("/v1/memories", params={"space": "team"}),
        carol.get(f"/v1/memories/{memory_id}", params={"space": "team"}),
        carol.post("/v1/search", json={"space": "team", "query": "deploy key"}),
        carol.post("/v1/context", json={"space": "team", "query": "deploy key"}),
        carol.get("/v1/inspect", params={"space": "team"}),
        carol.get("/v1/export", params={"space": "team"}),
        carol.post("/v1/search", json={"user_id": "ana", "query": "deploy key", "spaces": ["team"]}),
    ]
    for response in refused:
        assert "vault" not in response.text
        message = _error(response, 403, "access_denied")
        assert "'carol' has no access to space 'team'" in message


def test_a_request_acting_as_no_agent_is_told_how_to_name_one(alice: httpx.Client, agent: AgentClient) -> None:
    assert alice.post("/v1/spaces", json={"space": "team"}).status_code == 201
    nobody = agent(None)
    for response in (
        nobody.post("/v1/spaces", json={"space": "other"}),
        nobody.get("/v1/spaces"),
        nobody.get("/v1/memories", params={"space": "team"}),
        nobody.get("/v1/trust"),
    ):
        message = _error(response, 403, "access_denied")
        assert "--agent" in message and "server_agent_id" in message
    # A user's memory needs no agent, as before.
    assert nobody.post("/v1/memories", json={"user_id": "ana", "messages": "hello", "agent_id": "x"}).is_success
    assert _history(alice, space="team") == []
    assert [space["space"] for space in alice.get("/v1/spaces").json()["spaces"]] == ["team"]


def test_a_read_only_agent_cannot_write(alice: httpx.Client, bob: httpx.Client) -> None:
    added = alice.post("/v1/memories", json={"space": "team", "messages": "The deploy key is in the vault"})
    memory_id = added.json()["memories"][0]["id"]
    said = bob.post("/v1/memories", json={"user_id": "ana", "messages": "Ana likes tea"})
    ana_id = said.json()["memories"][0]["id"]
    refused = [
        bob.post("/v1/memories", json={"space": "team", "messages": "bob was here"}),
        bob.post("/v1/chat", json={"space": "team", "message": "where is the deploy key?"}),
        bob.delete(f"/v1/memories/{memory_id}", params={"space": "team"}),
        bob.post("/v1/forget", json={"space": "team"}),
        bob.post("/v1/prune", json={"space": "team", "tier": "episodic", "keep_last": 0}),
        bob.post("/v1/consolidate", json={"space": "team"}),
        bob.post("/v1/spaces/team/share", json={"ids": [ana_id], "user_id": "ana"}),
        bob.delete("/v1/spaces/team"),
    ]
    for response in refused:
        assert "only read access to space 'team'" in _error(response, 403, "access_denied")
    assert _history(alice, space="team") == ["The deploy key is in the vault"]
    # What read access allows.
    assert _history(bob, space="team") == ["The deploy key is in the vault"]
    assert bob.get(f"/v1/memories/{memory_id}", params={"space": "team"}).json()["content"].startswith("The deploy")


def test_a_request_may_not_name_another_agent_in_a_space(alice: httpx.Client, bob: httpx.Client) -> None:
    # bob's key acts as bob: naming alice would borrow her write access.
    impersonating = bob.post("/v1/memories", json={"space": "team", "messages": "forged", "agent_id": "alice"})
    assert "acts as agent 'bob'" in _error(impersonating, 403, "access_denied")
    _error(bob.get("/v1/memories", params={"space": "team", "agent_id": "alice"}), 403, "access_denied")
    _error(
        bob.post("/v1/search", json={"space": "team", "query": "x", "filters": {"agent_id": "alice"}}),
        403,
        "access_denied",
    )
    assert _history(alice, space="team") == []
    # Naming itself is allowed; the turn's agent is the writer.
    written = alice.post("/v1/memories", json={"space": "team", "messages": "by alice", "agent_id": "alice"})
    assert written.status_code == 201, written.text
    assert written.json()["memories"][0] | {"id": "", "created_at": ""} == {
        "id": "",
        "user_id": None,
        "space": "team",
        "role": "user",
        "content": "by alice",
        "created_at": "",
        "session_id": None,
        "agent_id": "alice",
        "name": None,
        "metadata": {},
        "importance": None,
    }
    _shows_no_namespace(written)


def test_the_server_agent_setting_is_the_agent_of_keys_without_one(memory: Memory, keys: ClosableKeyStore) -> None:
    _, plain = create_key(keys, tenant="acme", name="no-agent")
    _, named = create_key(keys, tenant="acme", name="named", agent_id="alice")
    settings = Settings(home=memory.settings.home, server_agent_id="ops", server_allow_anonymous=True)
    with TestClient(create_app(memory, settings=settings, keys=keys), base_url="http://localhost") as http:
        made = http.post("/v1/spaces", json={"space": "team"}, headers={"Authorization": f"Bearer {plain}"})
        assert made.status_code == 201, made.text
        listed = http.get("/v1/spaces/team/grants", headers={"Authorization": f"Bearer {plain}"})
        assert {grant["agent_id"] for grant in listed.json()["grants"]} == {"ops"}
        _error(http.get("/v1/spaces/team/grants", headers={"Authorization": f"Bearer {named}"}), 403, "access_denied")
        # Without a key: tenant local, which has no "team", and agent ops again.
        assert http.post("/v1/spaces", json={"space": "mine"}).status_code == 201
        assert [space["space"] for space in http.get("/v1/spaces").json()["spaces"]] == ["mine"]
        assert {grant["agent_id"] for grant in http.get("/v1/spaces/mine/grants").json()["grants"]} == {"ops"}


# -- tenants -----------------------------------------------------------------------------------


def test_another_tenant_cannot_see_or_use_a_space(alice: httpx.Client, bob: httpx.Client, agent: AgentClient) -> None:
    assert alice.post("/v1/memories", json={"space": "team", "messages": "The deploy key is in the vault"}).is_success
    stranger = agent("alice", tenant="globex")  # the same agent name, in another tenant
    assert stranger.get("/v1/spaces").json() == {"spaces": []}
    for response in (
        stranger.get("/v1/spaces/team/grants"),
        stranger.put("/v1/spaces/team/grants/alice", json={"access": "admin"}),
        stranger.delete("/v1/spaces/team/grants/bob"),
        stranger.delete("/v1/spaces/team"),
        stranger.get("/v1/memories", params={"space": "team"}),
        stranger.post("/v1/memories", json={"space": "team", "messages": "globex was here"}),
        stranger.post("/v1/search", json={"space": "team", "query": "deploy key"}),
        stranger.post("/v1/search", json={"user_id": "ana", "query": "deploy key", "spaces": ["team"]}),
        stranger.post("/v1/spaces/team/share", json={"ids": ["x"], "user_id": "ana"}),
    ):
        assert "vault" not in response.text
        _error(response, 404, "not_found")
    everything = stranger.post("/v1/search", json={"user_id": "ana", "query": "deploy key", "spaces": "all"})
    assert everything.status_code == 200 and everything.json()["hits"] == []
    assert _grants(alice) == {"alice": "admin", "bob": "read"}
    assert _history(alice, space="team") == ["The deploy key is in the vault"]
    # Space names are per tenant: globex's "team" is another space.
    assert stranger.post("/v1/spaces", json={"space": "team"}).status_code == 201
    assert _history(stranger, space="team") == []
    assert _grants(stranger) == {"alice": "admin"} and _grants(alice) == {"alice": "admin", "bob": "read"}


# -- bad input ---------------------------------------------------------------------------------

BAD_REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("PUT", "/v1/spaces/team/grants/carol", {"json": {"access": "owner"}}),
    ("PUT", "/v1/spaces/team/grants/carol", {"json": {}}),
    ("PUT", "/v1/spaces/team/grants/%20", {"json": {"access": "read"}}),
    ("POST", "/v1/memories", {"json": {"space": "team", "messages": "x", "agent_id": 5}}),
    ("POST", "/v1/memories", {"json": {"space": ["team"], "messages": "x"}}),
    ("POST", "/v1/memories", {"json": {"space": "team", "user_id": "ana", "messages": "x"}}),
    ("POST", "/v1/memories", {"json": {"messages": "x"}}),
    ("POST", "/v1/search", {"json": {"space": "team", "query": "x", "filters": {"agent_id": ["alice"]}}}),
    ("POST", "/v1/search", {"json": {"user_id": "ana", "query": "x", "spaces": [1]}}),
    ("POST", "/v1/search", {"json": {"user_id": "ana", "query": "x", "spaces": "every"}}),
    ("POST", "/v1/context", {"json": {"user_id": "ana", "query": "x", "spaces": {"team": 1}}}),
    ("POST", "/v1/spaces", {"json": {"space": "a/b"}}),
    ("POST", "/v1/spaces", {"json": {"space": " "}}),
    ("POST", "/v1/spaces", {"json": {"space": "new", "owner": "alice"}}),
    ("POST", "/v1/spaces/team/share", {"json": {"ids": [1], "user_id": "ana"}}),
    ("POST", "/v1/spaces/team/share", {"json": {"ids": [], "user_id": "ana"}}),
    ("PUT", "/v1/trust/bob", {"json": {"weight": 1.5}}),
    ("PUT", "/v1/trust/bob", {"json": {"weight": "0.5"}}),
    ("GET", "/v1/memories", {"params": {"space": ""}}),
]


def test_bad_input_is_422_and_changes_nothing(alice: httpx.Client, bob: httpx.Client) -> None:
    for method, path, arguments in BAD_REQUESTS:
        response = alice.request(method, path, **arguments)
        assert response.status_code == 422, (method, path, arguments, response.text)
        assert response.json()["error"]["code"] in ("invalid_request", "invalid_input")
    assert _grants(alice) == {"alice": "admin", "bob": "read"}
    assert [space["space"] for space in alice.get("/v1/spaces").json()["spaces"]] == ["team"]
    assert _history(alice, space="team") == [] and alice.get("/v1/trust").json()["trust"] == {}


UNKNOWN_SPACE: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/v1/memories", {"params": {"space": "nope"}}),
    ("POST", "/v1/memories", {"json": {"space": "nope", "messages": "x"}}),
    ("POST", "/v1/search", {"json": {"space": "nope", "query": "x"}}),
    ("POST", "/v1/search", {"json": {"user_id": "ana", "query": "x", "spaces": ["team", "nope"]}}),
    ("POST", "/v1/context", {"json": {"space": "team", "query": "x", "spaces": ["nope"]}}),
    ("GET", "/v1/spaces/nope/grants", {}),
    ("PUT", "/v1/spaces/nope/grants/bob", {"json": {"access": "read"}}),
    ("DELETE", "/v1/spaces/nope/grants/bob", {}),
    ("DELETE", "/v1/spaces/nope", {}),
    ("POST", "/v1/spaces/nope/share", {"json": {"ids": ["x"], "space": "team"}}),
    ("GET", "/v1/profile", {"params": {"space": "nope"}}),
    ("POST", "/v1/prune", {"json": {"space": "nope", "tier": "episodic", "keep_last": 0}}),
]


def test_an_unknown_space_is_404(alice: httpx.Client) -> None:
    assert alice.post("/v1/spaces", json={"space": "team"}).status_code == 201
    assert alice.post("/v1/memories", json={"space": "team", "messages": "x", "id": "x"}).status_code == 201
    for method, path, arguments in UNKNOWN_SPACE:
        response = alice.request(method, path, **arguments)
        assert "'nope'" in _error(response, 404, "not_found"), (method, path, arguments)


# -- federated reads -------------------------------------------------------------------------


def test_search_and_context_over_a_user_and_spaces(alice: httpx.Client, bob: httpx.Client) -> None:
    assert alice.post("/v1/spaces", json={"space": "secret"}).status_code == 201
    assert alice.post("/v1/memories", json={"space": "team", "messages": "The deploy key is in the vault"}).is_success
    assert alice.post("/v1/memories", json={"space": "secret", "messages": "The deploy password is hunter2"}).is_success
    said = {"user_id": "ana", "messages": "Ana deploys the app on Fridays", "agent_id": "helper"}
    assert bob.post("/v1/memories", json=said).is_success

    for spaces in ("all", ["team"]):
        found = bob.post("/v1/search", json={"user_id": "ana", "query": "deploy key vault Fridays", "spaces": spaces})
        assert found.status_code == 200, found.text
        _shows_no_namespace(found)
        hits = {hit["content"]: (hit["space"], hit["written_by"]) for hit in found.json()["hits"]}
        assert hits == {
            "Ana deploys the app on Fridays": (None, "helper"),
            "The deploy key is in the vault": ("team", "alice"),
        }
        [shared] = [hit for hit in found.json()["hits"] if hit["space"] == "team"]
        assert shared["turn"]["space"] == "team" and shared["turn"]["user_id"] is None
    # A space bob may not read is refused, not skipped silently.
    refused = bob.post("/v1/search", json={"user_id": "ana", "query": "deploy", "spaces": ["team", "secret"]})
    assert "hunter2" not in refused.text
    _error(refused, 403, "access_denied")

    context = bob.post("/v1/context", json={"user_id": "ana", "query": "deploy key vault Fridays", "spaces": "all"})
    assert context.status_code == 200, context.text
    _shows_no_namespace(context)
    block = context.json()
    assert "- [team, by alice] The deploy key is in the vault" in block["text"] and "hunter2" not in block["text"]
    assert "Fridays" in block["text"] and block["user_id"] == "ana" and block["space"] is None
    [line] = [item for item in block["items"] if item["space"] == "team"]
    assert (line["written_by"], line["text"]) == ("alice", "- [team, by alice] The deploy key is in the vault")

    # From the space itself, the other spaces it names are checked as the agent too.
    from_space = alice.post("/v1/search", json={"space": "team", "query": "deploy", "spaces": ["secret"]})
    assert {hit["space"] for hit in from_space.json()["hits"]} == {"team", "secret"}
    _error(
        bob.post("/v1/search", json={"space": "team", "query": "deploy", "spaces": ["secret"]}), 403, "access_denied"
    )


def test_space_routes_answer_with_the_space_not_a_user(alice: httpx.Client) -> None:
    assert alice.post("/v1/spaces", json={"space": "team"}).status_code == 201
    assert alice.post("/v1/memories", json={"space": "team", "messages": "I live in Lisbon"}).is_success
    for response in (
        alice.get("/v1/inspect", params={"space": "team"}),
        alice.get("/v1/profile", params={"space": "team"}),
        alice.get("/v1/cells", params={"space": "team"}),
        alice.post("/v1/chat", json={"space": "team", "message": "where do I live?"}),
        alice.post("/v1/context", json={"space": "team", "query": "Lisbon"}),
        alice.post("/v1/prune", json={"space": "team", "tier": "midterm", "keep_last": 10}),
        alice.get("/v1/export", params={"space": "team"}),
    ):
        assert response.status_code == 200, response.text
        _shows_no_namespace(response)
    turns = len(_history(alice, space="team"))  # the message and what chat stored
    inspection = alice.get("/v1/inspect", params={"space": "team"}).json()
    assert (inspection["user_id"], inspection["space"], inspection["counts"]["episodic"]) == (None, "team", turns)
    forgotten = alice.post("/v1/forget", json={"space": "team"})
    assert forgotten.json() == {"user_id": None, "space": "team", "turns": turns, "agent_id": None, "session_id": None}
    assert _history(alice, space="team") == [] and _grants(alice) == {"alice": "admin"}  # the space stays


# -- trust and sharing -------------------------------------------------------------------------


def test_trust_is_the_acting_agents_own(alice: httpx.Client, bob: httpx.Client, carol: httpx.Client) -> None:
    assert alice.post("/v1/memories", json={"space": "team", "messages": "The deploy key is in the vault"}).is_success
    before = bob.post("/v1/search", json={"space": "team", "query": "deploy key"}).json()["hits"][0]["score"]

    set_ = bob.put("/v1/trust/alice", json={"weight": 0.25})
    assert set_.status_code == 200, set_.text
    assert set_.json() == {"agent_id": "bob", "trust": {"alice": 0.25}}
    assert bob.put("/v1/trust/carol", json={"weight": 0}).json()["trust"] == {"alice": 0.25, "carol": 0.0}
    assert bob.get("/v1/trust").json() == {"agent_id": "bob", "trust": {"alice": 0.25, "carol": 0.0}}
    assert alice.get("/v1/trust").json() == {"agent_id": "alice", "trust": {}}  # each agent has its own

    after = bob.post("/v1/search", json={"space": "team", "query": "deploy key"}).json()["hits"][0]["score"]
    assert after == pytest.approx(before * 0.25)  # alice's memories count a quarter for bob
    assert carol.get("/v1/trust").json() == {"agent_id": "carol", "trust": {}}


def test_a_users_memory_with_spaces_reads_the_spaces_as_the_acting_agent(
    alice: httpx.Client, bob: httpx.Client
) -> None:
    assert alice.post("/v1/memories", json={"space": "team", "messages": "The deploy key is in the vault"}).is_success
    for agent, text in (("bot", "Ana keeps the deploy key notes"), ("other", "Ana deploy key spare")):
        added = bob.post("/v1/memories", json={"user_id": "ana", "agent_id": agent, "messages": text})
        assert added.status_code == 201, added.text
    body = {"user_id": "ana", "query": "deploy key", "spaces": ["team"], "filters": {"agent_id": "bot"}}
    hits = bob.post("/v1/search", json=body).json()["hits"]
    # filters.agent_id filters the user's turns; the space is read as bob, whoever wrote its memories.
    assert {(hit["space"], hit["written_by"]) for hit in hits} == {(None, "bot"), ("team", "alice")}
    before = next(hit["score"] for hit in hits if hit["space"] == "team")
    bob.put("/v1/trust/alice", json={"weight": 0.5})
    hits = bob.post("/v1/search", json=body).json()["hits"]
    assert next(hit["score"] for hit in hits if hit["space"] == "team") == pytest.approx(before * 0.5)


def test_share_copies_into_a_space_once(alice: httpx.Client, bob: httpx.Client) -> None:
    added = alice.post("/v1/memories", json={"user_id": "ana", "messages": "Ana is allergic to peanuts", "id": "m-1"})
    assert added.status_code == 201, added.text
    shared = alice.post("/v1/spaces/team/share", json={"ids": ["m-1"], "user_id": "ana"})
    assert shared.status_code == 201, shared.text
    _shows_no_namespace(shared)
    [copy] = shared.json()["memories"]
    assert (copy["space"], copy["user_id"], copy["agent_id"], copy["content"]) == (
        "team",
        None,
        "alice",
        "Ana is allergic to peanuts",
    )
    again = alice.post("/v1/spaces/team/share", json={"ids": ["m-1"], "user_id": "ana"})
    assert again.json()["memories"] == shared.json()["memories"]  # idempotent: the same copy
    assert _history(bob, space="team") == ["Ana is allergic to peanuts"]
    assert bob.get(f"/v1/memories/{copy['id']}", params={"space": "team"}).json() == copy
    assert _history(alice, user_id="ana") == ["Ana is allergic to peanuts"]  # the source stays

    _error(alice.post("/v1/spaces/team/share", json={"ids": ["m-404"], "user_id": "ana"}), 404, "not_found")
    into_itself = alice.post("/v1/spaces/team/share", json={"ids": [copy["id"]], "space": "team"})
    _error(into_itself, 422, "invalid_input")
    assert _history(bob, space="team") == ["Ana is allergic to peanuts"]
