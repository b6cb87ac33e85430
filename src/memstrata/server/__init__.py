"""The REST server: ``create_app(memory)`` builds a FastAPI app over one Memory.

FastAPI and uvicorn are optional (``pip install 'memstrata[server]'``); importing this
package does not need them, only building or running the app does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memstrata.errors import MissingDependency

if TYPE_CHECKING:
    from memstrata.server.app import create_app

INSTALL_HINT = "pip install 'memstrata[server]'"


def require_server_dependencies() -> None:
    """Raise MissingDependency, naming the extra to install, when FastAPI or uvicorn is missing."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise MissingDependency(
            f"the REST server needs FastAPI and uvicorn ({exc.name} is missing): {INSTALL_HINT}"
        ) from exc


def __getattr__(name: str) -> Any:
    if name == "create_app":
        require_server_dependencies()
        from memstrata.server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["INSTALL_HINT", "create_app", "require_server_dependencies"]
