"""The LlamaIndex memory block, driven through LlamaIndex's own Memory and message classes."""

from __future__ import annotations

import asyncio
import importlib
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import (
    ChatMessage,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.memory import Memory as LlamaMemory
from llama_index.core.storage.chat_store.base_db import MessageStatus

from memstrata import Memory
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.errors import AccessDenied, MissingDependency, NotFound
from memstrata.integrations.llama_index import MemstrataMemoryBlock
from memstrata.integrations.query import MAX_QUERY_CHARACTERS, query_from
from tests.integrations.examples import docs_example

CONVERSATION = [
    ("I live in Lisbon and I love grilled sardines", "Noted: Lisbon, and sardines."),
    ("My sister Marta plays the cello", "A cellist in the family!"),
    ("I work at Tern as a data engineer", "Thanks for telling me."),
]
OTHER_CONVERSATION = [
    ("I live in Oslo and I ski every winter weekend", "Oslo winters are long."),
    ("My brother Jon builds wooden boats in Bergen", "What a craft."),
    ("I teach maths at a secondary school", "Thanks for telling me."),
]


def llama_memory(block: MemstrataMemoryBlock, session: str = "chat-1", token_limit: int = 40) -> LlamaMemory:
    """LlamaIndex's Memory with a short-term queue small enough that older messages flush into the block."""
    return LlamaMemory.from_defaults(session_id=session, token_limit=token_limit, memory_blocks=[block])


async def converse(memory: LlamaMemory, exchanges: list[tuple[str, str]]) -> None:
    for said, answered in exchanges:
        await memory.aput(ChatMessage(role=MessageRole.USER, content=said))
        await memory.aput(ChatMessage(role=MessageRole.ASSISTANT, content=answered))


def system_text(messages: list[ChatMessage]) -> str | None:
    """The text LlamaIndex put in the system message, if it made one."""
    systems = [message for message in messages if message.role == MessageRole.SYSTEM]
    return systems[0].content if systems else None


def test_flushed_messages_are_stored_in_the_conversations_session(memory: Memory) -> None:
    block = MemstrataMemoryBlock(memory=memory, user_id="ana")
    chat = llama_memory(block)

    asyncio.run(converse(chat, CONVERSATION))

    stored = memory.history(user_id="ana")
    assert stored, "the small token limit should have flushed the oldest messages into the block"
    flushed = [(turn.role, turn.content) for turn in stored]
    said = [text for exchange in CONVERSATION for text in exchange]
    assert [content for _, content in flushed] == said[: len(flushed)]
    assert [role for role, _ in flushed][:2] == ["user", "assistant"]
    assert {turn.session_id for turn in stored} == {"chat-1"}
    still_queued = [message.content for message in asyncio.run(chat.aget_all(status=MessageStatus.ACTIVE))]
    assert not set(still_queued) & {content for _, content in flushed}


def test_aget_puts_memstratas_context_for_the_last_user_message_in_the_system_message(memory: Memory) -> None:
    block = MemstrataMemoryBlock(memory=memory, user_id="ana")
    chat = llama_memory(block)
    asyncio.run(converse(chat, CONVERSATION))

    messages = asyncio.run(chat.aget(input="Where do I live?"))

    expected = memory.context("Where do I live?", user_id="ana", session_id="chat-1").text
    assert "Lisbon" in expected
    text = system_text(messages)
    assert text is not None and expected in text and "<memstrata>" in text


def test_a_new_conversation_recalls_what_an_earlier_one_flushed(memory: Memory) -> None:
    block = MemstrataMemoryBlock(memory=memory, user_id="ana")
    asyncio.run(converse(llama_memory(block, "monday"), CONVERSATION))

    later = llama_memory(block, "tuesday", token_limit=2_000)
    asyncio.run(later.aput(ChatMessage(role=MessageRole.USER, content="What instrument does my sister play?")))
    text = system_text(asyncio.run(later.aget()))

    assert text is not None and "cello" in text


def test_nothing_remembered_or_nothing_asked_adds_no_system_message(memory: Memory) -> None:
    block = MemstrataMemoryBlock(memory=memory, user_id="ana")
    chat = llama_memory(block, token_limit=2_000)

    assert system_text(asyncio.run(chat.aget(input="Where do I live?"))) is None
    memory.add("I live in Lisbon", user_id="ana")
    assert asyncio.run(block.aget([ChatMessage(role=MessageRole.ASSISTANT, content="Lisbon?")])) == ""
    assert asyncio.run(block.aget([ChatMessage(role=MessageRole.USER, content="  ")])) == ""
    assert asyncio.run(block.aget(None)) == ""
    assert asyncio.run(block.aget([])) == ""


def test_the_query_is_the_latest_user_messages_text(memory: Memory) -> None:
    memory.add("I live in Lisbon", user_id="ana")
    memory.add("Marta plays the cello", user_id="ana")
    history = [
        ChatMessage(role=MessageRole.USER, content="Where does Marta live?"),
        ChatMessage(role=MessageRole.ASSISTANT, content="I do not know."),
        ChatMessage(
            role=MessageRole.USER,
            blocks=[TextBlock(text="And what does she play?"), ImageBlock(url="http://example.com/x.png")],
        ),
    ]

    one = asyncio.run(MemstrataMemoryBlock(memory=memory, user_id="ana").aget(history))
    two = asyncio.run(MemstrataMemoryBlock(memory=memory, user_id="ana", query_messages=2).aget(history))

    assert one == memory.context("And what does she play?", user_id="ana").text
    assert two == memory.context("Where does Marta live?\nAnd what does she play?", user_id="ana").text


def test_a_very_long_message_is_queried_by_its_end(memory: Memory) -> None:
    memory.add("I live in Lisbon", user_id="ana")
    pasted = "filler " * 100_000 + "Where do I live?"
    block = MemstrataMemoryBlock(memory=memory, user_id="ana")

    text = asyncio.run(block.aget([ChatMessage(role=MessageRole.USER, content=pasted)]))

    assert "Lisbon" in text
    assert query_from([pasted]) == pasted[-MAX_QUERY_CHARACTERS:].strip()
    assert query_from(["  ", ""]) is None


def test_only_what_the_user_and_the_assistant_said_is_stored(memory: Memory) -> None:
    block = MemstrataMemoryBlock(memory=memory, user_id="ana", session_id="s1")
    messages = [
        ChatMessage(role=MessageRole.SYSTEM, content="You are a helpful assistant."),
        ChatMessage(role=MessageRole.USER, blocks=[TextBlock(text="Look at my cat"), ImageBlock(url="http://x/c.png")]),
        ChatMessage(role=MessageRole.USER, blocks=[ImageBlock(url="http://x/only-an-image.png")]),
        ChatMessage(
            role=MessageRole.ASSISTANT,
            blocks=[ToolCallBlock(tool_call_id="1", tool_name="weather", tool_kwargs={"city": "Lisbon"})],
        ),
        ChatMessage(role=MessageRole.TOOL, content="22 degrees", additional_kwargs={"tool_call_id": "1"}),
        ChatMessage(
            role=MessageRole.ASSISTANT,
            blocks=[ThinkingBlock(content="the user wants the weather"), TextBlock(text="It is 22 degrees.")],
        ),
        ChatMessage(role=MessageRole.CHATBOT, content="Anything else?"),
        ChatMessage(role=MessageRole.USER, content="   "),
    ]

    asyncio.run(block.aput(messages))

    stored = [(turn.role, turn.content, turn.session_id) for turn in memory.history(user_id="ana")]
    assert stored == [
        ("user", "Look at my cat", "s1"),
        ("assistant", "It is 22 degrees.", "s1"),
        ("assistant", "Anything else?", "s1"),
    ]
    asyncio.run(block.aput([ChatMessage(role=MessageRole.SYSTEM, content="Be brief.")]))
    asyncio.run(block.aput([]))
    assert len(memory.history(user_id="ana")) == 3


def test_the_blocks_own_session_wins_over_the_conversations(memory: Memory) -> None:
    block = MemstrataMemoryBlock(memory=memory, user_id="ana", session_id="support-42", agent_id="concierge")
    asyncio.run(converse(llama_memory(block), CONVERSATION))

    stored = memory.history(user_id="ana")
    assert stored and {(turn.session_id, turn.agent_id) for turn in stored} == {("support-42", "concierge")}


def test_users_never_see_each_others_memories(memory: Memory) -> None:
    ana = MemstrataMemoryBlock(memory=memory, user_id="ana")
    bob = MemstrataMemoryBlock(memory=memory, user_id="bob")
    asyncio.run(converse(llama_memory(ana, "shared-session"), CONVERSATION))

    question = [ChatMessage(role=MessageRole.USER, content="Where do I live? Lisbon?")]
    assert "Lisbon" in asyncio.run(ana.aget(question))
    assert asyncio.run(bob.aget(question)) == ""
    asyncio.run(converse(llama_memory(bob, "shared-session"), OTHER_CONVERSATION))
    assert "Oslo" in asyncio.run(bob.aget([ChatMessage(role=MessageRole.USER, content="Where do I live? Oslo?")]))
    assert "Oslo" not in asyncio.run(ana.aget([ChatMessage(role=MessageRole.USER, content="Where do I live? Oslo?")]))
    assert {turn.user_id for turn in memory.history(user_id="bob")} == {"bob"}


def test_a_space_block_needs_the_agents_grant(memory: Memory) -> None:
    memory.create_space("team", agent_id="planner")
    memory.add("The launch is on March 3rd", space="team", agent_id="planner")
    reader = MemstrataMemoryBlock(memory=memory, space="team", agent_id="planner")
    stranger = MemstrataMemoryBlock(memory=memory, space="team", agent_id="stranger")
    missing = MemstrataMemoryBlock(memory=memory, space="no-such-space")
    question = [ChatMessage(role=MessageRole.USER, content="When is the launch?")]

    assert "March 3rd" in asyncio.run(reader.aget(question))
    with pytest.raises(AccessDenied):
        asyncio.run(stranger.aget(question))
    with pytest.raises(NotFound):
        asyncio.run(missing.aput(question))


@pytest.mark.parametrize(
    "arguments",
    [
        {"user_id": ""},
        {"user_id": "ana", "space": "team"},
        {},
        {"user_id": "ana", "token_budget": 0},
        {"user_id": "ana", "token_budget": "many"},
        {"user_id": "ana", "session_id": "   "},
        {"user_id": "ana", "query_messages": 0},
    ],
)
def test_bad_settings_are_refused_when_the_block_is_made(memory: Memory, arguments: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        MemstrataMemoryBlock(memory=memory, **arguments)


def test_the_memory_must_be_a_memstrata_memory() -> None:
    with pytest.raises(ValueError, match="instance of Memory"):
        MemstrataMemoryBlock(memory="memory.db", user_id="ana")  # type: ignore[arg-type]


def test_the_budget_bounds_the_recalled_context(memory: Memory) -> None:
    for day in range(40):
        memory.add(f"On day {day} I cooked sardines with lemon and garlic in Lisbon", user_id="ana")
    block = MemstrataMemoryBlock(memory=memory, user_id="ana", token_budget=60)

    text = asyncio.run(block.aget([ChatMessage(role=MessageRole.USER, content="What did I cook?")]))

    assert text == memory.context("What did I cook?", user_id="ana", token_budget=60).text
    assert memory.context("What did I cook?", user_id="ana", token_budget=60).tokens <= 60
    assert memory.context("What did I cook?", user_id="ana").tokens > 60


def test_the_dump_leaves_the_memory_out(memory: Memory) -> None:
    block = MemstrataMemoryBlock(memory=memory, user_id="ana")

    dumped = block.model_dump()

    assert "memory" not in dumped and dumped["user_id"] == "ana" and dumped["name"] == "memstrata"


class ThreadRecordingMemory(Memory):
    """A real Memory that notes which thread each read and write ran on."""

    def __init__(self, home: Path) -> None:
        super().__init__(home, embedder=HashEmbedder(), background=False)
        self.threads: list[int] = []

    def context(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.append(threading.get_ident())
        return super().context(*args, **kwargs)

    def add(self, *args: Any, **kwargs: Any) -> Any:
        self.threads.append(threading.get_ident())
        return super().add(*args, **kwargs)


def test_memstrata_runs_off_the_event_loops_thread(home: Path) -> None:
    recording = ThreadRecordingMemory(home)
    with recording:
        block = MemstrataMemoryBlock(memory=recording, user_id="ana")

        async def use() -> int:
            await block.aput([ChatMessage(role=MessageRole.USER, content="I live in Lisbon")])
            await block.aget([ChatMessage(role=MessageRole.USER, content="Where do I live?")])
            return threading.get_ident()

        loop_thread = asyncio.run(use())

    assert len(recording.threads) == 2 and loop_thread not in recording.threads


def test_a_missing_llama_index_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_index.core.memory", None)
    monkeypatch.delitem(sys.modules, "memstrata.integrations.llama_index")

    with pytest.raises(MissingDependency, match=r"pip install 'memstrata\[llamaindex\]'"):
        importlib.import_module("memstrata.integrations.llama_index")


def test_llama_indexs_synchronous_wrappers_work_too(memory: Memory) -> None:
    block = MemstrataMemoryBlock(memory=memory, user_id="ana")
    chat = llama_memory(block)
    for said, answered in CONVERSATION:
        chat.put(ChatMessage(role=MessageRole.USER, content=said))
        chat.put(ChatMessage(role=MessageRole.ASSISTANT, content=answered))

    text = system_text(llama_memory(block, "later", token_limit=2_000).get(input="Who plays the cello?"))

    assert memory.history(user_id="ana") and text is not None and "cello" in text


def test_the_documented_example_runs_and_recalls(capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(docs_example("LlamaIndex"), "LlamaIndex example", "exec"), {})

    printed = capsys.readouterr().out
    assert printed.startswith("<memory>") and "Marta plays the cello" in printed
