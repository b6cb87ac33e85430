"""The openai embedder against a real local /v1/embeddings: vectors, model ids, batching, settings and errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import SecretStr

from memstrata import ConfigError, EmbeddingError, Memory, load_settings
from memstrata.embeddings import DEFAULT_ORDER, EMBEDDERS, load_embedder
from memstrata.embeddings.base import Embedder
from memstrata.embeddings.openai_compat import RemoteEmbedder, RemoteEmbedderOptions
from tests.llm_server import EMBEDDINGS, LLMServer, Reply
from tests.llms.conftest import SECRET, Sleeps


def _embedder(server: LLMServer, **overrides: object) -> RemoteEmbedder:
    options = {"model": "nomic-embed-text", "base_url": server.openai_url, "max_retries": 1, **overrides}
    return RemoteEmbedder(RemoteEmbedderOptions.model_validate(options), sleep=Sleeps())


def test_it_is_an_embedder_that_learns_its_dimension(llm_server: LLMServer) -> None:
    embedder = _embedder(llm_server)
    assert isinstance(embedder, Embedder)
    assert embedder.dimension == 8
    assert embedder.model_id == "openai:nomic-embed-text:8"
    (probe,) = llm_server.requests_to(EMBEDDINGS)
    assert probe.body["model"] == "nomic-embed-text"
    assert "dimensions" not in probe.body


def test_vectors_are_unit_length_in_order_and_deterministic(llm_server: LLMServer) -> None:
    embedder = _embedder(llm_server, dimension=16)
    vectors = embedder.embed_documents(["Ana lives in Lisbon", "Bo likes tea", ""])
    assert vectors.shape == (3, 16)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    query = embedder.embed_query("Ana lives in Lisbon")
    assert query.shape == (16,)
    assert np.allclose(query, vectors[0], atol=1e-6)
    first = llm_server.requests_to(EMBEDDINGS)[0].body
    assert first == {
        "model": "nomic-embed-text",
        "input": ["Ana lives in Lisbon", "Bo likes tea", " "],
        "dimensions": 16,
    }


def test_rows_follow_the_reply_indexes(llm_server: LLMServer) -> None:
    llm_server.queue(
        EMBEDDINGS,
        {"data": [{"index": 1, "embedding": [0.0, 2.0]}, {"index": 0, "embedding": [3.0, 0.0]}]},
    )
    vectors = _embedder(llm_server, dimension=2).embed_documents(["a", "b"])
    assert np.allclose(vectors, [[1.0, 0.0], [0.0, 1.0]])


def test_batches(llm_server: LLMServer) -> None:
    embedder = _embedder(llm_server, dimension=4, batch_size=2)
    assert embedder.embed_documents([f"text {i}" for i in range(5)]).shape == (5, 4)
    assert [len(request.body["input"]) for request in llm_server.requests_to(EMBEDDINGS)] == [2, 2, 1]
    assert embedder.embed_documents([]).shape == (0, 4)


def test_model_ids_differ_by_model_and_dimension(llm_server: LLMServer) -> None:
    ids = {
        _embedder(llm_server, model="a", dimension=8).model_id,
        _embedder(llm_server, model="b", dimension=8).model_id,
        _embedder(llm_server, model="a", dimension=4).model_id,
    }
    assert len(ids) == 3


@pytest.mark.parametrize(
    ("reply", "match"),
    [
        (Reply.error(401, "bad key"), "MEMSTRATA_EMBEDDING_API_KEY"),
        (Reply.error(404, "no such model"), "MEMSTRATA_EMBEDDING_MODEL"),
        ({"data": [{"index": 0, "embedding": [1.0, 0.0]}]}, "returned 1 vectors for 2 texts"),
        ({"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": "AAAA"}]}, "malformed"),
        (Reply.malformed(), "not a JSON object"),
    ],
)
def test_failures_are_embedding_errors(llm_server: LLMServer, reply: Reply | dict[str, object], match: str) -> None:
    llm_server.queue(EMBEDDINGS, reply)
    with pytest.raises(EmbeddingError, match=match):
        _embedder(llm_server, dimension=2, api_key=SecretStr(SECRET)).embed_documents(["a", "b"])


def test_a_wrong_dimension_is_reported(llm_server: LLMServer) -> None:
    llm_server.queue(EMBEDDINGS, {"data": [{"index": 0, "embedding": [1.0, 0.0, 0.0]}]})
    with pytest.raises(EmbeddingError, match="MEMSTRATA_EMBEDDING_DIMENSION"):
        _embedder(llm_server, dimension=2).embed_documents(["a"])


def test_auto_never_chooses_it() -> None:
    assert "openai" in EMBEDDERS
    assert "openai" not in DEFAULT_ORDER


def test_settings_and_their_llm_fallbacks(home: Path, llm_server: LLMServer) -> None:
    own = load_settings(home=home, embedder="openai", embedding_base_url=llm_server.openai_url, embedding_model="e")
    assert load_embedder("openai", settings=own).model_id == "openai:e:8"

    shared = load_settings(
        home=home,
        llm_provider="openai",
        llm_base_url=llm_server.openai_url,
        llm_api_key=SECRET,
        embedding_model="e",
        embedding_dimension=4,
    )
    embedder = load_embedder("openai", settings=shared)
    embedder.embed_documents(["x"])
    last = llm_server.requests_to(EMBEDDINGS)[-1]
    assert last.headers["authorization"] == f"Bearer {SECRET}"
    assert last.body["dimensions"] == 4


def test_an_anthropic_key_is_never_sent_to_an_embeddings_server(home: Path, llm_server: LLMServer) -> None:
    settings = load_settings(
        home=home,
        llm_provider="anthropic",
        llm_base_url=llm_server.anthropic_url,
        llm_api_key=SECRET,
        embedding_model="e",
    )
    with pytest.raises(ConfigError, match="MEMSTRATA_EMBEDDING_API_KEY"):
        load_embedder("openai", settings=settings)  # would otherwise go to api.openai.com with no key


def test_a_model_is_required(home: Path) -> None:
    with pytest.raises(ConfigError, match="MEMSTRATA_EMBEDDING_MODEL"):
        load_embedder("openai", settings=load_settings(home=home, embedding_base_url="http://127.0.0.1:9/v1"))


def test_memory_uses_it_by_name(home: Path, llm_server: LLMServer) -> None:
    with Memory(
        home,
        embedder="openai",
        embedding_base_url=llm_server.openai_url,
        embedding_model="nomic-embed-text",
        background=False,
    ) as memory:
        assert memory.embedder.model_id == "openai:nomic-embed-text:8"
        memory.add("I live in Lisbon", user_id="ana")
        hits = memory.search("I live in Lisbon", user_id="ana", mode="vector")
        assert hits and hits[0].content == "I live in Lisbon"
    assert len(llm_server.requests_to(EMBEDDINGS)) >= 3  # probe, add, search


def test_each_request_is_in_the_cost_log(llm_server: LLMServer, tmp_path: Path) -> None:
    from memstrata.remote.costs import CostLog, read_costs

    log = CostLog(tmp_path / "costs.jsonl")
    embedder = RemoteEmbedder(
        RemoteEmbedderOptions(model="nomic-embed-text", base_url=llm_server.openai_url, dimension=8),
        cost_log=log,
        sleep=Sleeps(),
    )
    embedder.embed_documents(["Ana lives in Lisbon", "Bo likes tea"])
    [record] = list(read_costs(log.path))
    assert (record.purpose, record.model, record.input_tokens, record.output_tokens) == (
        "embed",
        "nomic-embed-text",
        7,  # the fake server counts words
        0,
    )
