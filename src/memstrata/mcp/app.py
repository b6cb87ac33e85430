"""``create_server``: the MCP server over one Memory, opened in its lifespan and closed on shutdown."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

import anyio.to_thread
from mcp.server.mcpserver import MCPServer

from memstrata import __version__
from memstrata.config import Settings, load_settings
from memstrata.mcp.scope import ServerScope
from memstrata.mcp.tools import CHAT_TOOL, build_tools
from memstrata.memory import Memory

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

INSTRUCTIONS = """memstrata is a persistent memory of the conversations with {whom}.
Before answering anything that may depend on earlier conversations, call get_context with the
user's message (or search_memory for specific items). Call add_memory with what the user tells you
that is worth remembering. Use forget_memory only when the user asks to be forgotten.
Shared spaces (list_spaces) hold what several agents share: name one with space, or search them
with spaces, as an agent whose grants decide what it may read and write."""


def create_server(
    memory: Memory | None = None,
    *,
    settings: Settings | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
    log_level: LogLevel = "WARNING",
) -> MCPServer[Memory]:
    """The MCP server; with ``memory=None`` it opens a Memory from ``settings`` on startup and closes it on shutdown.

    ``user_id`` fixes the one user every tool acts for (the tools then take no ``user_id``);
    without it each call names its user. ``agent_id`` likewise fixes the agent. A Memory
    passed in stays the caller's to close.
    """
    scope = ServerScope.create(user_id, agent_id)
    chosen = settings or (memory.settings if memory is not None else load_settings())

    @asynccontextmanager
    async def lifespan(server: MCPServer[Memory]) -> AsyncIterator[Memory]:
        if memory is not None:
            await _drop_chat_without_llm(server, memory)
            yield memory
            return
        opened = await anyio.to_thread.run_sync(Memory.from_settings, chosen)
        try:
            await _drop_chat_without_llm(server, opened)
            yield opened
        finally:
            # Synchronous on purpose: shutdown may arrive as a cancellation, and a cancelled scope cannot await.
            opened.close()

    whom = f"the user {scope.user_id!r}" if scope.user_id is not None else "each user (every tool call names one)"
    return MCPServer(
        "memstrata",
        title="memstrata memory",
        description="Local-first persistent memory for LLM agents.",
        instructions=INSTRUCTIONS.format(whom=whom),
        version=__version__,
        tools=build_tools(scope),
        lifespan=lifespan,
        log_level=log_level,
    )


async def _drop_chat_without_llm(server: MCPServer[Memory], memory: Memory) -> None:
    """Drop the ``chat`` tool unless the Memory has an LLM (known only once it is open, before any request)."""
    if not memory.llm.is_available and any(tool.name == CHAT_TOOL for tool in await server.list_tools()):
        server.remove_tool(CHAT_TOOL)
