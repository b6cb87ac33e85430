"""Bad input changes nothing: each request is refused with a 4xx (search syntax is just words), never a 500.

One server for the module: every bad request in it is sent to the same store, and after
each one the store must hold exactly what was seeded.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.inputs import nested
from tests.server.conftest import LiveServer

from memstrata import Memory
from memstrata.config import DATABASE_FILE_NAME, load_settings
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.server.app import create_app
from memstrata.server.keys import create_key, open_key_store

JSON = {"Content-Type": "application/json"}
JSONL = {"Content-Type": "application/x-ndjson"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Path]]:
    """A live server over a seeded store, with acme's client; and the database file."""
    home = tmp_path_factory.mktemp("bad-input")
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        keys = open_key_store(memory.settings.resolved_storage_url, memory.settings)
        _, secret = create_key(keys, tenant="acme")
        with (
            LiveServer(create_app(memory, keys=keys)) as live,
            httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {secret}"}, timeout=60) as http,
        ):
            seed = [{"role": "user", "content": "I live in Lisbon", "id": "seed-1"}, {"content": "tea, not coffee"}]
            assert http.post("/v1/memories", json={"messages": seed, "user_id": "ana", "session_id": "s1"}).is_success
            yield http, home / DATABASE_FILE_NAME
        keys.close()


def _snapshot(database: Path) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(database)
    try:
        rows = connection.execute("SELECT id, user_id, session_id, role, content, metadata FROM turns ORDER BY seq")
        vectors = connection.execute("SELECT COUNT(*) FROM turn_vectors").fetchone()
        return [*rows.fetchall(), vectors]
    finally:
        connection.close()


def _raw(body: bytes) -> tuple[bytes, dict[str, str]]:
    return body, JSON


def _add(**fields: object) -> tuple[bytes, dict[str, str]]:
    body = {"messages": "a message", "user_id": "ana"} | fields
    return json.dumps(body).encode(), JSON


DEEP = b'{"messages": "x", "user_id": "ana", "metadata": {"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"

ADDS = {
    "content over max_text_bytes": _add(messages="a" * 1_000_001),
    "messages a number": _add(messages=123),
    "messages an empty list": _add(messages=[]),
    "messages of blanks": _add(messages="  \n\t "),
    "unknown role": _add(messages=[{"role": "wizard", "content": "hi"}]),
    "unknown message key": _add(messages=[{"content": "hi", "colour": "red"}]),
    "second message bad": _add(messages=[{"content": "fine"}, {"content": ""}]),
    "duplicate ids in one call": _add(messages=[{"content": "a", "id": "x"}, {"content": "b", "id": "x"}]),
    "user_id a list": _add(user_id=["ana"]),
    "user_id empty": _add(user_id=""),
    "user_id too long": _add(user_id="u" * 300),
    "importance a string": _add(importance="high"),
    "importance above 1": _add(importance=1.5),
    "importance true": _add(importance=True),
    "importance a numeric string": _add(importance="0.5"),
    "metadata nested too deep for JSON tools": _add(metadata=nested(300)),
    "timestamp on the calendar's last day": _add(timestamp="9999-12-31T23:00:00Z"),
    "naive timestamp": _add(timestamp="2024-01-01T00:00:00"),
    "not a timestamp": _add(timestamp="yesterday"),
    "timestamp a number of seconds": _add(timestamp=0),
    "timestamp a number, seconds or milliseconds": _add(timestamp=100_000_000_000),
    "timestamp digits as text": _add(timestamp="1700000000"),
    "metadata a list": _add(metadata=[1, 2]),
    "more messages than max_messages_per_add": _add(messages=[{"content": f"m{n}"} for n in range(1_001)]),
    "metadata over max_metadata_bytes": _add(metadata={"x": "y" * 70_000}),
    "a message's metadata over max_metadata_bytes": _add(messages=[{"content": "a", "metadata": {"x": "y" * 70_000}}]),
    "unknown field": _add(colour="blue"),
    "id over the length limit": _add(id="i" * 300),
    "id for several messages": _add(messages=[{"content": "a"}, {"content": "b"}], id="one"),
    "id conflicting with the seed": _add(messages="different words", id="seed-1"),
    "lone surrogate in content": _raw(b'{"messages": "bad \\ud800 text", "user_id": "ana"}'),
    "lone surrogate in user_id": _raw(b'{"messages": "x", "user_id": "\\udfff"}'),
    "lone surrogate in a metadata key": _raw(b'{"messages": "x", "user_id": "ana", "metadata": {"\\ud800": 1}}'),
    "NUL in content": _raw(b'{"messages": "a\\u0000b", "user_id": "ana"}'),
    "NUL in user_id": _raw(b'{"messages": "x", "user_id": "an\\u0000a"}'),
    "NUL in session_id": _raw(b'{"messages": "x", "user_id": "ana", "session_id": "\\u0000"}'),
    "NUL in a message id": _raw(b'{"messages": [{"content": "x", "id": "a\\u0000"}], "user_id": "ana"}'),
    "NUL in a name": _raw(b'{"messages": [{"content": "x", "name": "\\u0000"}], "user_id": "ana"}'),
    "invalid UTF-8": _raw(b'{"messages": "\xff\xfe", "user_id": "ana"}'),
    "truncated JSON": _raw(b'{"messages": "x", "user_id": "an'),
    "not JSON": _raw(b"messages=x&user_id=ana"),
    "empty body": _raw(b""),
    "JSON null": _raw(b"null"),
    "JSON list": _raw(b'["x", "ana"]'),
    "NaN importance": _raw(b'{"messages": "x", "user_id": "ana", "importance": NaN}'),
    "huge number importance": _raw(b'{"messages": "x", "user_id": "ana", "importance": 1e999}'),
    "nested too deeply": _raw(DEEP),
    "user_id named twice": _raw(b'{"messages": "x", "user_id": "ana", "user_id": "bob"}'),
    "a key named twice in metadata": _raw(b'{"messages": "x", "user_id": "ana", "metadata": {"a": 1, "a": 2}}'),
    "a key named twice in a message": _raw(b'{"messages": [{"content": "x", "content": "y"}], "user_id": "ana"}'),
}


@pytest.mark.parametrize("name", sorted(ADDS))
def test_a_bad_add_stores_nothing(server: tuple[httpx.Client, Path], name: str) -> None:
    http, database = server
    before = _snapshot(database)
    body, headers = ADDS[name]
    response = http.post("/v1/memories", content=body, headers=headers)
    assert 400 <= response.status_code < 500, response.text
    assert response.status_code in (400, 409, 422)
    assert set(response.json()) == {"error"}
    assert _snapshot(database) == before


@pytest.mark.parametrize(
    ("fields", "limit", "setting"),
    [
        ({"messages": [{"content": f"m{n}"} for n in range(1_001)]}, "1,000", "max_messages_per_add"),
        ({"metadata": {"x": "y" * 70_000}}, "65,536", "max_metadata_bytes"),
        ({"messages": [{"content": "a", "metadata": {"x": "y" * 70_000}}]}, "65,536", "max_metadata_bytes"),
    ],
    ids=["messages", "metadata", "a message's metadata"],
)
def test_an_add_over_a_size_limit_is_422_naming_the_limit_and_its_setting(
    server: tuple[httpx.Client, Path], fields: dict[str, object], limit: str, setting: str
) -> None:
    http, _ = server
    body, headers = _add(**fields)
    response = http.post("/v1/memories", content=body, headers=headers)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert f"over the limit of {limit}" in error["message"] and setting in error["message"]


SEARCH_SYNTAX = [
    '"',
    '"unbalanced',
    "NEAR(lisbon tea, 2)",
    "lisbon* OR tea",
    "content:lisbon",
    "^lisbon",
    "(",
    ")",
    "AND",
    "NOT",
    "-lisbon",
    "\\",
    "'; DROP TABLE turns; --",
    "1' OR '1'='1",
    "lisbon') UNION SELECT * FROM api_keys --",
    "{lisbon}",
    "\u202e\u200b\ufeff",
    "😀 emoji 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
]


@pytest.mark.parametrize("mode", ["hybrid", "fulltext", "vector"])
def test_search_syntax_and_sql_are_just_words(server: tuple[httpx.Client, Path], mode: str) -> None:
    http, database = server
    before = _snapshot(database)
    for query in SEARCH_SYNTAX:
        response = http.post("/v1/search", json={"query": query, "user_id": "ana", "mode": mode})
        assert response.status_code == 200, (query, response.text)
    assert _snapshot(database) == before


def test_search_with_quotes_still_finds_the_words(server: tuple[httpx.Client, Path]) -> None:
    http, _ = server
    hits = http.post("/v1/search", json={"query": '"Lisbon" OR NEAR(', "user_id": "ana", "mode": "fulltext"})
    assert hits.json()["hits"][0]["id"] == "seed-1"


BAD_READS = [
    ("GET", "/v1/memories", {"user_id": "an\x00a"}),
    ("GET", "/v1/memories", {"user_id": "ana", "limit": "0"}),
    ("GET", "/v1/memories", {"user_id": "ana", "limit": "1001"}),
    ("GET", "/v1/memories", {"user_id": "ana", "offset": "-1"}),
    ("GET", "/v1/memories", {"user_id": "ana", "offset": str(2**70)}),
    ("GET", "/v1/memories", {"user_id": "ana", "limit": "ten"}),
    ("GET", "/v1/memories", {}),
    ("GET", "/v1/memories/seed-1", {}),
    ("GET", "/v1/memories/seed%001", {"user_id": "ana"}),
    ("GET", "/v1/memories/" + "i" * 300, {"user_id": "ana"}),
    ("DELETE", "/v1/memories/seed-1", {"user_id": ""}),
    ("DELETE", "/v1/memories/seed-1", {"user_id": " "}),
    ("GET", "/v1/cells", {"user_id": "ana", "limit": "100000"}),
    ("GET", "/v1/graph", {"user_id": "ana"}),
    ("GET", "/v1/graph", {"user_id": "ana", "query": "   "}),
    ("GET", "/v1/inspect", {"user_id": "ana", "limit": "101"}),
    ("GET", "/v1/segments/01JB2Q8V6Z3N4M5K6J7H8G9F0E/turns", {}),
    ("GET", "/v1/segments/01JB2Q8V6Z3N4M5K6J7H8G9F0E/turns", {"user_id": " "}),
    ("GET", "/v1/segments/%20/turns", {"user_id": "ana"}),
    ("GET", "/v1/segments/seg%00ment/turns", {"user_id": "ana"}),
    ("GET", "/v1/segments/" + "s" * 300 + "/turns", {"user_id": "ana"}),
    ("GET", "/v1/export", {"user_id": "\x00"}),
]


@pytest.mark.parametrize(("method", "path", "params"), BAD_READS)
def test_bad_queries_and_paths_are_422(
    server: tuple[httpx.Client, Path], method: str, path: str, params: dict[str, str]
) -> None:
    http, database = server
    before = _snapshot(database)
    response = http.request(method, path, params=params)
    assert response.status_code == 422, response.text
    assert _snapshot(database) == before


BAD_BODIES = [
    ("/v1/search", {"query": "", "user_id": "ana"}),
    ("/v1/search", {"query": "x", "user_id": "ana", "mode": "magic"}),
    ("/v1/search", {"query": "x", "user_id": "ana", "tiers": ["attic"]}),
    ("/v1/search", {"query": "x", "user_id": "ana", "limit": 0}),
    ("/v1/search", {"query": "x", "user_id": "ana", "limit": "5"}),
    ("/v1/search", {"query": "x", "user_id": "ana", "limit": True}),
    ("/v1/search", {"query": "x", "user_id": "ana", "diversity": True}),
    ("/v1/context", {"query": "x", "user_id": "ana", "include_superseded": "true"}),
    ("/v1/prune", {"user_id": "ana", "tier": "episodic", "keep_last": True}),
    ("/v1/search", {"query": "x", "user_id": "ana", "diversity": 1.5}),
    ("/v1/search", {"query": "x", "user_id": "ana", "filters": {"roles": ["wizard"]}}),
    ("/v1/search", {"query": "x", "user_id": "ana", "filters": {"after": "not a date"}}),
    ("/v1/search", {"query": "x", "user_id": "ana", "filters": {"after": 1}}),
    ("/v1/search", {"query": "x", "user_id": "ana", "filters": {"before": "1700000000"}}),
    ("/v1/context", {"query": "x", "user_id": "ana", "token_budget": 0}),
    ("/v1/context", {"query": "x", "user_id": "ana", "token_budget": 10}),
    ("/v1/context", {"query": "x", "user_id": "ana", "include_superseded": "maybe"}),
    ("/v1/context", {"query": "x", "user_id": "ana", "timezone": "Mars/Olympus"}),
    ("/v1/context", {"query": "x", "user_id": "ana", "verbatim": "true"}),
    ("/v1/context", {"query": "x", "user_id": "ana", "verbatim": 1}),
    ("/v1/search", {"query": "x", "user_id": "ana", "timezone": "../etc/passwd"}),
    ("/v1/search", {"query": "x", "user_id": "ana", "timezone": ""}),
    ("/v1/search", {"query": "x", "user_id": "ana", "timezone": "Europe"}),
    ("/v1/forget", {}),
    ("/v1/forget", {"user_id": ""}),
    ("/v1/forget", {"user_id": "ana", "session_id": "\x00"}),
    ("/v1/consolidate", {"user_id": 7}),
    ("/v1/jobs/retry", {}),
    ("/v1/jobs/retry", {"user_id": "ana", "force": True}),
    ("/v1/prune", {"user_id": "ana", "tier": "episodic"}),
    ("/v1/prune", {"user_id": "ana", "tier": "attic", "keep_last": 1}),
    ("/v1/prune", {"user_id": "ana", "tier": "episodic", "keep_last": -1}),
    ("/v1/prune", {"user_id": "ana", "tier": "episodic", "older_than_seconds": 1e12}),
]


@pytest.mark.parametrize(("path", "body"), BAD_BODIES, ids=lambda value: str(value)[:40])
def test_bad_bodies_change_nothing(server: tuple[httpx.Client, Path], path: str, body: dict[str, object]) -> None:
    http, database = server
    before = _snapshot(database)
    response = http.post(path, json=body)
    assert response.status_code == 422, response.text
    assert _snapshot(database) == before


def _export(*turns: dict[str, object]) -> bytes:
    header = {"kind": "memstrata-export", "version": 1, "embedding_model": "none"}
    base = {"kind": "turn", "role": "user", "created_at": "2024-01-01T00:00:00+00:00"}
    return "".join(json.dumps(line) + "\n" for line in [header, *({**base, **turn} for turn in turns)]).encode()


GOOD = {"id": "new-1", "user_id": "ana", "content": "fine"}
BAD_IMPORTS = {
    "no header": b'{"kind": "turn", "id": "x", "user_id": "ana", "role": "user", "content": "x"}\n',
    "a bad line after a good one": _export(GOOD, {"id": "new-2", "user_id": "ana", "content": ""}),
    "user_id missing": _export(GOOD, {"id": "new-2", "content": "x"}),
    "user_id not a string": _export(GOOD, {"id": "new-2", "user_id": 5, "content": "x"}),
    "id missing": _export(GOOD, {"user_id": "ana", "content": "x"}),
    "id with NUL": _export(GOOD, {"id": "a\x00", "user_id": "ana", "content": "x"}),
    "lone surrogate": _export(GOOD).replace(b'"fine"', b'"\\ud800"'),
    "not JSON": _export(GOOD) + b"{oops\n",
    "a JSON list line": _export(GOOD) + b"[1, 2]\n",
    "not UTF-8": _export(GOOD).replace(b"fine", b"\xff\xfe"),
    "a different message under a seeded id": _export({"id": "seed-1", "user_id": "ana", "content": "rewritten"}),
    "the same id twice": _export(GOOD, GOOD),
    "format version true": _export(GOOD).replace(b'"version": 1', b'"version": true'),
    "format version below 1": _export(GOOD).replace(b'"version": 1', b'"version": -5'),
    "embedding dimension not whole": _export(
        {**GOOD, "embedding": {"model_id": "m", "dimension": 1.9, "vector": "AACAPw=="}}
    ),
    "embedding all zeros": _export({**GOOD, "embedding": {"model_id": "m", "dimension": 1, "vector": "AAAAAA=="}}),
    "empty": b"",
    "a key named twice": _export(GOOD).replace(b'"content": "fine"', b'"content": "fine", "content": "other"'),
}


@pytest.mark.parametrize("name", sorted(BAD_IMPORTS))
def test_a_bad_import_stores_nothing(server: tuple[httpx.Client, Path], name: str) -> None:
    http, database = server
    before = _snapshot(database)
    response = http.post("/v1/import", content=BAD_IMPORTS[name], headers=JSONL)
    assert response.status_code in (409, 422), response.text
    assert "/tmp" not in response.text
    assert _snapshot(database) == before


def test_a_key_named_twice_is_a_bad_request_that_names_it(server: tuple[httpx.Client, Path]) -> None:
    """Parsers differ on which value counts (a proxy may check the first), so neither is taken."""
    http, database = server
    before = _snapshot(database)
    body = b'{"query": "tea", "user_id": "bob", "user_id": "ana"}'
    response = http.post("/v1/search", content=body, headers=JSON)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    assert error["message"] == "the request body is not valid JSON: the key 'user_id' appears twice in one object"
    assert _snapshot(database) == before


UNREADABLE_BODIES = {
    "not UTF-8": (b'{"user_id": "\xff", "query": "tea"}', "it is not UTF-8"),
    "nested too deeply": (
        b'{"user_id": "ana", "query": "a", "filters": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "it is nested too deeply",
    ),
    "a number of 5,000 digits": (
        b'{"user_id": "ana", "query": "a", "limit": ' + b"9" * 5000 + b"}",
        "a number is too long",
    ),
}


@pytest.mark.parametrize("name", sorted(UNREADABLE_BODIES))
def test_a_body_json_cannot_read_is_a_bad_request_but_only_for_a_valid_key(
    server: tuple[httpx.Client, Path], name: str
) -> None:
    http, database = server
    before = _snapshot(database)
    body, reason = UNREADABLE_BODIES[name]
    response = http.post("/v1/search", content=body, headers=JSON)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    assert error["message"].startswith(f"the request body is not valid JSON: {reason}")
    for refused in ({"Authorization": ""}, {"Authorization": "Bearer msk_not-a-real-key"}):
        response = http.post("/v1/search", content=body, headers={**JSON, **refused})
        assert response.status_code == 401, response.text
    assert _snapshot(database) == before


def test_every_json_route_refuses_a_key_named_twice(server: tuple[httpx.Client, Path], tmp_path: Path) -> None:
    """A route added without the strict route class would read duplicate keys silently."""
    http, database = server
    before = _snapshot(database)
    document = create_app(settings=load_settings(home=tmp_path)).openapi()
    operations = [
        (method.upper(), re.sub(r"\{[^}]+\}", "x", path))
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
        if "application/json" in operation.get("requestBody", {}).get("content", {})
    ]
    assert len(operations) >= 8
    for method, path in operations:
        response = http.request(method, path, content=b'{"user_id": "ana", "user_id": "bob"}', headers=JSON)
        assert response.status_code == 400, (method, path, response.text)
        assert "appears twice" in response.json()["error"]["message"]
    assert _snapshot(database) == before
