"""ProviderClient and the shared option checks: what every remote provider builds from its options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel, SecretStr, ValidationError

from memstrata.remote.costs import CostLog
from memstrata.remote.provider import ApiKey, BaseUrl, ProviderClient, RemoteOptions
from memstrata.remote.usage import Usage
from tests.llm_server import EMBEDDINGS, LLMServer


class Options(RemoteOptions):
    base_url: BaseUrl = "https://example.test/v1"


class OwnOrder(BaseModel):
    base_url: BaseUrl
    api_key: ApiKey = None


def test_options_check_the_url_and_the_key() -> None:
    options = Options(model="m", base_url="http://localhost:8080/v1/", api_key=SecretStr(" key\n"))
    assert options.base_url == "http://localhost:8080/v1"
    assert options.api_key is not None and options.api_key.get_secret_value() == "key"
    with pytest.raises(ValidationError, match="not an http:// or https:// URL"):
        Options(model="m", base_url="ftp://example.test")
    with pytest.raises(ValidationError, match="holds a space"):
        OwnOrder(base_url="https://example.test", api_key=SecretStr("a key"))
    with pytest.raises(ValidationError, match="extra"):
        Options.model_validate({"model": "m", "temperature": 0})


def test_a_call_is_recorded_under_the_providers_name(tmp_path: Path) -> None:
    log = CostLog(tmp_path / "costs.jsonl")
    client = ProviderClient(Options(model="m"), provider="acme", cost_log=log)
    client.record(model="m-2", purpose="embed", usage=Usage(3, 0, 0), latency_ms=1.0)
    (line,) = log.path.read_text(encoding="utf-8").splitlines()
    assert (json.loads(line)["provider"], json.loads(line)["model"]) == ("acme", "m-2")


def test_the_key_travels_in_the_providers_header_after_its_own(llm_server: LLMServer) -> None:
    options = Options(model="m", base_url=llm_server.openai_url, api_key=SecretStr("sk-1"))
    plain = ProviderClient(options, provider="acme")
    custom = ProviderClient(options, provider="acme", headers={"v": "2"}, key_header="x-api-key", key_prefix="")
    for client in (plain, custom):
        client.http.post("embeddings", {"model": "m", "input": ["a"]})
        client.close()
    first, second = (request.headers for request in llm_server.requests_to(EMBEDDINGS))
    assert (first["accept"], first["authorization"]) == ("application/json", "Bearer sk-1")
    assert (second["v"], second["x-api-key"]) == ("2", "sk-1") and "authorization" not in second
    assert repr(plain) == f"ProviderClient('acme', {llm_server.openai_url!r})"
