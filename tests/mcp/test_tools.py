"""The MCP tools in-process, through the SDK's Client: schemas, results, scoping and errors."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from memstrata import Memory
from memstrata.config import load_settings
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.errors import InvalidInput
from memstrata.mcp.app import create_server
from tests.fakes import FakeLLM
from tests.mcp.conftest import data, error, text, with_client

TOOLS = {"add_memory", "search_memory", "get_context", "forget_memory", "inspect_memory"}
SPACE_TOOLS = {"create_space", "list_spaces", "grant", "revoke", "share"}


async def _tools(client: Client) -> dict[str, Any]:
    return {tool.name: tool for tool in (await client.list_tools()).tools}


def test_a_fixed_user_server_lists_the_tools_without_user_id(memory: Memory) -> None:
    tools = with_client(create_server(memory, user_id="ana"), _tools)
    assert set(tools) == TOOLS | SPACE_TOOLS  # no chat without an LLM
    for tool in tools.values():
        assert tool.description and len(tool.description) > 80
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert "user_id" not in tool.input_schema["properties"]
        assert "user_id" not in tool.input_schema.get("required", [])
    assert tools["search_memory"].input_schema["required"] == ["query"]
    assert tools["forget_memory"].input_schema["required"] == ["confirm"]
    assert tools["forget_memory"].annotations.destructive_hint is True
    assert tools["search_memory"].annotations.read_only_hint is True
    assert "agent_id" in tools["search_memory"].input_schema["properties"]


def test_a_per_call_server_takes_user_id_first_on_every_memory_tool(memory: Memory) -> None:
    tools = with_client(create_server(memory), _tools)
    for name in TOOLS:
        schema = tools[name].input_schema
        assert next(iter(schema["properties"])) == "user_id"
        assert schema["properties"]["user_id"]["type"] == "string"
        # Required unless the call names a shared space instead: said in words, not a top-level anyOf.
        assert "user_id" not in schema.get("required", []) and "space" in schema["properties"]
        assert "Required unless space" in schema["properties"]["user_id"]["description"]


def test_add_search_context_inspect_forget(memory: Memory) -> None:
    async def session(client: Client) -> None:
        added = data(await client.call_tool("add_memory", {"content": "I moved to Lisbon in May", "session_id": "s1"}))
        assert added["user_id"] == "ana"
        [stored] = added["memories"]
        assert (stored["content"], stored["role"], stored["session_id"]) == ("I moved to Lisbon in May", "user", "s1")
        assert "Stored 1 memory for ana" in text(await client.call_tool("add_memory", {"content": "My cat is Miso"}))
        await client.call_tool("add_memory", {"content": "Noted: Lisbon.", "role": "assistant", "session_id": "s1"})

        result = await client.call_tool("search_memory", {"query": "Lisbon", "limit": 5})
        hits = data(result)["hits"]
        assert stored["id"] in {hit["id"] for hit in hits[:2]}
        assert all("Lisbon" in hit["content"] for hit in hits[:2])
        assert "I moved to Lisbon in May" in text(result) and stored["id"] in text(result)
        varied = data(await client.call_tool("search_memory", {"query": "Lisbon", "limit": 5, "diversity": 0.5}))
        assert {hit["id"] for hit in varied["hits"]} == {hit["id"] for hit in hits}

        result = await client.call_tool("get_context", {"query": "Where does Ana live?", "token_budget": 200})
        context = data(result)
        assert "Lisbon" in context["text"] and 0 < context["tokens"] <= 200
        assert context["token_budget"] == 200
        assert any(stored["id"] in item["source_turn_ids"] for item in context["items"])
        assert text(result) == context["text"]
        whole = data(await client.call_tool("get_context", {"query": "Where does Ana live?", "verbatim": "true"}))
        assert not any(item["is_abridged"] for item in whole["items"])
        assert "I moved to Lisbon in May" in whole["text"]
        assert "verbatim" in error(await client.call_tool("get_context", {"query": "Lisbon", "verbatim": "yes"}))

        report = data(await client.call_tool("inspect_memory", {}))
        assert report["user_id"] == "ana" and report["counts"]["episodic"] == 3
        assert "Memory of ana" in text(await client.call_tool("inspect_memory", {"limit": 3}))

        assert "confirm=true" in error(await client.call_tool("forget_memory", {"confirm": False}))
        assert data(await client.call_tool("inspect_memory", {}))["counts"]["episodic"] == 3
        deleted = data(await client.call_tool("forget_memory", {"confirm": True, "session_id": "s1"}))
        assert deleted == {"user_id": "ana", "space": None, "agent_id": None, "session_id": "s1", "deleted_turns": 2}
        left = data(await client.call_tool("search_memory", {"query": "Lisbon"}))["hits"]
        assert [hit["content"] for hit in left] == ["My cat is Miso"]
        result = await client.call_tool("forget_memory", {"confirm": True})
        assert data(result)["deleted_turns"] == 1 and "Deleted 1 memory of ana" in text(result)

    with_client(create_server(memory, user_id="ana"), session)
    assert memory.history(user_id="ana") == []


def test_search_and_context_read_dates_in_the_given_time_zone(memory: Memory) -> None:
    memory.add("I moved to Lisbon yesterday", user_id="ana", timestamp="2022-08-10T06:30:00Z")

    async def session(client: Client) -> None:
        query = {"query": "where did I move?", "timezone": "America/Los_Angeles"}
        block = data(await client.call_tool("get_context", query))["text"]
        assert "[Tuesday 9 August 2022]" in block and "[yesterday = 8 August 2022]" in block
        assert data(await client.call_tool("search_memory", query))["hits"]
        bad = await client.call_tool("search_memory", {**query, "timezone": "Mars/Olympus"})
        assert "IANA" in error(bad)

    with_client(create_server(memory, user_id="ana"), session)


def test_a_fixed_user_server_cannot_touch_another_user(memory: Memory) -> None:
    [bob] = memory.add("Bob lives in Porto", user_id="bob")

    async def session(client: Client) -> None:
        assert data(await client.call_tool("search_memory", {"query": "Bob lives in Porto"}))["hits"] == []
        assert "Porto" not in data(await client.call_tool("get_context", {"query": "Porto"}))["text"]
        calls: list[tuple[str, dict[str, Any]]] = [
            ("search_memory", {"query": "Porto", "user_id": "bob"}),
            ("get_context", {"query": "Porto", "user_id": "bob"}),
            ("add_memory", {"content": "planted", "user_id": "bob"}),
            ("inspect_memory", {"user_id": "bob"}),
            ("forget_memory", {"confirm": True, "user_id": "bob"}),
        ]
        for name, arguments in calls:
            assert "serves only user 'ana'" in error(await client.call_tool(name, arguments)), name
        assert data(await client.call_tool("forget_memory", {"confirm": True}))["deleted_turns"] == 0
        # Naming the server's own user is allowed.
        assert data(await client.call_tool("inspect_memory", {"user_id": "ana"}))["user_id"] == "ana"

    with_client(create_server(memory, user_id="ana"), session)
    assert [turn.id for turn in memory.history(user_id="bob")] == [bob.id]


def test_per_call_scoping_keeps_users_apart(memory: Memory) -> None:
    async def session(client: Client) -> None:
        await client.call_tool("add_memory", {"user_id": "ana", "content": "Ana lives in Lisbon"})
        await client.call_tool("add_memory", {"user_id": "bob", "content": "Bob lives in Porto"})
        ana = data(await client.call_tool("search_memory", {"user_id": "ana", "query": "lives in"}))["hits"]
        assert [hit["content"] for hit in ana] == ["Ana lives in Lisbon"]
        assert "Porto" not in data(await client.call_tool("get_context", {"user_id": "ana", "query": "Porto"}))["text"]
        assert "user_id" in error(await client.call_tool("search_memory", {"query": "lives in"}))
        assert data(await client.call_tool("forget_memory", {"user_id": "ana", "confirm": True}))["deleted_turns"] == 1
        bob = data(await client.call_tool("search_memory", {"user_id": "bob", "query": "lives in"}))["hits"]
        assert [hit["content"] for hit in bob] == ["Bob lives in Porto"]
        assert data(await client.call_tool("inspect_memory", {"user_id": "bob"}))["counts"]["episodic"] == 1

    with_client(create_server(memory), session)


def test_a_fixed_agent_writes_and_reads_only_as_that_agent(memory: Memory) -> None:
    memory.add("The other agent's note about Lisbon", user_id="ana", agent_id="other")

    async def session(client: Client) -> None:
        tools = await _tools(client)
        assert "agent_id" not in tools["search_memory"].input_schema["properties"]
        [stored] = data(await client.call_tool("add_memory", {"content": "Ana likes Lisbon"}))["memories"]
        assert stored["agent_id"] == "helper"
        hits = data(await client.call_tool("search_memory", {"query": "Lisbon"}))["hits"]
        assert [hit["content"] for hit in hits] == ["Ana likes Lisbon"]
        assert "agent 'helper'" in error(await client.call_tool("search_memory", {"query": "x", "agent_id": "other"}))
        assert data(await client.call_tool("forget_memory", {"confirm": True}))["deleted_turns"] == 1

    with_client(create_server(memory, user_id="ana", agent_id="helper"), session)
    assert [turn.agent_id for turn in memory.history(user_id="ana")] == ["other"]


def test_errors_are_tool_errors_with_a_clear_message(memory: Memory) -> None:
    async def session(client: Client) -> None:
        assert "query must not be empty" in error(await client.call_tool("search_memory", {"query": "   "}))
        assert "timestamp" in error(await client.call_tool("add_memory", {"content": "x", "timestamp": "yesterday"}))
        assert "token_budget" in error(await client.call_tool("get_context", {"query": "x", "token_budget": 5}))
        assert "limit" in error(await client.call_tool("search_memory", {"query": "x", "limit": 0}))
        assert "role" in error(await client.call_tool("add_memory", {"content": "x", "role": "narrator"}))
        assert "content" in error(await client.call_tool("add_memory", {}))
        memory.add("I live in Lisbon", user_id="ana", id="m1")
        conflict = error(await client.call_tool("add_memory", {"content": "I live in Porto", "id": "m1"}))
        assert "m1" in conflict and "new id" in conflict
        # The same id and text again is a safe retry, not an error.
        assert data(await client.call_tool("add_memory", {"content": "I live in Lisbon", "id": "m1"}))
        # A server whose Memory is closed reports the storage error, not a crash.
        memory.close()
        assert "closed" in error(await client.call_tool("search_memory", {"query": "Lisbon"}))

    with_client(create_server(memory, user_id="ana"), session)


def test_metadata_over_the_limit_is_a_tool_error_naming_it_and_stores_nothing(memory: Memory) -> None:
    async def session(client: Client) -> None:
        arguments = {"content": "a note", "metadata": {"x": "y" * 70_000}}
        refused = error(await client.call_tool("add_memory", arguments))
        assert "over the limit of 65,536" in refused and "max_metadata_bytes" in refused

    with_client(create_server(memory, user_id="ana"), session)
    assert memory.history(user_id="ana") == []


def test_unknown_arguments_and_a_loose_confirm_are_refused_and_change_nothing(memory: Memory) -> None:
    memory.add("first", user_id="ana", session_id="s1")
    memory.add("second", user_id="ana", session_id="s2")

    async def session(client: Client) -> None:
        # A misspelled session_id must not widen a forget to the whole user.
        misspelled = error(await client.call_tool("forget_memory", {"confirm": True, "sessionId": "s1"}))
        assert "sessionId" in misspelled
        for loose in ("yes", "True", 1, "1"):
            assert "confirm" in error(await client.call_tool("forget_memory", {"confirm": loose, "session_id": "s1"}))
        assert "sesion_id" in error(await client.call_tool("add_memory", {"content": "third", "sesion_id": "s3"}))
        for tool in (await client.list_tools()).tools:
            assert tool.input_schema["additionalProperties"] is False

    with_client(create_server(memory, user_id="ana"), session)
    assert [turn.content for turn in memory.history(user_id="ana")] == ["first", "second"]


def test_numbers_and_flags_are_what_the_schema_says_or_json_text_of_it(memory: Memory) -> None:
    memory.add("I drink tea", user_id="ana")

    async def session(client: Client) -> None:
        refused = [
            ("search_memory", {"query": "tea", "limit": True}),
            ("search_memory", {"query": "tea", "limit": 5.5}),
            ("search_memory", {"query": "tea", "limit": "five"}),
            ("search_memory", {"query": "tea", "diversity": False}),
            ("search_memory", {"query": "tea", "diversity": "true"}),
            ("get_context", {"query": "tea", "token_budget": True}),
            ("get_context", {"query": "tea", "token_budget": 200.5}),
            ("get_context", {"query": "tea", "include_superseded": "yes"}),
            ("get_context", {"query": "tea", "include_superseded": 1}),
            ("inspect_memory", {"limit": "3.5"}),
        ]
        for tool, arguments in refused:
            name = next(key for key in arguments if key != "query")
            assert name in error(await client.call_tool(tool, arguments)), (tool, arguments)
        # Clients that send every argument as JSON text: "5" is the number 5, "true" the boolean.
        assert len(data(await client.call_tool("search_memory", {"query": "tea", "limit": "5"}))["hits"]) == 1
        # A whole number a model wrote with a decimal point is that number.
        assert len(data(await client.call_tool("search_memory", {"query": "tea", "limit": 5.0}))["hits"]) == 1
        assert data(await client.call_tool("inspect_memory", {"limit": "3.0"}))
        assert data(await client.call_tool("search_memory", {"query": "tea", "diversity": 1.0}))["hits"]
        assert data(await client.call_tool("search_memory", {"query": "tea", "diversity": "0.5"}))["hits"]
        context = data(await client.call_tool("get_context", {"query": "tea", "token_budget": "200"}))
        assert context["token_budget"] == 200
        assert data(await client.call_tool("get_context", {"query": "tea", "include_superseded": "true"}))

    with_client(create_server(memory, user_id="ana"), session)


def test_chat_is_a_tool_only_when_an_llm_is_configured(home: Path) -> None:
    llm = FakeLLM({"chat": ["You moved to Lisbon in May."]})
    with Memory(home, embedder=HashEmbedder(), llm=llm, background=False) as memory:
        memory.add("I moved to Lisbon in May", user_id="ana", session_id="s0")

        async def session(client: Client) -> dict[str, Any]:
            tools = await _tools(client)
            assert set(tools) == {*TOOLS, *SPACE_TOOLS, "chat"}
            assert "user_id" not in tools["chat"].input_schema["properties"]
            result = await client.call_tool("chat", {"message": "Where do I live?", "session_id": "s1"})
            assert text(result) == "You moved to Lisbon in May."
            reply: dict[str, Any] = data(result)
            return reply

        reply = with_client(create_server(memory, user_id="ana"), session)
        assert reply["is_extractive"] is False and len(reply["turn_ids"]) == 2
        assert any("Lisbon" in used["text"] for used in reply["memories"])
        assert "Lisbon" in (llm.calls_for("chat")[0].memory or "")
        assert [turn.role for turn in memory.history(user_id="ana", session_id="s1")] == ["user", "assistant"]


def test_a_failing_llm_is_a_tool_error(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), llm=FakeLLM({"chat": []}), background=False) as memory:
        result = with_client(create_server(memory), lambda c: c.call_tool("chat", {"user_id": "ana", "message": "hi"}))
        assert "no scripted reply" in error(result)
        assert memory.history(user_id="ana") == []


class SlowLLM(FakeLLM):
    """A FakeLLM whose chat reply waits until the test releases it."""

    def __init__(self) -> None:
        super().__init__({"chat": ["Done."]})
        self.started = threading.Event()
        self.release = threading.Event()

    def generate(self, messages: Any, **options: Any) -> Any:
        """Signal the call, wait for the release, then answer."""
        self.started.set()
        self.release.wait(timeout=10)
        return super().generate(messages, **options)


def test_a_slow_call_does_not_block_the_others(home: Path) -> None:
    llm = SlowLLM()
    with Memory(home, embedder=HashEmbedder(), llm=llm, background=False) as memory:
        memory.add("I moved to Lisbon in May", user_id="ana")
        order: list[str] = []

        async def session(client: Client) -> None:
            async def ask() -> None:
                data(await client.call_tool("chat", {"message": "Where do I live?"}))
                order.append("chat")

            async with anyio.create_task_group() as group:
                group.start_soon(ask)
                await anyio.to_thread.run_sync(llm.started.wait, 5)
                with anyio.fail_after(5):
                    assert data(await client.call_tool("search_memory", {"query": "Lisbon"}))["hits"]
                order.append("search")
                llm.release.set()

        with_client(create_server(memory, user_id="ana"), session)
        assert order == ["search", "chat"]


def test_the_lifespan_opens_the_memory_and_closes_it(home: Path) -> None:
    settings = load_settings(home=home, embedder="hash", background=False)
    server = create_server(settings=settings, user_id="ana")

    async def session(client: Client) -> list[str]:
        await client.call_tool("add_memory", {"content": "I moved to Lisbon in May"})
        return [hit["content"] for hit in data(await client.call_tool("search_memory", {"query": "Lisbon"}))["hits"]]

    assert with_client(server, session) == ["I moved to Lisbon in May"]
    assert "chat" not in with_client(server, _tools)
    # Closed on shutdown: the store opens again and holds what the tools wrote.
    with Memory(settings=settings) as reopened:
        assert [turn.content for turn in reopened.history(user_id="ana")] == ["I moved to Lisbon in May"]


def test_a_bad_fixed_user_fails_when_the_server_is_built(memory: Memory) -> None:
    with pytest.raises(InvalidInput, match="user_id"):
        create_server(memory, user_id="  ")
