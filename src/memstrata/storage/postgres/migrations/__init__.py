"""Numbered schema migrations for PostgreSQL; each runs in one transaction with its record. Never edit a released one.

``schema`` holds the first schema (steps 1 to 3), ``upgrades`` every later step, and
``runner`` applies those a database lacks, under an advisory lock (its key is here too).
"""

from memstrata.storage.migrating import Migration
from memstrata.storage.postgres.migrations.runner import (
    LATEST_VERSION,
    LOCK_NAMESPACE,
    MIGRATION_LOCK,
    MIGRATIONS,
    TABLES,
    USER_LOCK_NAMESPACE,
    VECTOR_INDEX_LOCK,
    migrate,
)

__all__ = [
    "LATEST_VERSION",
    "LOCK_NAMESPACE",
    "MIGRATIONS",
    "MIGRATION_LOCK",
    "TABLES",
    "USER_LOCK_NAMESPACE",
    "VECTOR_INDEX_LOCK",
    "Migration",
    "migrate",
]
