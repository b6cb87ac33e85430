"""``GET /v1/export`` reads only the caller's tenant: its users are listed by prefix, then exported one by one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.server.conftest import LiveServer, make_caller

from memstrata import Memory
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.server.app import create_app
from memstrata.server.keys import open_key_store
from memstrata.storage import open_store

GLOBEX_USERS = 60
GLOBEX_TURNS_EACH = 20


class RecordingStore:
    """A real SQLite store that notes each listing of users and each whole-user (or whole-store) read."""

    def __init__(self, url: str) -> None:
        self._store = open_store(url)
        self.prefixes: list[str] = []
        self.iterated: list[str | None] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def user_ids(self, prefix: str) -> list[str]:
        """Record the prefix, then list."""
        self.prefixes.append(prefix)
        return self._store.user_ids(prefix)

    def iterate(self, user_id: str | None = None) -> Iterator[tuple[int, Any]]:
        """Record whose turns are read, then read them."""
        self.iterated.append(user_id)
        return self._store.iterate(user_id)


@pytest.fixture
def recording(tmp_path: Path) -> RecordingStore:
    """The store under the app; closed by the Memory that owns it."""
    return RecordingStore(f"sqlite:///{tmp_path / 'export.db'}")


@pytest.fixture
def acme_http(recording: RecordingStore, tmp_path: Path) -> Iterator[httpx.Client]:
    """acme's client on a server whose store also holds many turns of globex and of a tenant named acme-corp."""
    with Memory(tmp_path / "home", store=recording, embedder=HashEmbedder(), background=False) as memory:  # type: ignore[arg-type]
        for number in range(GLOBEX_USERS):
            texts = [{"role": "user", "content": f"globex secret {number}.{turn}"} for turn in range(GLOBEX_TURNS_EACH)]
            memory.add(texts, user_id=f"globex/user-{number}")
        memory.add("acme-corp's own note", user_id="acme-corp/ana")  # its tenant name starts with "acme"
        memory.add("Ana moved to Lisbon", user_id="acme/ana", id="acme/a-1")
        bea = [("acme/b-1", "user", "Bea likes tea"), ("acme/b-2", "assistant", "Noted")]
        memory.add([{"id": id_, "role": role, "content": text} for id_, role, text in bea], user_id="acme/bea")
        keys = open_key_store(memory.settings.resolved_storage_url, memory.settings)
        try:
            acme = make_caller(keys, "acme")
            with (
                LiveServer(create_app(memory, keys=keys)) as live,
                httpx.Client(base_url=live.url, headers=acme.headers, timeout=30) as http,
            ):
                recording.prefixes.clear()
                recording.iterated.clear()
                yield http
        finally:
            keys.close()


def _records(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines()]


def test_export_of_all_users_lists_the_tenant_by_prefix_and_reads_only_its_users(
    acme_http: httpx.Client, recording: RecordingStore
) -> None:
    records = _records(acme_http.get("/v1/export", params={"embeddings": "true"}))
    assert recording.prefixes == ["acme/"]
    assert recording.iterated == ["acme/ana", "acme/bea"]  # never None (everything), never another tenant's user
    assert [record["kind"] for record in records] == ["memstrata-export", "turn", "turn", "turn", "end"]
    assert records[-1]["turns"] == 3
    assert [(record["user_id"], record["content"]) for record in records[1:-1]] == [
        ("ana", "Ana moved to Lisbon"),
        ("bea", "Bea likes tea"),
        ("bea", "Noted"),
    ]
    assert [record["id"] for record in records[1:-1]] == ["a-1", "b-1", "b-2"]
    assert all("embedding" in record for record in records[1:-1])


def test_export_of_one_user_reads_only_that_user(acme_http: httpx.Client, recording: RecordingStore) -> None:
    records = _records(acme_http.get("/v1/export", params={"user_id": "bea"}))
    assert recording.prefixes == []
    assert recording.iterated == ["acme/bea"]
    assert [record["user_id"] for record in records[1:-1]] == ["bea", "bea"]


def test_an_export_imports_back_whole(acme_http: httpx.Client) -> None:
    exported = acme_http.get("/v1/export")
    imported = acme_http.post("/v1/import", content=exported.content, headers={"Content-Type": "application/x-ndjson"})
    assert imported.status_code == 200, imported.text
    assert imported.json() == {"turns": 0, "embeddings": 0, "skipped": 3}


def test_an_upload_with_an_unknown_key_in_a_line_is_refused_naming_the_line_and_key(acme_http: httpx.Client) -> None:
    lines = acme_http.get("/v1/export").content.decode().splitlines()
    record = json.loads(lines[2])
    record["colour"] = "red"
    upload = "\n".join([*lines[:2], json.dumps(record), *lines[3:]]) + "\n"
    refused = acme_http.post("/v1/import", content=upload, headers={"Content-Type": "application/x-ndjson"})
    assert refused.status_code == 422
    assert refused.json()["error"]["message"].startswith("line 3: a turn line has unknown keys ['colour']")


def test_an_export_with_a_byte_order_mark_imports_as_on_the_command_line(acme_http: httpx.Client) -> None:
    exported = acme_http.get("/v1/export").content
    headers = {"Content-Type": "application/x-ndjson"}
    imported = acme_http.post("/v1/import", content="\ufeff".encode() + exported, headers=headers)
    assert imported.status_code == 200, imported.text
    assert imported.json()["skipped"] == 3
    cut = b"\n".join(exported.splitlines()[:-1]) + b"\n"  # a download that stopped before its end line
    refused = acme_http.post("/v1/import", content=cut, headers=headers)
    assert refused.status_code == 422 and "cut short" in refused.json()["error"]["message"]
