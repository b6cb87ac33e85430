"""The OpenAI-compatible provider against a real local server: request shape, replies, usage, JSON output."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from memstrata.errors import ProviderError
from memstrata.llms.base import LLM, ChatMessage, Usage
from memstrata.llms.json_output import RETRY_PROMPT
from memstrata.llms.openai_compat import OpenAICompatLLM
from memstrata.remote.costs import CostLog, read_costs
from tests.llm_server import CHAT, LLMServer, Reply
from tests.llms.conftest import SECRET

MakeOpenAI = Callable[..., OpenAICompatLLM]
SCHEMA: dict[str, Any] = {
    "title": "Person facts",
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
USAGE = {"prompt_tokens": 120, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 100}}


def test_it_is_an_llm(make_openai: MakeOpenAI) -> None:
    llm = make_openai()
    assert isinstance(llm, LLM)
    assert llm.is_available
    assert llm.name == "openai:gpt-4o-mini"


def test_reply_and_usage_are_parsed(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    llm_server.queue(CHAT, Reply.of_text("Lisbon.", usage=USAGE))
    completion = make_openai().generate([ChatMessage("user", "Where does Ana live?")])
    assert completion.text == "Lisbon."
    assert completion.model == "gpt-4o-mini"
    assert completion.usage == Usage(input_tokens=120, output_tokens=7, cached_tokens=100)
    assert completion.data is None


def test_missing_or_partial_usage_counts_zero(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    llm_server.queue(CHAT, Reply.of_text("hi", usage={"prompt_tokens": 3, "prompt_tokens_details": None}))
    assert make_openai().generate([ChatMessage("user", "hi")]).usage == Usage(3, 0, 0)


def test_usage_that_is_no_finite_number_counts_zero(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    # Python's JSON reader takes NaN, Infinity and 1e400; int() of them raised past the provider.
    usage = {"prompt_tokens": float("nan"), "completion_tokens": float("inf"), "total_tokens": 1}
    llm_server.queue(CHAT, Reply.of_text("hi", usage=usage))
    assert make_openai().generate([ChatMessage("user", "hi")]).usage == Usage(0, 0, 0)


def test_request_puts_instructions_then_memory_in_the_first_system_message(
    make_openai: MakeOpenAI, llm_server: LLMServer
) -> None:
    make_openai().generate(
        [ChatMessage("user", "hi"), ChatMessage("assistant", "hello"), ChatMessage("user", "where do I live?")],
        system="You are a helpful agent.",
        memory="<memory>Ana lives in Lisbon.</memory>",
        max_tokens=50,
    )
    (request,) = llm_server.requests_to(CHAT)
    assert request.method == "POST"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    body = request.body
    assert body["model"] == "gpt-4o-mini"
    assert body["max_tokens"] == 50
    assert "response_format" not in body
    system, *rest = body["messages"]
    assert system == {"role": "system", "content": "You are a helpful agent.\n\n<memory>Ana lives in Lisbon.</memory>"}
    assert [message["role"] for message in rest] == ["user", "assistant", "user"]
    assert rest[-1]["content"] == "where do I live?"


def test_no_system_message_without_instructions_or_memory(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    assert make_openai().complete("ping") == "echo: ping"
    (request,) = llm_server.requests_to(CHAT)
    assert request.body["messages"] == [{"role": "user", "content": "ping"}]
    assert "max_tokens" not in request.body


def test_memory_alone_is_the_system_message(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    make_openai().generate([ChatMessage("user", "q")], memory="MEMORY")
    assert llm_server.requests_to(CHAT)[0].body["messages"][0] == {"role": "system", "content": "MEMORY"}


def test_no_key_sends_no_authorization(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    make_openai(api_key=None).complete("hi")
    assert "authorization" not in llm_server.requests_to(CHAT)[0].headers


def test_content_parts_are_joined(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    body = {
        "model": "m",
        "choices": [{"message": {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"text": "b"}]}}],
    }
    llm_server.queue(CHAT, body)
    assert make_openai().complete("x") == "ab"


@pytest.mark.parametrize(
    "body", [{"choices": []}, {"error": None}, {"choices": [{"text": "legacy"}]}], ids=["empty", "none", "legacy"]
)
def test_a_reply_without_a_message_raises(make_openai: MakeOpenAI, llm_server: LLMServer, body: Any) -> None:
    llm_server.queue(CHAT, body)
    with pytest.raises(ProviderError, match="without a message"):
        make_openai().complete("x")


def test_json_schema_is_requested_and_parsed(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    llm_server.queue(CHAT, '{"name": "Ana"}')
    completion = make_openai().generate([ChatMessage("user", "who?")], json_schema=SCHEMA, purpose="extract")
    assert completion.data == {"name": "Ana"}
    body = llm_server.requests_to(CHAT)[0].body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Person_facts", "schema": SCHEMA, "strict": False},
    }
    assert body["messages"] == [{"role": "user", "content": "who?"}]  # the server enforces the schema


def test_fenced_and_thinking_json_is_accepted_without_a_retry(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    llm_server.queue(CHAT, '<think>they asked for a name</think>\nSure:\n```json\n{"name": "Ana"}\n```')
    assert make_openai().generate([ChatMessage("user", "who?")], json_schema=SCHEMA).data == {"name": "Ana"}
    assert len(llm_server.requests_to(CHAT)) == 1


def test_invalid_json_is_retried_once_with_a_correction(
    make_openai: MakeOpenAI, llm_server: LLMServer, cost_log: CostLog
) -> None:
    llm_server.queue(
        CHAT,
        Reply.of_text("The name is Ana.", usage={"prompt_tokens": 10, "completion_tokens": 5}),
        Reply.of_text('{"name": "Ana"}', usage={"prompt_tokens": 20, "completion_tokens": 6}),
    )
    completion = make_openai().generate([ChatMessage("user", "who?")], json_schema=SCHEMA, purpose="extract")
    assert completion.data == {"name": "Ana"}
    assert completion.usage == Usage(input_tokens=30, output_tokens=11, cached_tokens=0)
    first, second = llm_server.requests_to(CHAT)
    assert second.body["messages"][: len(first.body["messages"])] == first.body["messages"]
    assert second.body["messages"][-2:] == [
        {"role": "assistant", "content": "The name is Ana."},
        {"role": "user", "content": RETRY_PROMPT},
    ]
    assert "not valid JSON" in RETRY_PROMPT
    assert [entry.purpose for entry in read_costs(cost_log.path)] == ["extract", "extract"]


def test_invalid_json_twice_raises_after_exactly_one_retry(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    llm_server.queue(CHAT, "no json here", "still no json")
    with pytest.raises(ProviderError, match="JSON object") as info:
        make_openai().generate([ChatMessage("user", "who?")], json_schema=SCHEMA)
    assert "still no json" in str(info.value)
    assert len(llm_server.requests_to(CHAT)) == 2


def _rejection(kind: str) -> Reply:
    return Reply.error(400, f"Invalid parameter: 'response_format' of type '{kind}' is not supported with this model.")


def test_rejected_json_schema_falls_back_to_json_object_and_is_remembered(
    make_openai: MakeOpenAI, llm_server: LLMServer
) -> None:
    llm = make_openai()
    llm_server.queue(CHAT, _rejection("json_schema"), '{"name": "Ana"}', '{"name": "Bo"}')
    assert llm.generate([ChatMessage("user", "a")], json_schema=SCHEMA).data == {"name": "Ana"}
    assert llm.output_mode == "json_object"
    assert llm.generate([ChatMessage("user", "b")], json_schema=SCHEMA).data == {"name": "Bo"}
    formats = [request.body.get("response_format") for request in llm_server.requests_to(CHAT)]
    assert formats == [
        {"type": "json_schema", "json_schema": {"name": "Person_facts", "schema": SCHEMA, "strict": False}},
        {"type": "json_object"},
        {"type": "json_object"},
    ]
    # Without a server-side schema the model is told the schema in the instructions.
    system = llm_server.requests_to(CHAT)[-1].body["messages"][0]
    assert system["role"] == "system"
    assert json.dumps(SCHEMA["properties"], sort_keys=True)[1:-1] in system["content"]


def test_a_server_without_response_format_gets_none(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    llm = make_openai()
    llm_server.queue(CHAT, _rejection("json_schema"), _rejection("json_object"), '{"name": "Ana"}')
    completion = llm.generate([ChatMessage("user", "a")], system="Extract facts.", memory="MEMORY", json_schema=SCHEMA)
    assert completion.data == {"name": "Ana"}
    assert llm.output_mode == "none"
    last = llm_server.requests_to(CHAT)[-1].body
    assert "response_format" not in last
    content = last["messages"][0]["content"]
    assert content.startswith("Extract facts.\n\n")
    assert content.endswith("\n\nMEMORY")
    assert "JSON schema" in content
    # Plain calls never carry response_format.
    llm.complete("plain")
    assert "response_format" not in llm_server.requests_to(CHAT)[-1].body


def test_other_bad_requests_are_not_retried(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    llm_server.queue(CHAT, Reply.error(400, "messages: too long"))
    with pytest.raises(ProviderError, match="HTTP 400: messages: too long"):
        make_openai().generate([ChatMessage("user", "a")], json_schema=SCHEMA)
    assert len(llm_server.requests_to(CHAT)) == 1


def test_max_completion_tokens_is_used_when_max_tokens_is_refused(
    make_openai: MakeOpenAI, llm_server: LLMServer
) -> None:
    llm = make_openai()
    refusal = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'."
    llm_server.queue(CHAT, Reply.error(400, refusal), "ok", "ok again")
    assert llm.generate([ChatMessage("user", "a")], max_tokens=9).text == "ok"
    assert llm.generate([ChatMessage("user", "b")], max_tokens=9).text == "ok again"
    bodies = [request.body for request in llm_server.requests_to(CHAT)]
    assert [("max_tokens" in body, body.get("max_completion_tokens")) for body in bodies] == [
        (True, None),
        (False, 9),
        (False, 9),
    ]


def test_successful_calls_are_logged_with_cost(
    make_openai: MakeOpenAI, llm_server: LLMServer, cost_log: CostLog
) -> None:
    llm_server.queue(
        CHAT,
        Reply.of_text("a", usage={"prompt_tokens": 1_000_000, "completion_tokens": 0}),
        Reply.error(400, "bad"),
    )
    llm = make_openai()
    llm.generate([ChatMessage("user", "a")], purpose="summarize")
    with pytest.raises(ProviderError):
        llm.complete("b")
    (entry,) = read_costs(cost_log.path)
    assert (entry.provider, entry.model, entry.purpose) == ("openai", "gpt-4o-mini", "summarize")
    assert entry.input_tokens == 1_000_000
    assert entry.cost_usd == pytest.approx(0.15)
    assert entry.latency_ms >= 0


def test_a_token_count_of_hundreds_of_digits_counts_zero(make_openai: MakeOpenAI, llm_server: LLMServer) -> None:
    llm_server.queue(CHAT, Reply.of_text("hi", usage={"prompt_tokens": 10**400, "completion_tokens": -3}))
    assert make_openai().generate([ChatMessage("user", "hi")]).usage == Usage(0, 0, 0)
