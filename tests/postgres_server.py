"""A real PostgreSQL with pgvector for the tests, started once per session by the ``pgserver`` package.

Each test that asks for ``postgres_url`` gets an empty database of its own, dropped
afterwards; ``migrated_postgres_url`` gives a copy of one migrated once per session.
Where the server cannot start the tests skip with the reason, except in CI (``CI=true``),
where they fail: a backend that silently stops being tested is worse than a red build.
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest


def _unavailable(reason: str, *, module_level: bool = False) -> NoReturn:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"PostgreSQL tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason}", allow_module_level=module_level)


def require_driver() -> ModuleType:
    """``psycopg``, for test modules that use it directly (skips them locally, fails them in CI, when missing)."""
    try:
        return importlib.import_module("psycopg")
    except ImportError:
        _unavailable("psycopg is not installed; run pip install -e '.[test]'", module_level=True)


class PostgresServer:
    """The running test server: URLs of its databases, and an admin connection."""

    def __init__(self, handle: object) -> None:
        self._handle = handle

    def url(self, database: str = "postgres") -> str:
        """A storage URL (``postgresql://…``) for one database of the server."""
        uri: str = self._handle.get_uri(database=database)  # type: ignore[attr-defined]
        return uri

    def admin(self, statement: str) -> None:
        """Run one statement on the ``postgres`` database, outside any transaction."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(statement)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """Start PostgreSQL (pgvector included) in a temporary directory; stop it and delete the directory at the end.

    The directory is not under pytest's ``tmp_path``: a concurrent pytest session would
    prune it as an old base directory while the server still runs from it.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on import
            import pgserver
        import psycopg  # noqa: F401
    except ImportError as exc:
        _unavailable(f"{exc.name} is not installed; run pip install -e '.[test]'")
    root = Path(tempfile.mkdtemp(prefix="memstrata-pg-"))
    data = root / "data"
    try:
        handle = pgserver.get_server(data, cleanup_mode="stop")
    except Exception as exc:
        log = data / "log"
        details = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        _unavailable(f"pgserver could not start PostgreSQL in {data}: {exc!r}\n{details}")
    server = PostgresServer(handle)
    try:
        # A throwaway server: skipping fsync makes the per-test CREATE/DROP DATABASE (a checkpoint) cheap.
        for setting in ("fsync = off", "synchronous_commit = off", "full_page_writes = off"):
            server.admin(f"ALTER SYSTEM SET {setting}")
        server.admin("SELECT pg_reload_conf()")
    except Exception as exc:
        handle.cleanup()
        shutil.rmtree(root, ignore_errors=True)
        _unavailable(f"PostgreSQL started but does not answer: {exc!r}")
    yield server
    handle.cleanup()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """The URL of a fresh, empty database, dropped after the test."""
    name = f"memstrata_test_{uuid.uuid4().hex[:16]}"
    postgres_server.admin(f'CREATE DATABASE "{name}"')
    yield postgres_server.url(name)
    postgres_server.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_template(postgres_server: PostgresServer) -> str:
    """A database migrated once per session, cloned by ``migrated_postgres_url`` (a copy is faster than migrating)."""
    from memstrata.storage import open_store

    name = "memstrata_template"
    postgres_server.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    postgres_server.admin(f'CREATE DATABASE "{name}"')
    open_store(postgres_server.url(name)).close()  # runs every migration, then disconnects
    return name


@pytest.fixture
def migrated_postgres_url(postgres_server: PostgresServer, postgres_template: str) -> Iterator[str]:
    """The URL of a fresh database with memstrata's schema and no data, dropped after the test."""
    name = f"memstrata_test_{uuid.uuid4().hex[:16]}"
    postgres_server.admin(f'CREATE DATABASE "{name}" TEMPLATE "{postgres_template}"')
    yield postgres_server.url(name)
    postgres_server.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
