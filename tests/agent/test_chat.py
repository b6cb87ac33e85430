"""Memory.chat: context first, the memory block after the instructions, the exchange stored after the reply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memstrata import ChatReply, IdConflict, InvalidInput, Memory, ProviderError, UsedMemory
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.facade.chat import EXTRACTIVE_EMPTY, EXTRACTIVE_HEADER, extractive_answer
from memstrata.llms.openai_compat import OpenAICompatLLM, OpenAIOptions
from memstrata.models import Context, ContextItem
from memstrata.prompts import render
from tests.fakes import FakeLLM
from tests.llm_server import CHAT, LLMServer, Reply

FACTS = [
    "I keep my passport in the blue drawer.",
    "My sister's name is Ilse.",
    "I am allergic to peanuts.",
]


def _seed(memory: Memory, user: str = "ana") -> None:
    for number, fact in enumerate(FACTS):
        memory.add(fact, user_id=user, session_id="earlier", timestamp=f"2025-03-0{number + 1}T10:00:00Z")


def _count(memory: Memory, user: str = "ana") -> int:
    return len(memory.history(user_id=user, limit=10_000))


# -- without an LLM -------------------------------------------------------------------


def test_without_an_llm_the_reply_lists_memories_and_says_so(memory: Memory) -> None:
    _seed(memory)
    reply = memory.chat("Where is my passport?", user_id="ana", session_id="now")
    assert isinstance(reply, ChatReply)
    assert reply.is_extractive and reply.provider == "none" and reply.model == "none"
    assert reply.answer.startswith(EXTRACTIVE_HEADER)
    assert "I keep my passport in the blue drawer." in reply.answer
    assert (reply.tokens_in, reply.tokens_out, reply.tokens_cached) == (0, 0, 0)
    assert reply.context_tokens > 0
    assert reply.memories and all(isinstance(item, UsedMemory) for item in reply.memories)
    assert any("passport" in item.text for item in reply.memories)


def test_without_an_llm_only_the_message_is_stored(memory: Memory) -> None:
    _seed(memory)
    before = _count(memory)
    reply = memory.chat("Where is my passport?", user_id="ana", session_id="now")
    stored = memory.history(user_id="ana", session_id="now")
    assert [(turn.role.value, turn.content) for turn in stored] == [("user", "Where is my passport?")]
    assert reply.turn_ids == (stored[0].id,)
    assert _count(memory) == before + 1


def test_without_an_llm_the_reply_quotes_its_memories_whole(memory: Memory) -> None:
    said = [f"I keep spare key number {n} in the blue drawer of the hall." for n in range(1, 7)]
    for number, text in enumerate(said):
        memory.add(text, user_id="ana", session_id="earlier", timestamp=f"2025-03-0{number + 1}T10:00:00Z")
    # A short budget abridges (a roomy one quotes whole anyway); the reply never does.
    assert any(
        item.is_abridged for item in memory.context("Where is my spare key?", user_id="ana", token_budget=100).items
    )
    reply = memory.chat("Where is my spare key?", user_id="ana", session_id="now")
    quoted = [line.removeprefix("- ") for line in reply.answer.splitlines()[1:]]
    assert len(quoted) > 3 and all(line.removeprefix("user: ") in said for line in quoted), reply.answer


def test_without_memories_it_says_it_has_none(memory: Memory) -> None:
    reply = memory.chat("What is my sister called?", user_id="newcomer")
    assert reply.answer == EXTRACTIVE_EMPTY
    assert reply.memories == () and reply.is_extractive


def test_extractive_answer_puts_relevant_items_before_profile_traits() -> None:
    items = (
        ContextItem(kind="profile", tier="longterm", id="profile:name", text="name: Ana", tokens=3),
        ContextItem(kind="graph", tier="graph", id="edge:a|b", text="a — b (2×)", tokens=5),
        ContextItem(kind="episode", tier="episodic", id="t1", text="user: I like tea", tokens=5, score=0.01),
        ContextItem(kind="cell", tier="longterm", id="c1", text="Ana is allergic to peanuts", tokens=6, score=0.03),
    )
    context = Context(query="q", user_id="ana", text="# Memory\n…", tokens=20, token_budget=100, items=items)
    assert extractive_answer(context).splitlines() == [
        EXTRACTIVE_HEADER,
        "- Ana is allergic to peanuts",
        "- user: I like tea",
        "- name: Ana",
    ]
    assert extractive_answer(context, limit=1).splitlines()[1:] == ["- Ana is allergic to peanuts"]


# -- with an LLM ----------------------------------------------------------------------


def test_the_memory_block_follows_the_instructions_and_the_exchange_is_stored(
    chatty: Memory, fake_llm: FakeLLM
) -> None:
    _seed(chatty)
    expected = chatty.context("Where is my passport?", user_id="ana", token_budget=600)
    fake_llm.script("In the blue drawer.", purpose="chat")
    reply = chatty.chat("Where is my passport?", user_id="ana", session_id="now", token_budget=600)
    [call] = fake_llm.calls_for("chat")
    assert call.memory == expected.text and "I keep my passport in the blue drawer." in call.memory
    assert call.system is not None and call.system.startswith("You are a helpful assistant with a long-term memory")
    assert [(m.role, m.content) for m in call.messages] == [("user", "Where is my passport?")]
    assert reply.answer == "In the blue drawer." and not reply.is_extractive
    assert reply.provider == "fake:scripted" and reply.model == "scripted"
    assert reply.context_tokens == expected.tokens
    stored = chatty.history(user_id="ana", session_id="now")
    assert [(t.role.value, t.content) for t in stored] == [
        ("user", "Where is my passport?"),
        ("assistant", "In the blue drawer."),
    ]
    assert reply.turn_ids == tuple(turn.id for turn in stored)


def test_the_sessions_recent_exchanges_are_sent_as_messages(chatty: Memory, fake_llm: FakeLLM) -> None:
    fake_llm.script("Hello Ana!", "You said your name is Ana.", "Nice to meet you.", purpose="chat")
    chatty.chat("Hi, I'm Ana.", user_id="ana", session_id="s1")
    chatty.chat("What did I just say?", user_id="ana", session_id="s1")
    chatty.chat("Hello there.", user_id="ana", session_id="s2")
    first, second, other = fake_llm.calls_for("chat")
    assert [(m.role, m.content) for m in first.messages] == [("user", "Hi, I'm Ana.")]
    assert [(m.role, m.content) for m in second.messages] == [
        ("user", "Hi, I'm Ana."),
        ("assistant", "Hello Ana!"),
        ("user", "What did I just say?"),
    ]
    assert [(m.role, m.content) for m in other.messages] == [("user", "Hello there.")]


def test_the_memory_block_leaves_out_what_goes_in_as_messages(chatty: Memory, fake_llm: FakeLLM) -> None:
    chatty.add("My passport is in the blue drawer.", user_id="ana", session_id="old", timestamp="2024-01-01T10:00:00Z")
    fake_llm.script("Noted.", "In the blue drawer, and the red one.", purpose="chat")
    chatty.chat("I also keep a passport copy in the red drawer.", user_id="ana", session_id="s1")
    chatty.chat("Where are my passport papers?", user_id="ana", session_id="s1")
    second = fake_llm.calls_for("chat")[1]
    assert ("user", "I also keep a passport copy in the red drawer.") in [(m.role, m.content) for m in second.messages]
    assert second.memory is not None
    assert "blue drawer" in second.memory  # another session's turn is still recalled
    assert "red drawer" not in second.memory  # the working turn is sent once, as a message


def test_a_custom_system_prompt_replaces_the_template(chatty: Memory, fake_llm: FakeLLM) -> None:
    fake_llm.script("Arr.", purpose="chat")
    chatty.chat("Hi", user_id="ana", system="Talk like a pirate.")
    assert fake_llm.calls_for("chat")[0].system == "Talk like a pirate."


def test_dates_in_the_block_and_today_are_read_in_the_asked_time_zone(chatty: Memory, fake_llm: FakeLLM) -> None:
    # 06:30 UTC on 10 August is still 9 August in Honolulu.
    chatty.add("I moved to Lisbon yesterday", user_id="ana", session_id="old", timestamp="2022-08-10T06:30:00Z")
    fake_llm.script("Lisbon.", "Lisbon.", purpose="chat")
    chatty.chat("Where did I move?", user_id="ana", timezone="Pacific/Honolulu")
    chatty.chat("Where did I move?", user_id="ana", timezone="Pacific/Kiritimati")
    local, far_east = fake_llm.calls_for("chat")
    assert local.memory is not None and "[Tuesday 9 August 2022]" in local.memory
    assert "[yesterday = 8 August 2022]" in local.memory
    assert far_east.memory is not None and "[Wednesday 10 August 2022]" in far_east.memory
    # UTC-10 and UTC+14 are never on the same day, so the two prompts name different days.
    assert local.system != far_east.system and "Today is" in local.system
    with pytest.raises(InvalidInput, match="IANA"):
        chatty.chat("Where did I move?", user_id="ana", timezone="Mars/Olympus")


def test_the_default_system_prompt_is_the_template() -> None:
    text = render("agent_system", today="Monday 01 January 2024")
    assert "Today is Monday 01 January 2024." in text and "{" not in text


def test_a_failing_model_stores_nothing_and_a_retry_does_not_duplicate(chatty: Memory, fake_llm: FakeLLM) -> None:
    _seed(chatty)
    before = _count(chatty)
    fake_llm.script(ProviderError("the server timed out"), purpose="chat")
    with pytest.raises(ProviderError, match="timed out"):
        chatty.chat("Where is my passport?", user_id="ana", session_id="now")
    assert _count(chatty) == before
    fake_llm.script("In the blue drawer.", purpose="chat")
    chatty.chat("Where is my passport?", user_id="ana", session_id="now")
    assert [t.content for t in chatty.history(user_id="ana", session_id="now")] == [
        "Where is my passport?",
        "In the blue drawer.",
    ]


def test_the_exchange_can_be_stored_under_the_callers_ids(chatty: Memory, fake_llm: FakeLLM) -> None:
    for bad in ({"message_id": ""}, {"reply_id": 5}, {"message_id": "same", "reply_id": "same"}):
        with pytest.raises(InvalidInput):
            chatty.chat("Where is my passport?", user_id="ana", **bad)  # type: ignore[arg-type]
    assert _count(chatty) == 0 and not fake_llm.calls
    fake_llm.script("In the blue drawer.", purpose="chat")
    reply = chatty.chat("Where is my passport?", user_id="ana", message_id="q-1", reply_id="a-1")
    assert reply.turn_ids == ("q-1", "a-1")
    assert chatty.get("a-1", user_id="ana").content == "In the blue drawer."
    # The exchange happened: sending it again under the same ids is refused before the model is asked.
    asked = len(fake_llm.calls)
    for ids in ({"message_id": "q-1"}, {"message_id": "q-2", "reply_id": "a-1"}):
        with pytest.raises(IdConflict, match="already stored"):
            chatty.chat("Where is my passport?", user_id="ana", **ids)
    assert len(fake_llm.calls) == asked and _count(chatty) == 2


def test_an_empty_reply_is_a_provider_error_and_stores_nothing(chatty: Memory, fake_llm: FakeLLM) -> None:
    fake_llm.script("   ", purpose="chat")
    with pytest.raises(ProviderError, match="empty"):
        chatty.chat("Hi", user_id="ana")
    assert _count(chatty) == 0


def test_a_reply_with_characters_that_cannot_be_stored_is_stored_without_them(
    chatty: Memory, fake_llm: FakeLLM
) -> None:
    fake_llm.script("Sure\x00 thing \ud800 ok", purpose="chat")
    reply = chatty.chat("Hi", user_id="ana")
    assert reply.answer == "Sure thing ? ok"
    assert [turn.content for turn in chatty.history(user_id="ana")] == ["Hi", "Sure thing ? ok"]


def test_a_reply_too_long_to_store_is_a_provider_error_and_stores_nothing(home: Path, fake_llm: FakeLLM) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False, llm=fake_llm, max_text_bytes=1_000) as memory:
        fake_llm.script("word " * 400, purpose="chat")
        with pytest.raises(ProviderError, match="max_text_bytes"):
            memory.chat("Hi", user_id="ana")
        assert memory.history(user_id="ana") == []


@pytest.mark.parametrize(
    "arguments",
    [
        {"message": ""},
        {"message": "   "},
        {"message": 42},
        {"message": "hi", "user_id": ""},
        {"message": "hi", "user_id": None},
        {"message": "hi", "token_budget": 10},
        {"message": "hi", "token_budget": "1000"},
        {"message": "hi", "system": ""},
        {"message": "hi", "system": 3},
        {"message": "hi", "session_id": ""},
    ],
)
def test_bad_input_changes_nothing_and_calls_no_model(
    chatty: Memory, fake_llm: FakeLLM, arguments: dict[str, Any]
) -> None:
    call: dict[str, Any] = {"user_id": "ana", **arguments}
    with pytest.raises(InvalidInput):
        chatty.chat(**call)
    assert fake_llm.calls == [] and _count(chatty) == 0


def test_memories_of_another_user_are_never_used(chatty: Memory, fake_llm: FakeLLM) -> None:
    _seed(chatty, user="bo")
    fake_llm.script("I don't know.", purpose="chat")
    reply = chatty.chat("Where is my passport?", user_id="ana")
    assert reply.memories == ()
    assert fake_llm.calls_for("chat")[0].memory is None


# -- consolidation --------------------------------------------------------------------


def test_consolidations_made_since_the_previous_exchange_are_reported_once(home: Path) -> None:
    llm = FakeLLM({"chat": ["ok"] * 20})
    with Memory(home, embedder=HashEmbedder(), background=False, llm=llm, consolidate_every=4) as memory:
        first = memory.chat("I went hiking in the hills on Saturday.", user_id="ana", session_id="s1")
        assert first.consolidations == () and not first.consolidation_due
        second = memory.chat("I went hiking in the hills on Sunday.", user_id="ana", session_id="s1")
        assert second.consolidation_due, "four new turns pass consolidate_every=4"
        assert second.consolidations == (), "with background off nothing runs until flush()"
        memory.flush()
        made = memory.consolidations(user_id="ana")
        assert made, "the queued tier work consolidated"
        third = memory.chat("Any plans for next weekend?", user_id="ana", session_id="s1")
        assert {item.id for item in third.consolidations} == {item.id for item in made}
        fourth = memory.chat("Thanks!", user_id="ana", session_id="s1")
        assert fourth.consolidations == ()


# -- over the wire --------------------------------------------------------------------


def test_over_http_the_block_follows_the_instructions_and_cached_tokens_are_reported(
    home: Path, llm_server: LLMServer
) -> None:
    usage = {"prompt_tokens": 120, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 96}}
    llm_server.queue(CHAT, Reply.of_text("In the blue drawer.", usage=usage))
    llm = OpenAICompatLLM(OpenAIOptions(model="m-1", base_url=llm_server.openai_url, max_retries=0))
    try:
        with Memory(home, embedder=HashEmbedder(), background=False, llm=llm) as memory:
            _seed(memory)
            reply = memory.chat("Where is my passport?", user_id="ana", session_id="now")
    finally:
        llm.close()
    [request] = llm_server.requests_to(CHAT)
    system, user = request.body["messages"]
    assert system["role"] == "system" and user == {"role": "user", "content": "Where is my passport?"}
    instructions, _, block = system["content"].partition("\n\n# Memory")
    assert instructions.startswith("You are a helpful assistant") and "I keep my passport in the blue drawer." in block
    assert (reply.tokens_in, reply.tokens_out, reply.tokens_cached) == (120, 4, 96)
    assert reply.provider == "openai:m-1" and reply.answer == "In the blue drawer."


def test_extractive_answer_puts_earlier_questions_last() -> None:
    items = (
        ContextItem(kind="episode", tier="episodic", id="t1", text="user: Where is my passport?", tokens=6, score=0.05),
        ContextItem(
            kind="episode",
            tier="episodic",
            id="t2",
            text="user: I keep my passport in the blue drawer.",
            tokens=9,
            score=0.04,
        ),
    )
    context = Context(query="q", user_id="ana", text="# Memory\n…", tokens=20, token_budget=100, items=items)
    assert extractive_answer(context).splitlines()[1:] == [
        "- user: I keep my passport in the blue drawer.",
        "- user: Where is my passport?",
    ]
