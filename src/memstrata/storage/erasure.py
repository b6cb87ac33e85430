"""What a forget leaves of a user id: a salted hash in the audit log and share links, never the id.

The salt is random, made once per store and kept in it (``store_secrets``), so the hash of
a user id cannot be computed without the store, and a later request naming the same id can
still be matched to the audit rows its forget left.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from memstrata.errors import StorageError
from memstrata.storage.dialect import Connection, Dialect

SALT_NAME = "audit_salt"
#: Marks a hashed id, so it is never taken for a user's or a space's own.
PSEUDONYM_PREFIX = "forgotten:"


def pseudonym(salt: str, user_id: str) -> str:
    """The salted hash that stands for ``user_id`` once it was forgotten."""
    digest = hmac.new(bytes.fromhex(salt), user_id.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
    return PSEUDONYM_PREFIX + digest[:32]


def read_salt(connection: Connection, dialect: Dialect) -> str | None:
    """The store's salt; None until the first forget made it."""
    row = connection.execute(dialect.sql("SELECT value FROM store_secrets WHERE name = %s"), (SALT_NAME,)).fetchone()
    return None if row is None else str(row[0])


def names_of(connection: Connection, dialect: Dialect, user_id: str) -> list[str]:
    """The ids the audit rows of ``user_id`` are kept under: its own, and its hash once it was forgotten."""
    salt = read_salt(connection, dialect)
    return [user_id] if salt is None else [user_id, pseudonym(salt, user_id)]


def erase_user_id(connection: Connection, dialect: Dialect, user_id: str) -> str:
    """Replace ``user_id`` by its hash in the audit log and share links, in the caller's transaction; the hash.

    The links of copies shared into ``user_id``'s own scope go (the copies went with it).
    """
    # Made by the first forget, not by the migration: both backends draw it from the same generator.
    connection.execute(
        dialect.sql("INSERT INTO store_secrets (name, value) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING"),
        (SALT_NAME, secrets.token_hex(32)),
    )
    salt = read_salt(connection, dialect)
    if salt is None:  # inserted just above, in this transaction
        raise StorageError("the store's salt for forgotten ids could not be written")
    alias = pseudonym(salt, user_id)
    connection.execute(dialect.sql("UPDATE events SET user_id = %s WHERE user_id = %s"), (alias, user_id))
    connection.execute(dialect.sql("UPDATE shares SET source_scope = %s WHERE source_scope = %s"), (alias, user_id))
    connection.execute(dialect.sql("DELETE FROM shares WHERE scope = %s"), (user_id,))
    return alias
