"""Every endpoint's happy path, over a real uvicorn server with httpx."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest

from memstrata import Memory, __version__

LISBON = "I moved to Lisbon in May and I love the tram"


def add(client: httpx.Client, messages: object, user_id: str = "ana", **fields: object) -> list[dict[str, object]]:
    """POST /v1/memories; the stored memories."""
    response = client.post("/v1/memories", json={"messages": messages, "user_id": user_id, **fields})
    assert response.status_code == 201, response.text
    memories: list[dict[str, object]] = response.json()["memories"]
    return memories


def test_health_needs_no_key(anonymous: httpx.Client) -> None:
    response = anonymous.get("/v1/health")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_version_names_the_tenant_and_model(client: httpx.Client, memory: Memory) -> None:
    body = client.get("/v1/version").json()
    assert body == {
        "version": __version__,
        "api": "v1",
        "embedder": memory.embedder.model_id,
        "tenant": "acme",
        "role": "admin",
    }


def test_add_a_string_returns_plain_ids_and_is_stored_under_the_tenant(client: httpx.Client, memory: Memory) -> None:
    [stored] = add(client, LISBON, session_id="s1", agent_id="bot", metadata={"source": "chat"}, importance=0.5)
    assert stored["user_id"] == "ana"
    assert stored["content"] == LISBON
    assert (stored["session_id"], stored["agent_id"], stored["metadata"], stored["importance"]) == (
        "s1",
        "bot",
        {"source": "chat"},
        0.5,
    )
    assert "/" not in str(stored["id"])
    inside = memory.get(f"acme/{stored['id']}", user_id="acme/ana")
    assert inside.content == LISBON


def test_add_a_list_keeps_roles_names_ids_and_the_timestamp(client: httpx.Client) -> None:
    when = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    stored = add(
        client,
        [
            {"role": "user", "content": "I'm allergic to peanuts", "name": "Ana", "id": "m-1"},
            {"role": "assistant", "content": "Noted, no peanuts.", "metadata": {"turn": 2}},
        ],
        timestamp=when.isoformat(),
    )
    assert [item["role"] for item in stored] == ["user", "assistant"]
    assert stored[0]["id"] == "m-1"
    assert stored[0]["name"] == "Ana"
    assert stored[1]["metadata"] == {"turn": 2}
    assert all(item["created_at"] == "2024-05-01T12:00:00Z" for item in stored)


def test_add_with_the_same_id_is_a_safe_retry(client: httpx.Client) -> None:
    first = add(client, LISBON, id="fixed")
    again = add(client, LISBON, id="fixed")
    assert first == again
    assert len(client.get("/v1/memories", params={"user_id": "ana"}).json()["memories"]) == 1


def test_add_with_an_id_of_different_content_is_a_conflict(client: httpx.Client) -> None:
    add(client, LISBON, id="fixed")
    response = client.post("/v1/memories", json={"messages": "something else", "user_id": "ana", "id": "fixed"})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "id_conflict"
    assert "'fixed'" in response.json()["error"]["message"]
    assert "acme/" not in response.text


def test_search_finds_what_was_added(client: httpx.Client) -> None:
    [stored] = add(client, LISBON)
    add(client, "My sister works as a nurse in Porto")
    hits = client.post("/v1/search", json={"query": "where does she live? Lisbon", "user_id": "ana"}).json()["hits"]
    assert hits[0]["id"] == stored["id"]
    assert hits[0]["turn"]["id"] == stored["id"]
    assert hits[0]["source_turn_ids"] == [stored["id"]]
    assert hits[0]["tier"] == "episodic"
    assert set(hits[0]["ranks"]) <= {"fulltext", "vector"}


@pytest.mark.parametrize("mode", ["hybrid", "fulltext", "vector"])
def test_search_modes_and_filters(client: httpx.Client, mode: str) -> None:
    add(client, "Lisbon trams are yellow", session_id="s1")
    add(client, [{"role": "assistant", "content": "Lisbon has hills"}], session_id="s2")
    body = {
        "query": "Lisbon",
        "user_id": "ana",
        "mode": mode,
        "limit": 5,
        "filters": {"session_id": "s2", "roles": ["assistant"], "after": "2000-01-01T00:00:00Z"},
    }
    hits = client.post("/v1/search", json=body).json()["hits"]
    assert [hit["content"] for hit in hits] == ["Lisbon has hills"]


def test_search_over_derived_tiers(client: httpx.Client, memory: Memory) -> None:
    add(client, "I work as a nurse at the hospital")
    memory.flush()
    response = client.post("/v1/search", json={"query": "nurse", "user_id": "ana", "tiers": ["longterm"]})
    assert response.status_code == 200
    tiers = {hit["tier"] for hit in response.json()["hits"]}
    assert "episodic" in tiers


def test_context_packs_memories_under_the_budget(client: httpx.Client) -> None:
    [stored] = add(client, LISBON, session_id="s1")
    body = {"query": "where does Ana live?", "user_id": "ana", "token_budget": 200, "session_id": "s1"}
    response = client.post("/v1/context", json=body)
    assert response.status_code == 200, response.text
    context = response.json()
    assert context["user_id"] == "ana"
    assert context["token_budget"] == 200
    assert context["tokens"] <= 200
    assert "Lisbon" in context["text"]
    assert stored["id"] in context["turn_ids"]
    assert all("acme/" not in item["id"] for item in context["items"])
    sources = [source for item in context["items"] for source in item["source_turn_ids"]]
    assert stored["id"] in sources and not [source for source in sources if "acme/" in source]


def test_context_abridges_later_excerpts_unless_asked_for_them_verbatim(client: httpx.Client) -> None:
    said = [f"I really think that the hike number {day} was a lot of fun for me." for day in range(1, 7)]
    for day, text in enumerate(said, start=1):
        add(client, text, timestamp=f"2024-03-0{day}T10:00:00Z")
    # 140 tokens hold the six excerpts only abridged; a roomy budget quotes them whole.
    body = {"query": "the hike number", "user_id": "ana", "token_budget": 140}
    abridged = client.post("/v1/context", json=body).json()
    shown = [item["is_abridged"] for item in abridged["items"] if item["kind"] == "episode"]
    assert len(shown) == 6 and 0 < sum(shown) < 6, abridged["text"]
    roomy = client.post("/v1/context", json={**body, "token_budget": 1000}).json()
    assert not any(item["is_abridged"] for item in roomy["items"])
    verbatim = client.post("/v1/context", json={**body, "verbatim": True}).json()
    excerpts = [item for item in verbatim["items"] if item["kind"] == "episode"]
    assert 0 < len(excerpts) < 6 and all(item["text"].removeprefix("user: ") in said for item in excerpts)
    assert not any(item["is_abridged"] for item in verbatim["items"])


def test_context_reads_dates_in_the_requested_time_zone(client: httpx.Client) -> None:
    # 06:30 UTC on 10 August is still 9 August in Los Angeles.
    add(client, [{"role": "user", "content": "I moved to Lisbon yesterday"}], timestamp="2022-08-10T06:30:00Z")
    dates = {}
    for zone in ("UTC", "America/Los_Angeles"):
        body = {"query": "where did I move?", "user_id": "ana", "token_budget": 200, "timezone": zone}
        response = client.post("/v1/context", json=body)
        assert response.status_code == 200, response.text
        dates[zone] = response.json()["text"]
    assert "[Wednesday 10 August 2022]" in dates["UTC"] and "[yesterday = 9 August 2022]" in dates["UTC"]
    assert "[Tuesday 9 August 2022]" in dates["America/Los_Angeles"]
    assert "[yesterday = 8 August 2022]" in dates["America/Los_Angeles"]


def test_chat_answers_from_memory_and_stores_the_message(client: httpx.Client) -> None:
    add(client, LISBON, session_id="s1")
    response = client.post("/v1/chat", json={"message": "Where does Ana live?", "user_id": "ana", "session_id": "s2"})
    assert response.status_code == 200, response.text
    reply = response.json()
    assert reply["is_extractive"] and reply["model"] == "none" and "Lisbon" in reply["answer"]
    assert reply["memories"] and all("acme/" not in item["id"] for item in reply["memories"])
    [stored] = reply["turn_ids"]  # without an LLM only the user's message is stored
    got = client.get(f"/v1/memories/{stored}", params={"user_id": "ana"})
    assert got.status_code == 200 and got.json()["content"] == "Where does Ana live?"
    assert client.delete(f"/v1/memories/{stored}", params={"user_id": "ana"}).status_code == 204
    assert client.post("/v1/chat", json={"message": " ", "user_id": "ana"}).status_code == 422


def test_a_chat_exchange_exported_and_imported_again_is_recognised(client: httpx.Client) -> None:
    asked = client.post("/v1/chat", json={"message": "Where do I live?", "user_id": "ana"})
    assert asked.status_code == 200, asked.text
    exported = client.get("/v1/export", params={"user_id": "ana"})
    ids = [json.loads(line)["id"] for line in exported.text.splitlines()[1:-1]]
    assert ids == asked.json()["turn_ids"]
    imported = client.post("/v1/import", content=exported.content, headers={"Content-Type": "application/x-ndjson"})
    assert imported.status_code == 200, imported.text
    assert imported.json()["turns"] == 0 and imported.json()["skipped"] == len(ids)
    assert len(client.get("/v1/memories", params={"user_id": "ana"}).json()["memories"]) == len(ids)


def test_get_and_delete_one_memory(client: httpx.Client) -> None:
    [stored] = add(client, LISBON, id="with/slash")
    path = "/v1/memories/with/slash"
    got = client.get(path, params={"user_id": "ana"})
    assert got.status_code == 200
    assert got.json() == stored
    assert client.delete(path, params={"user_id": "ana"}).status_code == 204
    missing = client.get(path, params={"user_id": "ana"})
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    assert client.delete(path, params={"user_id": "ana"}).status_code == 404


def test_an_id_spelled_with_the_tenant_prefix_is_not_another_name_for_the_clients_id(client: httpx.Client) -> None:
    add(client, LISBON, id="m-1")  # stored as "acme/m-1"
    for response in (
        client.get("/v1/memories/acme/m-1", params={"user_id": "ana"}),
        client.delete("/v1/memories/acme/m-1", params={"user_id": "ana"}),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["message"] == "no memory with id 'acme/m-1' for user 'ana'"
    assert client.get("/v1/memories/m-1", params={"user_id": "ana"}).json()["content"] == LISBON


def test_history_pages_with_next_offset(client: httpx.Client) -> None:
    ids = [add(client, f"message number {index}", session_id="s1")[0]["id"] for index in range(5)]
    add(client, "in another session", session_id="s2")
    seen: list[object] = []
    offset: int | None = 0
    while offset is not None:
        page = client.get("/v1/memories", params={"user_id": "ana", "session_id": "s1", "limit": 2, "offset": offset})
        body = page.json()
        seen.extend(item["id"] for item in body["memories"])
        offset = body["next_offset"]
    assert seen == ids
    newest = client.get("/v1/memories", params={"user_id": "ana", "session_id": "s1", "newest_first": "true"})
    assert [item["id"] for item in newest.json()["memories"]] == ids[::-1]


def test_forget_a_session_then_the_user(client: httpx.Client) -> None:
    add(client, "first session", session_id="s1")
    add(client, "second session", session_id="s2")
    forgotten = client.post("/v1/forget", json={"user_id": "ana", "session_id": "s1"}).json()
    assert forgotten == {"user_id": "ana", "space": None, "turns": 1, "agent_id": None, "session_id": "s1"}
    assert client.post("/v1/forget", json={"user_id": "ana"}).json()["turns"] == 1
    assert client.get("/v1/memories", params={"user_id": "ana"}).json()["memories"] == []


def test_tier_views(client: httpx.Client, memory: Memory) -> None:
    add(client, "I work as a nurse at the hospital in Lisbon", session_id="s1")
    add(client, [{"role": "assistant", "content": "Nursing in Lisbon sounds demanding."}], session_id="s1")
    roof = [add(client, f"The garden shed roof leaks near the window, repair attempt {n} failed.")[0] for n in range(4)]
    memory.flush()
    inspection = client.get("/v1/inspect", params={"user_id": "ana", "limit": 5}).json()
    assert inspection["user_id"] == "ana"
    assert inspection["counts"]["episodic"] == 6
    assert all(turn["user_id"] == "ana" for turn in inspection["working"])
    consolidated = client.post("/v1/consolidate", json={"user_id": "ana"})
    assert consolidated.status_code == 200
    made = consolidated.json()["consolidations"]
    assert made, "four alike messages form a cluster"
    assert {turn_id for item in made for turn_id in item["source_turn_ids"]} >= {turn["id"] for turn in roof}
    for item in made:
        assert item["user_id"] == "ana"
        assert all("acme/" not in turn_id for turn_id in item["source_turn_ids"])
    listed = client.get("/v1/consolidations", params={"user_id": "ana"})
    assert listed.json()["consolidations"] == consolidated.json()["consolidations"]
    profile = client.get("/v1/profile", params={"user_id": "ana"}).json()
    assert profile["user_id"] == "ana"
    assert isinstance(profile["profile"], dict)
    cells = client.get("/v1/cells", params={"user_id": "ana", "include_superseded": "true"}).json()["cells"]
    assert all(cell["user_id"] == "ana" and "acme/" not in cell["source_turn_id"] for cell in cells)
    assert client.get("/v1/patterns", params={"user_id": "ana", "query": "nurse"}).status_code == 200
    graph = client.get("/v1/graph", params={"user_id": "ana", "query": "Lisbon hospital"}).json()
    assert set(graph) == {"nodes", "edges"}


def test_segment_turns_lists_the_turns_filed_in_each_segment(client: httpx.Client, memory: Memory) -> None:
    # Twelve exchanges in one session: the two oldest leave working memory (ten) for mid-term.
    said = ["I live in Lisbon near the river", "My cat is called Miso"]
    said += [f"Note number {n} about subject{n}" for n in range(10)]
    messages = [
        message
        for text in said
        for message in ({"role": "user", "content": text}, {"role": "assistant", "content": f"Noted: {text}."})
    ]
    stored = add(client, messages, session_id="s1")
    memory.flush()
    segments = client.get("/v1/inspect", params={"user_id": "ana"}).json()["segments"]
    listed: dict[str, list[dict[str, object]]] = {}
    for segment in segments:
        response = client.get(f"/v1/segments/{segment['id']}/turns", params={"user_id": "ana"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["segment_id"] == segment["id"]
        assert len(body["turns"]) == segment["turn_count"]
        listed[segment["id"]] = body["turns"]
    # However the policy groups them, each segment lists its turns in the order they were said, and together
    # the segments hold exactly the turns that left working memory.
    position = {turn["id"]: index for index, turn in enumerate(stored)}
    assert all(
        [position[turn["id"]] for turn in turns] == sorted(position[turn["id"]] for turn in turns)
        for turns in listed.values()
    )
    filed = sorted((turn for turns in listed.values() for turn in turns), key=lambda turn: position[turn["id"]])
    assert [(turn["id"], turn["role"], turn["content"]) for turn in filed] == [
        (stored[0]["id"], "user", "I live in Lisbon near the river"),
        (stored[1]["id"], "assistant", "Noted: I live in Lisbon near the river."),
        (stored[2]["id"], "user", "My cat is called Miso"),
        (stored[3]["id"], "assistant", "Noted: My cat is called Miso."),
    ]
    assert all(turn["user_id"] == "ana" and turn["session_id"] == "s1" for turn in filed)

    someone_else = client.get(f"/v1/segments/{segments[0]['id']}/turns", params={"user_id": "bea"})
    unknown = client.get("/v1/segments/01JB2Q8V6Z3N4M5K6J7H8G9F0E/turns", params={"user_id": "ana"})
    for response, user in ((someone_else, "bea"), (unknown, "ana")):
        assert response.status_code == 404, response.text
        error = response.json()["error"]
        assert error["code"] == "not_found"
        assert f"user '{user}' has no mid-term segment" in error["message"]
        assert "acme/" not in response.text and "Lisbon" not in response.text


def test_failed_jobs_are_counted_and_retried_per_tenant(
    client: httpx.Client, memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("memstrata.tiers.worker.FIRST_RETRY_DELAY_SECONDS", 0.01)
    working = memory.parts.worker._run

    def outage(job: object) -> None:
        raise RuntimeError("the database is restarting")

    memory.parts.worker._run = outage  # type: ignore[method-assign]
    add(client, "I live in Porto.")
    memory.add("I live in Faro.", user_id="globex/ana")
    memory.flush(timeout=30)
    memory.parts.worker._run = working  # type: ignore[method-assign]
    assert client.get("/v1/inspect", params={"user_id": "ana"}).json()["failed_jobs"] == 1
    retried = client.post("/v1/jobs/retry", json={"user_id": "ana"})
    assert retried.status_code == 200, retried.text
    assert retried.json() == {"user_id": "ana", "space": None, "requeued": 1}
    memory.flush(timeout=30)
    assert client.get("/v1/inspect", params={"user_id": "ana"}).json()["failed_jobs"] == 0
    assert client.get("/v1/profile", params={"user_id": "ana"}).json()["profile"] == {"location": "Porto"}
    assert client.post("/v1/jobs/retry", json={"user_id": "ana"}).json()["requeued"] == 0
    assert memory.inspect(user_id="globex/ana").failed_jobs == 1, "another tenant's jobs stay as they were"


def test_prune_episodic_keeps_the_newest(client: httpx.Client) -> None:
    for index in range(3):
        add(client, f"note {index}")
    pruned = client.post("/v1/prune", json={"user_id": "ana", "tier": "episodic", "keep_last": 1}).json()
    assert pruned == {"user_id": "ana", "space": None, "tier": "episodic", "deleted": 2}
    assert [m["content"] for m in client.get("/v1/memories", params={"user_id": "ana"}).json()["memories"]] == [
        "note 2"
    ]


def test_export_then_import_round_trips_within_the_tenant(client: httpx.Client) -> None:
    add(client, LISBON, id="a-1", session_id="s1")
    add(client, "Bea likes tea", user_id="bea")
    exported = client.get("/v1/export", params={"embeddings": "true"})
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in exported.text.splitlines()]
    assert lines[0]["kind"] == "memstrata-export"
    turns = {line["id"]: line for line in lines[1:-1]}
    assert turns["a-1"]["user_id"] == "ana"
    assert {line["user_id"] for line in turns.values()} == {"ana", "bea"}
    assert all("embedding" in line for line in turns.values())
    only_bea = client.get("/v1/export", params={"user_id": "bea"}).text.splitlines()
    assert [json.loads(line)["user_id"] for line in only_bea[1:-1]] == ["bea"]

    client.post("/v1/forget", json={"user_id": "ana"})
    imported = client.post("/v1/import", content=exported.content, headers={"Content-Type": "application/x-ndjson"})
    assert imported.status_code == 200, imported.text
    assert imported.json() == {"turns": 1, "embeddings": 1, "skipped": 1}
    assert client.get("/v1/memories/a-1", params={"user_id": "ana"}).json()["content"] == LISBON


def test_openapi_schema_is_served(anonymous: httpx.Client) -> None:
    schema = anonymous.get("/openapi.json").json()
    assert "/v1/memories" in schema["paths"]
