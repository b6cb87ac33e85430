"""What the backends' numbered migrations share: the step, the versions still to apply, the refusal of a newer schema.

Each backend keeps its own steps (their SQL differs) and its own way of applying them in
one transaction; this module holds only what is the same in both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memstrata.errors import SchemaTooNew


@dataclass(kw_only=True, frozen=True, slots=True)
class Migration:
    """One schema step."""

    version: int
    name: str
    sql: str
    #: Tables it alters under an exclusive lock (PostgreSQL's steps; SQLite's writer lock covers the
    #: whole file): ``migrate`` locks those of every pending step, all in one statement, before any step
    #: runs (a lock taken later could deadlock with an older process that holds one of them and waits
    #: for another).
    locks: tuple[str, ...] = ()


#: The schema version a database records (0: none yet), in the SQL both backends speak.
RECORDED_VERSION = "SELECT COALESCE(MAX(version), 0) FROM schema_migrations"


def pending(migrations: Iterable[Migration], current: int) -> list[Migration]:
    """The steps past the ``current`` version, in their order."""
    return [migration for migration in migrations if migration.version > current]


def refuse_if_too_new(version: int, latest: int, location: str, package: str) -> None:
    """Raise ``SchemaTooNew`` for a schema ``version`` past the ``latest`` this memstrata knows.

    ``package`` is what ``pip install -U`` upgrades: the distribution with the backend's extra.
    """
    if version > latest:
        raise SchemaTooNew(
            f"{location} has schema version {version}, but this memstrata knows only up to "
            f"{latest}; upgrade memstrata (pip install -U {package}) to open it"
        )
