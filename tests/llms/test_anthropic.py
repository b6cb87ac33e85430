"""The Anthropic provider against a real local server: headers, system blocks with cache_control, usage, JSON."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from memstrata.errors import ProviderError
from memstrata.llms.anthropic import API_VERSION, AnthropicLLM
from memstrata.llms.base import LLM, ChatMessage, Usage
from memstrata.llms.json_output import RETRY_PROMPT
from memstrata.remote.costs import CostLog, read_costs
from tests.llm_server import MESSAGES, LLMServer, Reply
from tests.llms.conftest import SECRET

MakeAnthropic = Callable[..., AnthropicLLM]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}


def test_it_is_an_llm(make_anthropic: MakeAnthropic) -> None:
    llm = make_anthropic()
    assert isinstance(llm, LLM)
    assert llm.name == "anthropic:claude-haiku-4-5"
    assert llm.is_available


def test_reply_and_usage_with_cache_reads_and_writes(
    make_anthropic: MakeAnthropic, llm_server: LLMServer, cost_log: CostLog
) -> None:
    usage = {
        "input_tokens": 20,
        "output_tokens": 9,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 50,
    }
    llm_server.queue(MESSAGES, Reply.of_text("Lisbon.", usage=usage))
    completion = make_anthropic().generate([ChatMessage("user", "where?")], memory="M", purpose="chat")
    assert completion.text == "Lisbon."
    assert completion.model == "claude-haiku-4-5"
    assert completion.usage == Usage(input_tokens=1070, output_tokens=9, cached_tokens=1000)
    (entry,) = read_costs(cost_log.path)
    assert (entry.provider, entry.input_tokens, entry.cached_tokens) == ("anthropic", 1070, 1000)
    # 70 uncached at $1/M, 1000 cached at $0.10/M, 9 output at $5/M
    assert entry.cost_usd == pytest.approx((70 * 1.0 + 1000 * 0.10 + 9 * 5.0) / 1_000_000)


def test_text_blocks_are_joined_and_other_blocks_ignored(make_anthropic: MakeAnthropic, llm_server: LLMServer) -> None:
    body = {
        "model": "claude-x",
        "content": [
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "a"},
            {"type": "text", "text": "b"},
        ],
        "usage": {"input_tokens": 1, "output_tokens": 2},
    }
    llm_server.queue(MESSAGES, body)
    completion = make_anthropic().generate([ChatMessage("user", "x")])
    assert (completion.text, completion.model, completion.usage) == ("ab", "claude-x", Usage(1, 2, 0))


def test_request_headers_and_system_blocks(make_anthropic: MakeAnthropic, llm_server: LLMServer) -> None:
    make_anthropic().generate(
        [ChatMessage("user", "hi"), ChatMessage("assistant", "hello"), ChatMessage("user", "where?")],
        system="You are helpful.",
        memory="<memory>Ana lives in Lisbon.</memory>",
    )
    (request,) = llm_server.requests_to(MESSAGES)
    assert request.headers["x-api-key"] == SECRET
    assert request.headers["anthropic-version"] == API_VERSION == "2023-06-01"
    assert "authorization" not in request.headers
    body = request.body
    assert body["model"] == "claude-haiku-4-5"
    assert body["max_tokens"] == 4096
    assert body["system"] == [
        {"type": "text", "text": "You are helpful."},
        {"type": "text", "text": "<memory>Ana lives in Lisbon.</memory>", "cache_control": {"type": "ephemeral"}},
    ]
    assert body["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "where?"},
    ]


def test_no_system_without_instructions_or_memory(make_anthropic: MakeAnthropic, llm_server: LLMServer) -> None:
    assert make_anthropic().complete("ping") == "echo: ping"
    assert "system" not in llm_server.requests_to(MESSAGES)[0].body


def test_memory_alone_is_one_cached_block(make_anthropic: MakeAnthropic, llm_server: LLMServer) -> None:
    make_anthropic().generate([ChatMessage("user", "q")], memory="M", max_tokens=10)
    body = llm_server.requests_to(MESSAGES)[0].body
    assert body["system"] == [{"type": "text", "text": "M", "cache_control": {"type": "ephemeral"}}]
    assert body["max_tokens"] == 10


def test_base_url_with_version_segment(make_anthropic: MakeAnthropic, llm_server: LLMServer) -> None:
    assert make_anthropic(base_url=llm_server.url + "/v1/").complete("x") == "echo: x"
    assert llm_server.requests[-1].path == MESSAGES


def test_json_is_asked_for_in_the_instructions_before_memory(
    make_anthropic: MakeAnthropic, llm_server: LLMServer
) -> None:
    llm_server.queue(MESSAGES, 'Here you go:\n```json\n{"city": "Lisbon"}\n```')
    completion = make_anthropic().generate(
        [ChatMessage("user", "where?")], system="Extract.", memory="M", json_schema=SCHEMA
    )
    assert completion.data == {"city": "Lisbon"}
    instructions, memory = llm_server.requests_to(MESSAGES)[0].body["system"]
    assert instructions["text"].startswith("Extract.\n\n")
    assert "JSON" in instructions["text"] and '"city"' in instructions["text"]
    assert "cache_control" not in instructions
    assert memory == {"type": "text", "text": "M", "cache_control": {"type": "ephemeral"}}


def test_invalid_json_is_retried_once(make_anthropic: MakeAnthropic, llm_server: LLMServer) -> None:
    llm_server.queue(MESSAGES, "Lisbon", '{"city": "Lisbon"}')
    assert make_anthropic().generate([ChatMessage("user", "where?")], json_schema=SCHEMA).data == {"city": "Lisbon"}
    retry = llm_server.requests_to(MESSAGES)[1].body["messages"]
    assert retry[-2:] == [{"role": "assistant", "content": "Lisbon"}, {"role": "user", "content": RETRY_PROMPT}]


def test_invalid_json_twice_raises(make_anthropic: MakeAnthropic, llm_server: LLMServer) -> None:
    llm_server.queue(MESSAGES, "", "nope")
    with pytest.raises(ProviderError, match="JSON"):
        make_anthropic().generate([ChatMessage("user", "where?")], json_schema=SCHEMA)
    _first, second = llm_server.requests_to(MESSAGES)
    assert second.body["messages"][-2]["content"] == "(empty reply)"  # the API refuses empty messages


def test_overloaded_is_retried(make_anthropic: MakeAnthropic, llm_server: LLMServer) -> None:
    llm_server.queue(MESSAGES, Reply.error(529, "Overloaded"), "fine")
    assert make_anthropic().complete("x") == "fine"


def test_a_reply_without_content_raises(make_anthropic: MakeAnthropic, llm_server: LLMServer) -> None:
    llm_server.queue(MESSAGES, {"type": "message"})
    with pytest.raises(ProviderError, match="content"):
        make_anthropic().complete("x")
