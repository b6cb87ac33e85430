"""``create_app``: the FastAPI app over one Memory, its resources opened in the lifespan."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager

from fastapi import FastAPI
from fastapi.routing import APIRoute

from memstrata import KeyStore, __version__
from memstrata.config import Settings, load_settings
from memstrata.ids import IdGenerator
from memstrata.memory import Memory
from memstrata.server import inspector
from memstrata.server.dependencies import Services
from memstrata.server.errors import install_error_handlers
from memstrata.server.gate import Gate
from memstrata.server.keys import open_key_store
from memstrata.server.limits import BodyLimit
from memstrata.server.roles import (
    check_declared,
    without_a_valid_key_or_role,
    without_a_valid_key_or_role_before_routing,
)
from memstrata.server.routes import admin, memories, search, spaces, tiers, users

DESCRIPTION = """Persistent memory for LLM agents over HTTP: `add` what was said, `search` or
build a `context` before answering. Every request but `/v1/health` needs
`Authorization: Bearer <API key>`; each key belongs to a tenant, and a tenant sees only
its own users' memories. Agents share memory through named spaces (`/v1/spaces`): pass
`space` in place of `user_id`, and the request acts as its key's agent, checked against
that agent's grants. Errors are `{"error": {"code", "message"}}`."""


def create_app(
    memory: Memory | None = None,
    *,
    settings: Settings | None = None,
    keys: KeyStore | None = None,
    close_memory: bool = False,
    owner_secret: str | None = None,
) -> FastAPI:
    """The REST app; with ``memory=None`` it opens a Memory from ``settings`` on startup and closes it on shutdown.

    API keys are read from ``keys`` or else from the store the Memory uses (same database).
    A Memory passed in stays the caller's to close, unless ``close_memory`` hands it to the
    app, which then closes it on shutdown. ``owner_secret`` (``memstrata ui``) is one more key, held only in
    memory, that acts as the data directory's owner: every user, ids as the CLI sees them; the app then
    answers only requests addressed to this machine, as with ``server_allow_anonymous``.
    """
    chosen = settings or (memory.settings if memory is not None else load_settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        with ExitStack() as stack:
            if memory is not None and close_memory:
                stack.callback(memory.close)
            opened = memory if memory is not None else stack.enter_context(Memory.from_settings(chosen))
            key_store = keys
            if key_store is None:
                owned = open_key_store(opened.settings.resolved_storage_url, chosen)
                stack.callback(owned.close)
                key_store = owned
            app.state.services = Services(
                memory=opened, keys=key_store, settings=chosen, ids=IdGenerator(), owner_secret=owner_secret
            )
            yield

    app = FastAPI(
        title="memstrata",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        openapi_url="/openapi.json",
        generate_unique_id_function=_operation_id,
        redirect_slashes=False,  # "/v1/search/" is a JSON 404, not a redirect built from the Host header
    )
    install_error_handlers(app, without_a_valid_key_or_role)
    # An oversized body gets the 401/403 its key or role would get first, else its 413.
    app.add_middleware(
        BodyLimit, max_bytes=chosen.server_max_body_bytes, refuse=without_a_valid_key_or_role_before_routing(app)
    )
    is_local = chosen.server_allow_anonymous or owner_secret is not None
    app.add_middleware(Gate, anonymous=is_local, host=chosen.server_host)  # outermost: first
    for module in (memories, search, tiers, spaces, admin, users):
        app.include_router(module.router)
    app.include_router(inspector.router)
    check_declared(app)  # a keyed route without a role fails here, not open
    return app


def _operation_id(route: APIRoute) -> str:
    """Operation ids are the route functions' names (``import_`` → ``import``)."""
    return route.name.rstrip("_")


def openapi_document(app: FastAPI) -> str:
    """The app's OpenAPI schema as stable, diff-friendly JSON (what docs/openapi.json holds)."""
    return json.dumps(app.openapi(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
