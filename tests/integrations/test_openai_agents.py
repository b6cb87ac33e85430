"""MemstrataSession and run_with_memory against the OpenAI Agents SDK's own Runner and a loopback model server."""

from __future__ import annotations

import asyncio
import functools
import importlib
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.memory import Session, SessionSettings
from openai import AsyncOpenAI

from memstrata import Memory
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.errors import InvalidInput, MissingDependency
from memstrata.integrations.openai_agents import MemstrataSession, run_with_memory, with_memory
from tests.integrations.examples import DOCS, docs_example
from tests.llm_server import CHAT, LLMServer, Reply


@pytest.fixture(autouse=True)
def _no_tracing() -> Iterator[None]:
    """The SDK would export traces to OpenAI; nothing here may leave the machine."""
    set_tracing_disabled(True)
    yield


@pytest.fixture
def session(memory: Memory) -> MemstrataSession:
    """Ana's session ``s1`` in the test Memory."""
    return MemstrataSession("s1", memory, user_id="ana")


def agent_on(server: LLMServer, instructions: Any = "You are helpful.", **options: Any) -> Agent[Any]:
    """An agent whose model is the loopback server, through the SDK's chat completions model."""
    client = AsyncOpenAI(base_url=server.openai_url, api_key="x", max_retries=0)
    model = OpenAIChatCompletionsModel(model="fake-model", openai_client=client)
    return Agent(name="assistant", instructions=instructions, model=model, **options)


def tool_call_reply(name: str, arguments: str) -> Reply:
    """A chat completion that calls one tool."""
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return Reply.of_json(
        {
            "id": "chatcmpl-tool",
            "object": "chat.completion",
            "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
        }
    )


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"21 °C and sunny in {city}"


ITEMS: list[Any] = [
    {"role": "user", "content": "I live in Lisbon"},
    {"role": "user", "content": [{"type": "input_text", "text": "and I like tea"}]},
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Noted: Lisbon and tea.", "annotations": []}],
    },
    {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city": "Lisbon"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "21 °C"},
    {"role": "developer", "content": "Be brief."},
    {"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"}]},
]


def test_it_is_an_sdk_session(session: MemstrataSession) -> None:
    assert isinstance(session, Session)
    assert session.session_id == "s1" and session.session_settings is None


def test_items_round_trip_exactly_and_messages_are_indexed(session: MemstrataSession, memory: Memory) -> None:
    async def scenario() -> None:
        await session.add_items(ITEMS[:3])
        await session.add_items(ITEMS[3:])
        assert await session.get_items() == ITEMS
        assert await session.get_items(limit=2) == ITEMS[-2:]
        assert await session.get_items(limit=0) == []

    asyncio.run(scenario())
    turns = memory.history(user_id="ana", session_id="s1")
    assert [(turn.role, turn.content) for turn in turns] == [
        ("user", "I live in Lisbon"),
        ("user", "and I like tea"),
        ("assistant", "Noted: Lisbon and tea."),
        ("tool", "[function_call weather]"),
        ("tool", "[function_call_output]"),
        ("system", "Be brief."),
        ("user", "[input_image]"),
    ]
    assert memory.search("where does Ana live?", user_id="ana")[0].content == "I live in Lisbon"


def test_pop_and_clear(session: MemstrataSession, memory: Memory) -> None:
    memory.add("a note of another session", user_id="ana", session_id="s2")

    async def scenario() -> None:
        await session.add_items(ITEMS[:3])
        assert await session.pop_item() == ITEMS[2]
        assert await session.get_items() == ITEMS[:2]
        await session.add_items(ITEMS[2:6])
        popped = await asyncio.gather(*(session.pop_item() for _ in range(3)))
        as_json = functools.partial(json.dumps, sort_keys=True)
        assert sorted(map(as_json, popped)) == sorted(map(as_json, ITEMS[3:6]))  # three pops at once: three items
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None

    asyncio.run(scenario())
    assert [turn.session_id for turn in memory.history(user_id="ana")] == ["s2"]


def test_sessions_of_users_agents_and_ids_stay_apart(memory: Memory) -> None:
    sessions = [
        MemstrataSession("s1", memory, user_id="ana"),
        MemstrataSession("s1", memory, user_id="bob"),
        MemstrataSession("s2", memory, user_id="ana"),
        MemstrataSession("s1", memory, user_id="ana", agent_id="planner"),
    ]
    memory.add("said outside the SDK", user_id="ana", session_id="s1")

    async def scenario() -> None:
        for number, each in enumerate(sessions):
            await each.add_items([{"role": "user", "content": f"message {number}"}])
        assert await sessions[1].get_items() == [{"role": "user", "content": "message 1"}]
        assert await sessions[2].get_items() == [{"role": "user", "content": "message 2"}]
        assert await sessions[3].get_items() == [{"role": "user", "content": "message 3"}]
        # Without an agent the session holds every agent's items; turns the SDK did not add are not items.
        assert await sessions[0].get_items() == [
            {"role": "user", "content": "message 0"},
            {"role": "user", "content": "message 3"},
        ]
        await sessions[1].clear_session()
        assert len(await sessions[0].get_items()) == 2

    asyncio.run(scenario())


def test_session_settings_give_the_default_limit(memory: Memory) -> None:
    limited = MemstrataSession("s1", memory, user_id="ana", session_settings=SessionSettings(limit=1))

    async def scenario() -> None:
        await limited.add_items(ITEMS[:2])
        assert await limited.get_items() == ITEMS[1:2]
        assert await limited.get_items(limit=5) == ITEMS[:2]

    asyncio.run(scenario())


def test_bad_items_and_arguments_store_nothing(session: MemstrataSession, memory: Memory) -> None:
    async def scenario() -> None:
        for bad in ([ITEMS[0], {"role": "user", "content": float("nan")}], [ITEMS[0], "not a dict"]):
            with pytest.raises(InvalidInput):
                await session.add_items(bad)
        with pytest.raises(InvalidInput, match="limit"):
            await session.get_items(limit=-1)

    asyncio.run(scenario())
    assert memory.history(user_id="ana") == []
    with pytest.raises(InvalidInput, match="user_id"):
        MemstrataSession("s1", memory, user_id="")
    with pytest.raises(InvalidInput, match="session_id"):
        MemstrataSession(" ", memory, user_id="ana")


def test_the_runner_keeps_a_tool_using_conversation_as_its_own_session_does(
    memory: Memory, llm_server: LLMServer, tmp_path: Any
) -> None:
    """The same scripted run with the SDK's SQLiteSession and with MemstrataSession stores the same items."""
    agent = agent_on(llm_server, tools=[weather])
    reference = SQLiteSession("s1", str(tmp_path / "sdk.db"))
    ours = MemstrataSession("s1", memory, user_id="ana")

    async def scenario() -> None:
        for each in (reference, ours):
            llm_server.queue(CHAT, tool_call_reply("weather", '{"city": "Lisbon"}'), "It is sunny in Lisbon.")
            result = await Runner.run(agent, "What is the weather in Lisbon?", session=each)
            assert result.final_output == "It is sunny in Lisbon."
            second = await Runner.run(agent, "Thanks!", session=each)
            assert second.final_output == "echo: Thanks!"
        stored = await ours.get_items()
        assert stored == await reference.get_items()
        assert [item.get("type", "message") for item in stored] == [
            "message",
            "function_call",
            "function_call_output",
            "message",
            "message",
            "message",
        ]

    asyncio.run(scenario())
    last = llm_server.requests_to(CHAT)[-1].body["messages"]
    assert [message["role"] for message in last] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert memory.search("sunny Lisbon", user_id="ana")[0].content == "It is sunny in Lisbon."


def test_run_with_memory_puts_the_memory_in_front_of_the_model(memory: Memory, llm_server: LLMServer) -> None:
    memory.add("I am allergic to peanuts", user_id="ana", session_id="last-week")
    memory.add("I am allergic to cats", user_id="bob")
    agent = agent_on(llm_server, instructions="You are a careful cook.")
    session = MemstrataSession("today", memory, user_id="ana")

    async def scenario() -> None:
        result = await run_with_memory(
            agent, "What should I avoid eating?", memory=memory, user_id="ana", session=session
        )
        assert result.final_output == "echo: What should I avoid eating?"

    asyncio.run(scenario())
    system = llm_server.requests_to(CHAT)[-1].body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are a careful cook.\n\n")
    assert "allergic to peanuts" in system["content"] and "cats" not in system["content"]
    assert [turn.content for turn in memory.history(user_id="ana", session_id="today")] == [
        "What should I avoid eating?",
        "echo: What should I avoid eating?",
    ]
    assert agent.instructions == "You are a careful cook."  # the agent itself is unchanged


def test_with_memory_keeps_dynamic_instructions(memory: Memory, llm_server: LLMServer) -> None:
    async def instructions(context: Any, agent: Agent[Any]) -> str:
        return f"You are {agent.name}."

    agent = agent_on(llm_server, instructions=instructions)
    assert with_memory(agent, "   ") is agent

    async def scenario() -> None:
        await Runner.run(with_memory(agent, "# Memory\n- likes tea"), "hello")
        await run_with_memory(
            agent_on(llm_server, instructions=None), [{"role": "user", "content": "hi"}], memory=memory, user_id="ana"
        )
        with pytest.raises(InvalidInput, match="user message"):
            await run_with_memory(agent, [], memory=memory, user_id="ana")

    asyncio.run(scenario())
    first, second = (request.body["messages"] for request in llm_server.requests_to(CHAT))
    assert first[0] == {"role": "system", "content": "You are assistant.\n\n# Memory\n- likes tea"}
    assert second[0]["role"] == "user"  # no instructions and an empty memory: no system message at all


def test_the_docs_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_server: LLMServer, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # its Memory opens in a new temporary directory
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.openai_url)
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("MODEL", "fake-model")
    exec(compile(docs_example("OpenAI Agents SDK"), str(DOCS), "exec"), {})
    answer, items = capsys.readouterr().out.split("\n", 1)
    assert answer == "echo: What should I avoid in a satay sauce?"
    assert items.startswith("[{'content': 'What should I avoid in a satay sauce?', 'role': 'user'}")
    system = llm_server.requests_to(CHAT)[-1].body["messages"][0]["content"]
    assert system.startswith("You are a careful cook.") and "allergic to peanuts" in system


def test_without_the_sdk_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)  # what a missing package looks like to import
    monkeypatch.delitem(sys.modules, "memstrata.integrations.openai_agents")
    with pytest.raises(MissingDependency, match=r"pip install 'memstrata\[openai-agents\]'"):
        importlib.import_module("memstrata.integrations.openai_agents")


def test_more_items_than_one_add_takes_are_stored_in_batches(tmp_path: Path) -> None:
    with Memory(tmp_path / "home", embedder=HashEmbedder(), background=False, max_messages_per_add=2) as small:
        session = MemstrataSession("long", small, user_id="ana")
        items = [{"role": "user", "content": f"message {number}"} for number in range(5)]
        asyncio.run(session.add_items(items))  # type: ignore[arg-type]
        assert asyncio.run(session.get_items()) == items
