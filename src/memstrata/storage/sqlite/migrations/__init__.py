"""Numbered schema migrations; each runs in one transaction with its record. Never edit a released one.

``schema`` holds the first schema (steps 1 to 3), ``upgrades`` every later step, and
``runner`` applies those a database lacks.
"""

from memstrata.storage.migrating import Migration
from memstrata.storage.sqlite.migrations.runner import (
    LATEST_VERSION,
    MIGRATIONS,
    migrate,
    refuse_if_too_new,
    stored_version,
)

__all__ = ["LATEST_VERSION", "MIGRATIONS", "Migration", "migrate", "refuse_if_too_new", "stored_version"]
