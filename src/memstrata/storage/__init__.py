"""Storage backends, chosen by the scheme of a storage URL and imported only when chosen."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from memstrata.errors import ConfigError

if TYPE_CHECKING:
    from memstrata.storage.base import Store, WorkingSet

#: URL scheme → "module:factory"; the factory takes (url, busy_timeout_seconds).
BACKENDS: dict[str, str] = {
    "sqlite": "memstrata.storage.sqlite.store:open_sqlite",
    "postgresql": "memstrata.storage.postgres.store:open_postgres",
    "postgres": "memstrata.storage.postgres.store:open_postgres",
}

#: URL scheme → "module:factory" of a working set kept outside the store; the factory takes (url).
WORKING_BACKENDS: dict[str, str] = {
    "redis": "memstrata.storage.redis.working:open_redis_working",
    "rediss": "memstrata.storage.redis.working:open_redis_working",
}


def open_store(url: str, *, busy_timeout_seconds: float = 30.0) -> Store:
    """Open the backend named by ``url``'s scheme (``sqlite:///path/to/file.db``)."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    target = BACKENDS.get(scheme)
    if target is None:
        known = ", ".join(f"{name}://" for name in sorted(BACKENDS))
        raise ConfigError(f"unsupported storage URL {url!r}; supported: {known}")
    module_name, _, factory_name = target.partition(":")
    factory = getattr(importlib.import_module(module_name), factory_name)
    store: Store = factory(url, busy_timeout_seconds=busy_timeout_seconds)
    return store


def open_working_set(url: str) -> WorkingSet:
    """Open the working set named by ``url``'s scheme (``redis://127.0.0.1:6379/0``)."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    target = WORKING_BACKENDS.get(scheme)
    if target is None:
        known = ", ".join(f"{name}://" for name in sorted(WORKING_BACKENDS))
        raise ConfigError(f"unsupported working_url {url!r}; supported: {known} (or leave it unset)")
    module_name, _, factory_name = target.partition(":")
    factory = getattr(importlib.import_module(module_name), factory_name)
    working: WorkingSet = factory(url)
    return working
