"""A bounded schemathesis run against the live server: whatever the schema allows, no 500 and answers that match it."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from tests.server.conftest import Caller, LiveServer

# /v1/import takes a JSONL upload: send whatever bytes are generated, as for octet streams.
schemathesis.serializer.alias("application/x-ndjson", "application/octet-stream")
SCHEMA = schemathesis.openapi.from_path(Path(__file__).resolve().parents[2] / "docs" / "openapi.json")


@pytest.mark.slow
@SCHEMA.parametrize()
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_keeps_its_schema(case: schemathesis.Case, live: LiveServer, acme: Caller) -> None:
    # Our checks are stricter than a JSON schema can say (blank or NUL ids, text over max_text_bytes), so a
    # schema-valid request may rightly get 422; and unknown query parameters are ignored, as HTTP servers do.
    # Every other check applies: no 5xx, and statuses, content types and bodies as the schema documents them.
    case.call_and_validate(
        base_url=live.url,
        headers=acme.headers,
        excluded_checks=[schemathesis.checks.positive_data_acceptance, schemathesis.checks.negative_data_rejection],
    )
