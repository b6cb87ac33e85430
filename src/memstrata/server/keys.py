"""API keys: made here, stored as SHA-256 hashes in the store, checked on every request.

Needs no web framework, so ``memstrata keys …`` works without the ``server`` extra.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime

from memstrata import ApiKey, ClosableKeyStore, KeyStore, open_key_store
from memstrata.errors import InvalidInput, NotFound
from memstrata.ids import IdGenerator
from memstrata.models import KeyRole
from memstrata.server.tenancy import Tenant, check_tenant
from memstrata.validation import check_identifier

__all__ = [
    "ClosableKeyStore",
    "check_role",
    "create_key",
    "find_key",
    "hash_secret",
    "list_keys",
    "new_secret",
    "open_key_store",
    "revoke_key",
]

SECRET_PREFIX = "msk_"
SECRET_BYTES = 32
MAX_SECRET_LENGTH = 200


def new_secret() -> str:
    """A fresh secret: ``msk_`` and 32 random bytes, URL-safe base64."""
    return SECRET_PREFIX + secrets.token_urlsafe(SECRET_BYTES)


def hash_secret(secret: str) -> str:
    """SHA-256 hex of a secret; a fast hash is right because secrets have 256 random bits."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def check_role(value: str) -> KeyRole:
    """The role ``value`` names (``read``, ``write`` or ``admin``); InvalidInput otherwise."""
    try:
        return KeyRole(value)
    except ValueError:
        names = ", ".join(role.value for role in KeyRole)
        raise InvalidInput(f"role {value!r} is not valid: use one of {names}") from None


def create_key(
    store: KeyStore,
    *,
    tenant: str,
    name: str = "default",
    agent_id: str | None = None,
    role: KeyRole | str = KeyRole.ADMIN,
    now: datetime | None = None,
) -> tuple[ApiKey, str]:
    """Make and store a key for ``tenant``; returns the record and the secret, which is shown only now.

    ``agent_id`` is the agent the key acts as in shared spaces (plain, inside the tenant);
    ``role`` is what the key may do (admin, the default, is what every key could do before roles).
    """
    label = str(check_identifier(name, "name"))
    owner = Tenant(check_tenant(tenant))
    allowed = check_role(role)
    if agent_id is not None:
        owner.inside(agent_id, "agent_id")  # refused now, not on the key's first request, if it cannot be used
    key = ApiKey(
        id=IdGenerator().new(),
        tenant=owner.name,
        name=label,
        created_at=now or datetime.now(UTC),
        agent_id=agent_id,
        role=allowed,
    )
    secret = new_secret()
    store.add_api_key(key, hash_secret(secret))
    return key, secret


def find_key(store: KeyStore, secret: str) -> ApiKey | None:
    """The key (active or revoked) a presented secret belongs to, if any."""
    if not secret or len(secret) > MAX_SECRET_LENGTH:
        return None
    return store.key_for_hash(hash_secret(secret))


def revoke_key(store: KeyStore, key_id: str, *, now: datetime | None = None) -> None:
    """Revoke a key at once; NotFound if no key has that id."""
    identifier = str(check_identifier(key_id, "key id"))
    if not store.revoke_api_key(identifier, now or datetime.now(UTC)):
        raise NotFound(f"no API key with id {identifier!r}; `memstrata keys list` shows them")


def list_keys(store: KeyStore, tenant: str | None = None) -> list[ApiKey]:
    """Keys (of one tenant, or all), oldest first; secrets are never stored, so never shown."""
    return store.api_keys(check_tenant(tenant) if tenant is not None else None)
