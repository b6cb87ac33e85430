"""What route functions get through ``Depends``: the Memory, the key store, the id maker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from memstrata import KeyStore
from memstrata.config import Settings
from memstrata.ids import IdGenerator
from memstrata.memory import Memory


@dataclass(kw_only=True, frozen=True, slots=True)
class Services:
    """Everything the lifespan opened for the routes."""

    memory: Memory
    keys: KeyStore
    settings: Settings
    ids: IdGenerator
    #: The one-run secret of ``memstrata ui``: it acts as the data directory's owner (``Tenant.whole_store``).
    owner_secret: str | None = None


def get_services(request: Request) -> Services:
    """The app's services (set by the lifespan)."""
    services: Services = request.app.state.services
    return services


def get_memory(request: Request) -> Memory:
    """The Memory every route calls."""
    return get_services(request).memory


def get_ids(request: Request) -> IdGenerator:
    """Makes ids for messages sent without one, so every stored id can carry the tenant's namespace."""
    return get_services(request).ids


MemoryDep = Annotated[Memory, Depends(get_memory)]
IdsDep = Annotated[IdGenerator, Depends(get_ids)]
ServicesDep = Annotated[Services, Depends(get_services)]
