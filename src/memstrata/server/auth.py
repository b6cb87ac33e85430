"""Bearer API keys → the caller's tenant (and the agent it acts as), as a dependency of every route but health."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param

from memstrata.models import KeyRole
from memstrata.server.acting import Actor
from memstrata.server.dependencies import Services, ServicesDep
from memstrata.server.errors import Forbidden, Unauthorized, forbidden, unauthorized
from memstrata.server.keys import SECRET_PREFIX, find_key
from memstrata.server.tenancy import LOCAL_TENANT, Tenant

bearer = HTTPBearer(auto_error=False, description=f"An API key from `memstrata keys create` ({SECRET_PREFIX}…).")


def current_tenant(
    request: Request,
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Tenant:
    """The tenant of the presented key: 401 without a known key, 403 for a revoked one."""
    return authenticate(request, services, None if credentials is None else credentials.credentials)


def bearer_secret(request: Request) -> str | None:
    """The key in ``Authorization: Bearer <key>``, as ``HTTPBearer`` reads it; None without one."""
    scheme, secret = get_authorization_scheme_param(request.headers.get("authorization"))
    return secret if scheme.lower() == "bearer" and secret else None


def authenticate(request: Request, services: Services, secret: str | None) -> Tenant:
    """The tenant of ``secret`` (None: no usable Authorization header); Unauthorized or Forbidden otherwise.

    The agent the request acts as goes to ``request.state.agent_id`` (read by ``current_actor``), the
    key's role to ``request.state.role`` (read by ``roles.RoleCheck``; no key, or ``memstrata ui``'s, is admin).
    """
    role = KeyRole.ADMIN
    if secret is None:
        if request.headers.get("authorization"):
            raise Unauthorized("the Authorization header must be 'Bearer <API key>'")
        if not services.settings.server_allow_anonymous:
            raise Unauthorized("an API key is required: send 'Authorization: Bearer <key>' (memstrata keys create)")
        tenant = Tenant(LOCAL_TENANT)
        agent = services.settings.server_agent_id
    elif services.owner_secret is not None and _same(secret, services.owner_secret):
        tenant = Tenant.whole_store()
        agent = services.settings.server_agent_id
    else:
        key = find_key(services.keys, secret)
        if key is None:
            raise Unauthorized("unknown API key; create one with `memstrata keys create --tenant NAME`")
        if not key.is_active:
            raise Forbidden(f"API key {key.id} was revoked; ask for a new one")
        tenant = Tenant(key.tenant)
        agent = key.agent_id if key.agent_id is not None else services.settings.server_agent_id
        role = key.role
    request.state.tenant = tenant
    request.state.agent_id = agent
    request.state.role = role
    return tenant


def _same(presented: str, secret: str) -> bool:
    """Whether a presented secret is ``secret``, in constant time (a header may hold any Latin-1 text)."""
    return secrets.compare_digest(presented.encode("utf-8", "surrogatepass"), secret.encode("utf-8"))


def current_actor(request: Request, tenant: Annotated[Tenant, Depends(current_tenant)]) -> Actor:
    """The tenant of the presented key and the agent it acts as in shared spaces (its key's, else server_agent_id)."""
    agent: str | None = request.state.agent_id
    return Actor(tenant=tenant, agent_id=agent)


TenantDep = Annotated[Tenant, Depends(current_tenant)]
ActorDep = Annotated[Actor, Depends(current_actor)]


async def without_a_valid_key(request: Request) -> JSONResponse | None:
    """The 401/403 response when the request's key would be refused; None when it would pass."""
    services = getattr(request.app.state, "services", None)
    if services is None:
        return None
    try:
        authenticate(request, services, bearer_secret(request))
    except Unauthorized as exc:
        return await unauthorized(request, exc)
    except Forbidden as exc:
        return await forbidden(request, exc)
    return None
