"""Helpers for driving an MCP server with the SDK's own client, in-process or over a real transport."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
from mcp import Client
from mcp.types import CallToolResult, TextContent

T = TypeVar("T")


def with_client(server: Any, session: Callable[[Client], Awaitable[T]], **options: Any) -> T:
    """Connect the SDK's Client to ``server`` (an MCPServer, a URL or StdioServerParameters) and run ``session``."""

    async def main() -> T:
        async with Client(server, **options) as client:
            return await session(client)

    return anyio.run(main)


def text(result: CallToolResult) -> str:
    """The result's text content, joined."""
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def data(result: CallToolResult) -> dict[str, Any]:
    """The structured content of a successful result."""
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    return result.structured_content


def error(result: CallToolResult) -> str:
    """The message of a tool error (asserting it is one, and no traceback leaked)."""
    assert result.is_error, f"expected a tool error, got: {text(result)}"
    message = text(result)
    assert "Traceback" not in message and 'File "' not in message
    return message
