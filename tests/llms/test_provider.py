"""LLMBase: a provider implements one model call and gets ``complete`` and ``generate`` with the JSON retry."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from memstrata.errors import ProviderError
from memstrata.llms.base import LLM, ChatMessage, Completion, Usage
from memstrata.llms.json_output import RETRY_PROMPT
from memstrata.llms.provider import ChatRequest, LLMBase


class Scripted(LLMBase):
    """Replies with queued texts and keeps every call it was given."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[list[ChatMessage], ChatRequest]] = []

    @property
    def name(self) -> str:
        return "scripted:m"

    def _complete(self, messages: Sequence[ChatMessage], request: ChatRequest) -> Completion:
        self.calls.append((list(messages), request))
        return Completion(text=self.replies.pop(0), model="m", usage=Usage(input_tokens=10, output_tokens=2))


def test_a_subclass_is_an_available_llm() -> None:
    llm = Scripted()
    assert isinstance(llm, LLM)
    assert llm.is_available


def test_complete_sends_one_user_message_labelled_complete() -> None:
    llm = Scripted("hello")
    assert llm.complete("hi", system="be brief") == "hello"
    assert llm.calls == [([ChatMessage("user", "hi")], ChatRequest(system="be brief", purpose="complete"))]


def test_generate_passes_its_options_through_unchanged() -> None:
    llm = Scripted("ok")
    reply = llm.generate([ChatMessage("user", "q")], system="s", memory="mem", max_tokens=5, purpose="extract")
    assert (reply.text, reply.data) == ("ok", None)
    assert llm.calls[0][1] == ChatRequest(system="s", memory="mem", max_tokens=5, purpose="extract")


def test_a_json_schema_parses_the_reply_and_retries_once_with_the_same_request() -> None:
    schema = {"type": "object"}
    llm = Scripted("no json here", '{"a": 1}')
    reply = llm.generate([ChatMessage("user", "q")], json_schema=schema, purpose="facts")
    assert reply.data == {"a": 1}
    assert reply.usage == Usage(input_tokens=20, output_tokens=4)
    (first, request), (second, again) = llm.calls
    assert request == again == ChatRequest(json_schema=schema, purpose="facts")
    assert second == [*first, ChatMessage("assistant", "no json here"), ChatMessage("user", RETRY_PROMPT)]


def test_a_reply_without_json_after_the_retry_names_the_provider() -> None:
    llm = Scripted("nope", "still nope")
    with pytest.raises(ProviderError, match="scripted:m did not reply with a JSON object"):
        llm.generate([ChatMessage("user", "q")], json_schema={"type": "object"})
