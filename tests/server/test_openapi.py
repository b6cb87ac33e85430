"""docs/openapi.json is the schema the server serves; a stale copy fails here."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from memstrata.config import load_settings
from memstrata.server.app import create_app, openapi_document

CHECKED_IN = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
REGENERATE = "memstrata serve --print-openapi > docs/openapi.json"


def test_the_checked_in_schema_is_current(home: Path) -> None:
    current = openapi_document(create_app(settings=load_settings(home=home)))
    assert CHECKED_IN.read_text(encoding="utf-8") == current, f"docs/openapi.json is stale; run: {REGENERATE}"


def test_settings_do_not_change_the_schema(home: Path) -> None:
    varied = load_settings(home=home, server_allow_anonymous=True, server_max_body_bytes=10, server_port=1)
    assert openapi_document(create_app(settings=varied)) == CHECKED_IN.read_text(encoding="utf-8")


def test_the_served_schema_is_the_checked_in_one(anonymous: httpx.Client) -> None:
    assert anonymous.get("/openapi.json").json() == json.loads(CHECKED_IN.read_text(encoding="utf-8"))


def test_every_operation_is_documented() -> None:
    schema = json.loads(CHECKED_IN.read_text(encoding="utf-8"))
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            assert operation.get("description") or operation.get("summary"), f"{where} has no description"
            assert "operationId" in operation and "_v1_" not in operation["operationId"], where
            if path != "/v1/health":
                assert operation.get("security") == [{"HTTPBearer": []}], f"{where} does not declare the API key"
                assert "401" in operation["responses"], f"{where} does not document 401"


def test_the_routes_that_call_the_llm_document_its_failure() -> None:
    """A provider failure is 502 on every route that calls the LLM: chat and consolidate."""
    paths = json.loads(CHECKED_IN.read_text(encoding="utf-8"))["paths"]
    for path in ("/v1/chat", "/v1/consolidate"):
        assert "502" in paths[path]["post"]["responses"], path
