"""Tenants: each API key's tenant gets its own namespace of user ids and memory ids.

Requests name plain ids; the store sees them as ``"<tenant>/<id>"``. Tenant names cannot
contain the separator, so one tenant's ids can never spell another's, and every read is
confined to the caller's namespace (another tenant's memory is simply not found).

``Tenant.whole_store()`` is the one exception: the data directory's owner under
``memstrata ui``, reached only with that run's secret, sees ids as stored, as the CLI does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from memstrata.errors import InvalidInput, NotFound
from memstrata.models import SPACE_MARK
from memstrata.validation import MAX_IDENTIFIER_LENGTH, check_identifier

T = TypeVar("T")
SEPARATOR = "/"
TENANT_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
LOCAL_TENANT = "local"
"""The tenant of requests without a key when ``server_allow_anonymous`` is on."""
WHOLE_STORE = "*"
"""The name shown for the data directory's owner (``memstrata ui``); no key's tenant can be named so."""


def check_tenant(value: object) -> str:
    """Return ``value`` if it is a valid tenant name (letters, digits, ``.``, ``_``, ``-``; at most 64)."""
    if not isinstance(value, str) or TENANT_PATTERN.fullmatch(value) is None:
        raise InvalidInput(
            f"tenant {value!r} is not valid: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return value


@dataclass(frozen=True, slots=True)
class Tenant:
    """The caller's namespace: maps request ids to stored ids and back."""

    name: str
    #: The owner of the data directory (``memstrata ui``): ids are stored as given, as the CLI and Python see them.
    is_whole_store: bool = False

    def __post_init__(self) -> None:
        if not self.is_whole_store:
            check_tenant(self.name)

    @classmethod
    def whole_store(cls) -> Tenant:
        """The data directory's owner: every user, with no namespace, as ``memstrata`` commands see them."""
        return cls(WHOLE_STORE, is_whole_store=True)

    @property
    def prefix(self) -> str:
        """What every stored id of this tenant starts with (nothing for the whole store)."""
        return "" if self.is_whole_store else self.name + SEPARATOR

    def inside(self, value: object, what: str) -> str:
        """The stored form of a request's id (user, memory); InvalidInput when unusable."""
        plain = str(check_identifier(value, what))
        longest = MAX_IDENTIFIER_LENGTH - len(self.prefix)
        if len(plain) > longest:
            raise InvalidInput(f"{what} is longer than {longest} characters")
        return self.prefix + plain

    def optional(self, value: str | None, what: str) -> str | None:
        """Like :meth:`inside`, passing ``None`` through."""
        return None if value is None else self.inside(value, what)

    def outside(self, stored: str) -> str:
        """The id a client sees for a stored id of this tenant (ids made by memstrata pass unchanged)."""
        return stored[len(self.prefix) :] if stored.startswith(self.prefix) else stored

    def may_be_unprefixed(self, requested: str) -> bool:
        """Whether a requested id may name a stored id that has no namespace (one memstrata made).

        An id spelled with this tenant's prefix is the stored form of the client's own id
        without it (``acme/m-1`` is how ``m-1`` is stored), so it may not be looked up raw:
        every memory would answer to two names.
        """
        return not requested.startswith(self.prefix)

    def find(self, requested: str, lookup: Callable[[str], T]) -> T:
        """``lookup`` of the memory a requested id names: the client's own id, namespaced, else one memstrata made.

        Chat turns stored before chat ids were namespaced, and copies shared into a space,
        carry no namespace; ``lookup`` stays in the memory the request names either way.
        """
        try:
            return lookup(self.inside(requested, "id"))
        except NotFound:
            if not self.may_be_unprefixed(requested):
                raise
            return lookup(requested)

    def owns(self, stored: str) -> bool:
        """Whether a stored user id belongs to this tenant."""
        return stored.startswith(self.prefix)

    def clean(self, message: str) -> str:
        """An error message with this tenant's namespace taken out of the ids it quotes.

        Only a prefix that opens a quoted id is taken out ("id 'acme/x'" → "id 'x'"); the
        same letters elsewhere in the message ("'zzacme/q'") are the client's own. A space's
        stored scope id is quoted as its plain name ("'team'"), whether its mark is written
        as the character or as the escape ``repr`` makes of it.
        """
        mark = f"(?:{re.escape(SPACE_MARK)}|{re.escape(ascii(SPACE_MARK)[1:-1])})?"
        return re.sub(f"(?<=['\"]){mark}{re.escape(self.prefix)}", "", message)
