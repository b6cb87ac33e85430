"""The MCP server: ``create_server(memory)`` exposes one Memory to MCP clients as tools.

A thin adapter: every tool calls the same Memory method the REST API does. The ``mcp``
SDK is optional (``pip install 'memstrata[mcp]'``); importing this package does not need
it, only building or running the server does. Inside this package ``mcp`` still names the
SDK: imports are absolute, so ``memstrata.mcp`` never shadows it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memstrata.errors import MissingDependency

if TYPE_CHECKING:
    from memstrata.mcp.app import create_server

INSTALL_HINT = "pip install 'memstrata[mcp]'"


def require_mcp_dependencies() -> None:
    """Raise MissingDependency, naming the extra to install, when the MCP SDK is missing."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError as exc:
        raise MissingDependency(
            f"the MCP server needs the official MCP Python SDK 2.x ({exc.name} is missing): {INSTALL_HINT}"
        ) from exc


def __getattr__(name: str) -> Any:
    if name == "create_server":
        require_mcp_dependencies()
        from memstrata.mcp.app import create_server

        return create_server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["INSTALL_HINT", "create_server", "require_mcp_dependencies"]
