"""`memstrata mcp` as MCP clients run it: a subprocess over stdio, and over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from memstrata import Memory
from memstrata.bench.serve import free_port
from memstrata.embeddings.hashing import HashEmbedder
from tests.cli.test_cli import run_cli
from tests.mcp.conftest import data, error, text, with_client

#: The deterministic test embedder keeps start-up fast; tier work waits for flush().
FAST = {"MEMSTRATA_EMBEDDER": "hash", "MEMSTRATA_BACKGROUND": "false"}


def test_stdio_with_a_fixed_user(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder()) as memory:
        memory.add("Bob lives in Porto", user_id="bob")
    command = StdioServerParameters(
        command=sys.executable, args=["-m", "memstrata", "mcp", "--home", str(home), "--user", "u"], env=FAST
    )

    async def session(client: Client) -> None:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        memory_tools = {"add_memory", "search_memory", "get_context", "forget_memory", "inspect_memory"}
        assert set(tools) == memory_tools | {"create_space", "list_spaces", "grant", "revoke", "share"}
        assert all("user_id" not in tool.input_schema["properties"] for tool in tools.values())

        [stored] = data(await client.call_tool("add_memory", {"content": "I moved to Lisbon in May"}))["memories"]
        hits = data(await client.call_tool("search_memory", {"query": "Lisbon"}))["hits"]
        assert [hit["id"] for hit in hits] == [stored["id"]]
        context = await client.call_tool("get_context", {"query": "Where do I live?"})
        assert "Lisbon" in text(context) and "Porto" not in text(context)
        assert data(await client.call_tool("inspect_memory", {}))["counts"]["episodic"] == 1
        assert "serves only user 'u'" in error(
            await client.call_tool("search_memory", {"query": "x", "user_id": "bob"})
        )
        assert "query must not be empty" in error(await client.call_tool("search_memory", {"query": ""}))
        assert "confirm=true" in error(await client.call_tool("forget_memory", {"confirm": False}))
        assert data(await client.call_tool("forget_memory", {"confirm": True}))["deleted_turns"] == 1

    # Handshake-era protocol, as the MCP clients in use today speak it over stdio.
    with_client(command, session, mode="legacy", read_timeout_seconds=30)
    with Memory(home, embedder=HashEmbedder()) as memory:
        assert memory.history(user_id="u") == []
        assert [turn.content for turn in memory.history(user_id="bob")] == ["Bob lives in Porto"]


@pytest.fixture
def http_server(home: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``memstrata mcp --transport http`` on a free port of 127.0.0.1, without --user; yields its URL."""
    port = free_port()
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
    options = ["--transport", "http", "--host", "127.0.0.1", "--port", str(port), "--home", str(home)]
    process = subprocess.Popen(
        [sys.executable, "-m", "memstrata", "mcp", *options],
        env={**environment, **FAST},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)


def _wait_for_port(port: int, process: subprocess.Popen[str], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode}: {process.communicate()[1]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listened on port {port} after {timeout} s")


def test_streamable_http_with_per_call_users(home: Path, http_server: tuple[str, subprocess.Popen[str]]) -> None:
    url, process = http_server

    async def session(client: Client) -> None:
        tools = (await client.list_tools()).tools
        memory_tools = [tool for tool in tools if "user_id" in tool.input_schema["properties"]]
        assert len(memory_tools) >= 5 and all(
            next(iter(tool.input_schema["properties"])) == "user_id" for tool in memory_tools
        )
        await client.call_tool("add_memory", {"user_id": "ana", "content": "Ana lives in Lisbon"})
        await client.call_tool("add_memory", {"user_id": "bob", "content": "Bob lives in Porto"})
        ana = data(await client.call_tool("search_memory", {"user_id": "ana", "query": "lives"}))["hits"]
        assert [hit["content"] for hit in ana] == ["Ana lives in Lisbon"]
        assert "Porto" in data(await client.call_tool("get_context", {"user_id": "bob", "query": "Porto"}))["text"]
        assert "user_id" in error(await client.call_tool("get_context", {"query": "Porto"}))
        assert data(await client.call_tool("forget_memory", {"user_id": "ana", "confirm": True}))["deleted_turns"] == 1

    with_client(url, session, read_timeout_seconds=30)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0, stderr
    assert "Traceback" not in stderr
    # The Memory was closed on shutdown; what the tools wrote is there.
    with Memory(home, embedder=HashEmbedder()) as memory:
        assert memory.history(user_id="ana") == []
        assert [turn.content for turn in memory.history(user_id="bob")] == ["Bob lives in Porto"]


def test_a_bad_user_exits_before_serving(tmp_path: Path) -> None:
    result = run_cli("mcp", "--user", " ", home=tmp_path / "home")
    assert result.returncode == 2
    assert "user_id" in result.stderr and "Traceback" not in result.stderr


def test_an_http_server_that_cannot_listen_says_so_in_one_line(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = run_cli("mcp", "--transport", "http", "--port", str(port), home=tmp_path / "home")
    assert result.returncode == 4, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr
    for port_given in ("70000", "-1"):
        result = run_cli("mcp", "--transport", "http", "--port", port_given, home=tmp_path / "home")
        assert result.returncode == 2 and "--port" in result.stderr and "Traceback" not in result.stderr
