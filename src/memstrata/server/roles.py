"""API key roles over REST: every route that takes a key declares the role it needs; less gets 403.

Roles are ordered, read < write < admin (``KeyRole``). A route declares its role with
``dependencies=[READ]`` (or ``WRITE``, ``ADMIN``); the check runs after the key is known and
before the route reads its body or touches the store, so a refused call changes nothing. A
refusal is 403 ``access_denied``, as for a space the acting agent may not use: the key stays
good for what its role allows (``forbidden`` means the key itself was revoked).
``check_declared`` refuses to build an app with a keyed route that declares no role: a route
added later cannot slip through open. See docs/rest.md#roles.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Any

import fastapi.routing
from fastapi import Depends, FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.routing import compile_path

from memstrata.errors import AccessDenied, ConfigError
from memstrata.models import KeyRole
from memstrata.server.auth import TenantDep, current_tenant, without_a_valid_key
from memstrata.server.errors import error_response, status_of


class RoleCheck:
    """A route's dependency: AccessDenied (403) unless the request's key has ``role`` or one above it."""

    def __init__(self, role: KeyRole) -> None:
        self.role = role

    def __call__(self, request: Request, tenant: TenantDep) -> None:
        """AccessDenied when the key's role falls short (the tenant dependency has set the role)."""
        refusal = self.refusal(request)
        if refusal is not None:
            raise AccessDenied(refusal)

    def refusal(self, request: Request) -> str | None:
        """Why the authenticated request may not make this call, naming its role and the one needed; None if it may."""
        held: KeyRole = request.state.role
        if held.allows(self.role):
            return None
        route = request.scope.get("route")
        path = route.path_format if isinstance(route, APIRoute) else request.url.path
        needed = f"the {self.role} role" + (" (or admin)" if self.role is not KeyRole.ADMIN else "")
        return (
            f"this API key has the {held} role; {request.method} {path} needs {needed}:"
            f" use a key made with `memstrata keys create --role {self.role}`"
        )


READ = Depends(RoleCheck(KeyRole.READ))
"""Reads: search, context, memories, history, the tiers, export."""
WRITE = Depends(RoleCheck(KeyRole.WRITE))
"""Changes to memories: add, delete one, chat, import, consolidate, retry jobs, share, trust."""
ADMIN = Depends(RoleCheck(KeyRole.ADMIN))
"""Erasing in bulk and deciding who may access what: forget, prune, spaces and their grants."""


def declared_role(dependant: Dependant) -> KeyRole | None:
    """The role a route's dependency tree declares (None: none, or more than one)."""
    checks = [call for call in _calls(dependant) if isinstance(call, RoleCheck)]
    return checks[0].role if len(checks) == 1 else None


def takes_a_key(dependant: Dependant) -> bool:
    """Whether a route authenticates its caller (every route but health and the inspector's files)."""
    return any(call is current_tenant for call in _calls(dependant))


def route_roles(app: FastAPI) -> dict[tuple[str, str], KeyRole | None]:
    """Every route of the app as (method, path) → the role it needs; None for a route that takes no key."""
    return {
        (method, path): declared_role(dependant) if dependant is not None and takes_a_key(dependant) else None
        for method, path, dependant in _routes(app)
    }


def check_declared(app: FastAPI) -> None:
    """ConfigError naming each route that takes a key but declares no role (or more than one)."""
    undeclared = [
        f"{method} {path}"
        for method, path, dependant in _routes(app)
        if dependant is not None and takes_a_key(dependant) and declared_role(dependant) is None
    ]
    if undeclared:
        raise ConfigError(
            f"these routes take an API key but declare no role: {'; '.join(undeclared)};"
            " add dependencies=[READ], [WRITE] or [ADMIN] from memstrata.server.roles"
        )


def _routes(app: FastAPI) -> Iterator[tuple[str, str, Dependant | None]]:
    """(method, path, dependency tree or None) of every route, those of included routers too."""
    for route in _every_route(app):
        dependant = getattr(route, "dependant", None)
        for method in sorted(getattr(route, "methods", None) or ()):
            if method != "HEAD":  # Starlette adds HEAD to every GET
                yield method, str(route.path_format), dependant


async def without_a_valid_key_or_role(request: Request) -> JSONResponse | None:
    """The 401/403 response when the request's key, or its role, would be refused; None when both would pass.

    Answers a body FastAPI could not read (400) before the route's own role check runs.
    """
    refused = await without_a_valid_key(request)
    route = request.scope.get("route")
    if refused is not None or not isinstance(route, APIRoute) or not hasattr(request.state, "role"):
        return refused
    for call in _calls(route.dependant):
        if isinstance(call, RoleCheck) and (refusal := call.refusal(request)) is not None:
            return error_response(*status_of(AccessDenied(refusal)))
    return None


def without_a_valid_key_or_role_before_routing(app: FastAPI) -> Callable[[Request], Awaitable[JSONResponse | None]]:
    """``without_a_valid_key_or_role`` for a request not routed yet (the body-size limit runs before routing).

    The route is found by method and path among ``app``'s keyed routes, read on first use:
    the routers are included after the middleware is added.
    """
    table: list[tuple[str, re.Pattern[str], KeyRole]] = []

    async def refuse(request: Request) -> JSONResponse | None:
        refused = await without_a_valid_key(request)
        if refused is not None or not hasattr(request.state, "role"):
            return refused
        if not table:
            table.extend(
                (method, compile_path(path)[0], role)
                for (method, path), role in route_roles(app).items()
                if role is not None
            )
        path = request.scope["path"]
        for method, pattern, role in table:
            if method == request.method and pattern.match(path):
                refusal = RoleCheck(role).refusal(request)
                return None if refusal is None else error_response(*status_of(AccessDenied(refusal)))
        return None

    return refuse


def _every_route(app: FastAPI) -> Iterable[Any]:
    """The app's routes, each included router's too.

    Newer FastAPI keeps an included router as one entry of ``app.routes`` and walks it with
    ``iter_route_contexts``; older releases copied every route into ``app.routes``.
    """
    walk = getattr(fastapi.routing, "iter_route_contexts", None)
    return app.routes if walk is None else walk(app.routes)


def _calls(dependant: Dependant) -> Iterator[Any]:
    """Every callable a route's dependency tree holds, the route's own function included."""
    yield dependant.call
    for inner in dependant.dependencies:
        yield from _calls(inner)
