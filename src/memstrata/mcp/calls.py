"""Running a tool's body: the Memory work in a worker thread, memstrata errors as tool errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent

from memstrata.errors import MemstrataError
from memstrata.mcp.schemas import Output, structured
from memstrata.memory import Memory

OutputT = TypeVar("OutputT", bound=Output)
MemoryContext = Context[Memory, Any]


async def call(
    ctx: MemoryContext, action: Callable[[Memory], OutputT], text: Callable[[OutputT], str]
) -> CallToolResult:
    """Run ``action`` on the server's Memory in a worker thread; a tool result of its output and ``text`` of it.

    The output is the structured content, the text what the model reads; memstrata errors become tool errors.
    """
    # The core is synchronous, so the event loop would stall on it. Its error messages say how
    # to fix the call; the client gets them as an ``isError`` result, never a traceback.
    memory: Memory = ctx.request_context.lifespan_context
    try:
        output = await anyio.to_thread.run_sync(action, memory)
    except MemstrataError as exc:
        raise ToolError(str(exc)) from exc
    return CallToolResult(content=[TextContent(type="text", text=text(output))], structured_content=structured(output))
