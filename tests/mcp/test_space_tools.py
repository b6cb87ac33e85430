"""The MCP server and shared spaces: the space tools, space= and spaces= on the memory tools, the acting agent."""

from __future__ import annotations

from typing import Any

from mcp import Client

from memstrata import Memory
from memstrata.mcp.app import create_server
from tests.mcp.conftest import data, error, text, with_client

DEADLINE = "The release deadline for Apollo is March 3rd"


async def _tools(client: Client) -> dict[str, Any]:
    return {tool.name: tool for tool in (await client.list_tools()).tools}


def test_space_tools_publish_their_parameters_and_hints(memory: Memory) -> None:
    tools = with_client(create_server(memory, agent_id="planner"), _tools)
    assert tools["grant"].input_schema["required"] == ["space", "grantee", "access"]
    assert tools["grant"].input_schema["properties"]["access"]["enum"] == ["read", "write", "admin"]
    assert tools["share"].input_schema["required"] == ["ids", "to_space"]
    for name in ("create_space", "list_spaces", "grant", "revoke", "share", "search_memory"):
        assert "agent_id" not in tools[name].input_schema["properties"], name  # the server acts as planner
    assert tools["list_spaces"].annotations.read_only_hint is True
    assert tools["revoke"].annotations.destructive_hint is True
    assert "spaces" in tools["get_context"].input_schema["properties"]
    assert "space" in tools["inspect_memory"].input_schema["properties"]


def test_agents_share_a_space_through_the_tools(memory: Memory) -> None:
    async def session(client: Client) -> None:
        made = data(await client.call_tool("create_space", {"space": "apollo", "agent_id": "planner"}))
        assert (made["name"], made["access"]) == ("apollo", "admin")
        taken = error(await client.call_tool("create_space", {"space": "apollo", "agent_id": "intruder"}))
        assert "exists already" in taken
        given = data(
            await client.call_tool(
                "grant", {"space": "apollo", "grantee": "coder", "access": "write", "agent_id": "planner"}
            )
        )
        assert (given["agent_id"], given["access"], given["by"]) == ("coder", "write", "planner")
        grant = {"space": "apollo", "grantee": "reviewer", "access": "read"}
        assert "admin is needed" in error(await client.call_tool("grant", {**grant, "agent_id": "coder"}))
        await client.call_tool("grant", {**grant, "agent_id": "planner"})

        added = data(
            await client.call_tool("add_memory", {"content": DEADLINE, "space": "apollo", "agent_id": "planner"})
        )
        assert (added["user_id"], added["space"], added["memories"][0]["agent_id"]) == (None, "apollo", "planner")
        assert "in space apollo" in text(
            await client.call_tool(
                "add_memory", {"content": "Staging is on 8080", "space": "apollo", "agent_id": "coder"}
            )
        )
        reviewer_add = {"content": "x", "space": "apollo", "agent_id": "reviewer"}
        assert "write is needed" in error(await client.call_tool("add_memory", reviewer_add))
        await client.call_tool("add_memory", {"content": "I prefer tabs", "user_id": "ana", "agent_id": "coder"})

        # The coder's own memories of ana and every space it may read, ranked together.
        ask = {"query": "release deadline", "user_id": "ana", "agent_id": "coder", "spaces": "all"}
        result = await client.call_tool("search_memory", ask)
        found = data(result)
        assert (found["user_id"], found["space"]) == ("ana", None)
        top = found["hits"][0]
        assert (top["content"], top["space"], top["written_by"]) == (DEADLINE, "apollo", "planner")
        assert "space apollo, by planner" in text(result)
        block = data(await client.call_tool("get_context", {**ask, "spaces": ["apollo"]}))
        assert f"[apollo, by planner] {DEADLINE}" in block["text"]
        assert any(item["space"] == "apollo" and item["written_by"] == "planner" for item in block["items"])

        listed = data(await client.call_tool("list_spaces", {"agent_id": "reviewer"}))
        assert [(space["name"], space["access"]) for space in listed["spaces"]] == [("apollo", "read")]
        report = data(await client.call_tool("inspect_memory", {"space": "apollo", "agent_id": "reviewer"}))
        assert (report["user_id"], report["space"], report["counts"]["episodic"]) == (None, "apollo", 2)
        in_space = {"query": "deadline", "space": "apollo", "agent_id": "reviewer"}
        assert data(await client.call_tool("search_memory", in_space))["hits"][0]["written_by"] == "planner"

        revoked = data(
            await client.call_tool("revoke", {"space": "apollo", "grantee": "reviewer", "agent_id": "planner"})
        )
        assert revoked["revoked"] is True
        assert "no access to space 'apollo'" in error(await client.call_tool("search_memory", in_space))
        forget = {"confirm": True, "space": "apollo"}
        assert "admin is needed" in error(await client.call_tool("forget_memory", {**forget, "agent_id": "coder"}))
        gone = data(await client.call_tool("forget_memory", {**forget, "agent_id": "planner"}))
        assert (gone["user_id"], gone["space"], gone["deleted_turns"]) == (None, "apollo", 2)
        again = await client.call_tool("forget_memory", {**forget, "agent_id": "planner"})
        assert text(again) == "Deleted 0 memories of space apollo, permanently."

    with_client(create_server(memory), session)


def test_a_space_call_without_an_acting_agent_is_a_tool_error(memory: Memory) -> None:
    memory.create_space("apollo", agent_id="planner")
    memory.add(DEADLINE, space="apollo", agent_id="planner")

    async def session(client: Client) -> None:
        calls: list[tuple[str, dict[str, Any]]] = [
            ("add_memory", {"content": "x", "space": "apollo"}),
            ("search_memory", {"query": "deadline", "space": "apollo"}),
            # Without an agent the core would act as the application, which reads every space.
            ("search_memory", {"query": "deadline", "user_id": "ana", "spaces": "all"}),
            ("get_context", {"query": "deadline", "user_id": "ana", "spaces": ["apollo"]}),
            ("inspect_memory", {"space": "apollo"}),
            ("forget_memory", {"confirm": True, "space": "apollo"}),
            ("create_space", {"space": "mars"}),
            ("list_spaces", {}),
            ("grant", {"space": "apollo", "grantee": "coder", "access": "read"}),
            ("revoke", {"space": "apollo", "grantee": "coder"}),
            ("share", {"ids": ["x1"], "to_space": "apollo", "user_id": "ana"}),
        ]
        for name, arguments in calls:
            message = error(await client.call_tool(name, arguments))
            assert "pass agent_id" in message and "--agent" in message, name
        both = {"query": "x", "user_id": "ana", "space": "apollo", "agent_id": "planner"}
        assert "not both" in error(await client.call_tool("search_memory", both))
        assert "or a shared space" in error(await client.call_tool("search_memory", {"query": "x"}))

    with_client(create_server(memory), session)
    assert [turn.content for turn in memory.history(space="apollo")] == [DEADLINE]
    assert [space.name for space in memory.spaces()] == ["apollo"]


def test_a_fixed_user_server_may_use_a_space_as_its_agent(memory: Memory) -> None:
    memory.create_space("apollo", agent_id="planner")
    memory.grant("apollo", "coder", "write", by="planner")
    memory.add(DEADLINE, space="apollo", agent_id="planner")
    [note] = memory.add("Ana prefers tabs over spaces", user_id="ana", agent_id="coder")
    memory.add("Bob lives in Porto", user_id="bob", agent_id="coder")

    async def session(client: Client) -> None:
        tools = await _tools(client)
        assert "user_id" not in tools["share"].input_schema["properties"]
        hits = data(await client.call_tool("search_memory", {"query": "release deadline tabs", "spaces": "all"}))[
            "hits"
        ]
        assert {(hit["content"], hit["space"]) for hit in hits} == {
            (DEADLINE, "apollo"),
            ("Ana prefers tabs over spaces", None),
        }
        added = data(await client.call_tool("add_memory", {"content": "CI is green", "space": "apollo"}))
        assert added["memories"][0]["agent_id"] == "coder"
        # The space is not another user's memory; another user still is out of reach.
        assert "serves only user 'ana'" in error(
            await client.call_tool("search_memory", {"query": "Porto", "user_id": "bob"})
        )
        assert "not both" in error(
            await client.call_tool("add_memory", {"content": "x", "space": "apollo", "user_id": "ana"})
        )
        shared = data(await client.call_tool("share", {"ids": [note.id], "to_space": "apollo"}))
        assert (shared["from_user_id"], shared["to_space"]) == ("ana", "apollo")
        again = data(await client.call_tool("share", {"ids": [note.id], "to_space": "apollo"}))
        assert again["memories"][0]["id"] == shared["memories"][0]["id"]  # sharing again is the same copy
        assert "Shared 1 memory of ana into space apollo" in text(
            await client.call_tool("share", {"ids": [note.id], "to_space": "apollo"})
        )
        assert "admin is needed" in error(
            await client.call_tool("grant", {"space": "apollo", "grantee": "x", "access": "read"})
        )

    with_client(create_server(memory, user_id="ana", agent_id="coder"), session)
    assert len(memory.history(space="apollo")) == 3
