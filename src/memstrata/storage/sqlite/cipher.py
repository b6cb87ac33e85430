"""Encryption at rest for the SQLite store: SQLCipher (``sqlcipher3-binary``) opens the same schema encrypted.

The whole file is encrypted page by page, the write-ahead log and the FTS5 index included, with a
key derived from the passphrase (SQLCipher 4 defaults: PBKDF2-HMAC-SHA512, AES-256, HMAC per
page). The key is never stored. SQLCipher's driver has exception classes of its own; the
connection handed to the store translates them into the standard ``sqlite3`` ones, so every
``except sqlite3.Error`` in the store holds for both.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from pydantic import SecretStr

from memstrata.errors import ConfigError, EncryptionKeyError, MissingDependency, StorageError

INSTALL = "pip install 'memstrata[encryption]'"
KEY_SETTING = "MEMSTRATA_ENCRYPTION_KEY"
_RAW_KEY = re.compile(r"^\s*x'[0-9a-fA-F]*'\s*$")


def driver() -> Any:
    """SQLCipher's DB-API module, or MissingDependency naming the extra."""
    try:
        import sqlcipher3.dbapi2 as sqlcipher
    except ImportError as exc:
        raise MissingDependency(f"an encrypted store needs SQLCipher: {INSTALL}") from exc
    return sqlcipher


def check_key(key: SecretStr) -> str:
    """The passphrase, or ConfigError for one SQLCipher cannot take (empty, or holding a NUL)."""
    value = key.get_secret_value()
    if not value.strip():
        raise ConfigError(f"{KEY_SETTING} is empty; give a passphrase, or unset it for an unencrypted store")
    if "\x00" in value:
        raise ConfigError(f"{KEY_SETTING} holds a NUL character; choose another passphrase")
    if _RAW_KEY.match(value):
        # SQLCipher would take x'…' as a raw key and skip the key derivation the docs promise.
        raise ConfigError(f"{KEY_SETTING} looks like a raw key (x'…'); give a passphrase")
    return value


def connect(location: str, key: SecretStr, *, timeout: float) -> sqlite3.Connection:
    """Open ``location`` with ``key`` and prove the key opens it; EncryptionKeyError if not, nothing written."""
    sqlcipher = driver()
    passphrase = check_key(key)
    try:
        raw = sqlcipher.connect(location, isolation_level=None, check_same_thread=False, timeout=timeout)
    except sqlcipher.Error as exc:
        raise _standard(exc) from exc
    try:
        _unlock(raw, sqlcipher, passphrase)
        raw.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlcipher.Error as exc:
        raw.close()
        if not _is_not_a_database(exc):
            raise _standard(exc) from exc  # a lock, a disk error: the store reports it, the key is not blamed
        raise EncryptionKeyError(
            f"{KEY_SETTING} does not open {location}: the key is wrong, or the store is not encrypted (unset the"
            " key to open an unencrypted store; `memstrata rekey` encrypts one)"
        ) from exc
    return cast(sqlite3.Connection, _Connection(raw, sqlcipher.Error))


def rekey(path: Path, old: SecretStr | None, new: SecretStr | None) -> None:
    """Rewrite the store at ``path`` under ``new`` (None: unencrypted), read with ``old`` (None: unencrypted).

    The copy is written beside the store with its permissions, under the write lock, and swapped
    in with one rename, so a failure leaves the store as it was. Every other process using the
    store must be stopped first: an idle connection cannot be detected, and one would go on
    writing to the replaced file.
    """
    sqlcipher = driver()
    if not path.is_file():
        raise StorageError(f"no store at {path}")
    target = _quoted(check_key(new)) if new is not None else "''"
    copy = path.with_name(path.name + ".rekey")
    _remove(copy)
    try:
        source = sqlcipher.connect(str(path), isolation_level=None)
    except sqlcipher.Error as exc:
        raise StorageError(f"cannot open {path}: {exc}") from exc
    try:
        _unlock(source, sqlcipher, check_key(old) if old is not None else None)
        try:
            version = int(source.execute("PRAGMA user_version").fetchone()[0])
        except sqlcipher.Error as exc:
            if not _is_not_a_database(exc):
                raise
            raise EncryptionKeyError(
                f"the current key does not open {path}: set {KEY_SETTING} to the key it was encrypted with"
                " (unset it if the store is not encrypted)"
            ) from exc
        # Every frame into the file first: the copy reads the file, and its -wal goes with the swap.
        source.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        # Created with the store's permissions before SQLite opens it, so no moment leaves it readable to others.
        descriptor = os.open(copy, os.O_CREAT | os.O_EXCL | os.O_WRONLY, stat.S_IMODE(path.stat().st_mode))
        os.close(descriptor)
        source.execute(f"ATTACH DATABASE {_quoted(str(copy))} AS rekeyed KEY {target}")
        source.execute("BEGIN IMMEDIATE")
        source.execute("SELECT sqlcipher_export('rekeyed')").fetchall()
        source.execute(f"PRAGMA rekeyed.user_version = {version}")
        source.execute("COMMIT")
        source.execute("DETACH DATABASE rekeyed")
        _fsync(copy)
    except sqlcipher.Error as exc:
        _remove(copy)
        raise StorageError(f"re-encrypting {path} failed: {exc}; the store is unchanged") from exc
    except BaseException:
        _remove(copy)
        raise
    finally:
        source.close()
    # Closed first: the last connection's close tidies the old file's -wal and -shm by name.
    for suffix in ("-wal", "-shm"):
        _remove(path.with_name(path.name + suffix))
    os.replace(copy, path)
    _fsync(path.parent)


def _unlock(connection: Any, sqlcipher: Any, passphrase: str | None) -> None:
    """Silence SQLCipher's own log (a wrong key is our error to report), then give the key, if any."""
    with contextlib.suppress(sqlcipher.Error):  # older SQLCipher builds lack it: they log, nothing more
        connection.execute("PRAGMA cipher_log_level = NONE")
    if passphrase is not None:
        connection.execute(f"PRAGMA key = {_quoted(passphrase)}")


def _is_not_a_database(error: BaseException) -> bool:
    """SQLITE_NOTADB: what a wrong key (or a key for a plain file) looks like to SQLite."""
    return "not a database" in str(error)


def _quoted(text: str) -> str:
    """``text`` as an SQL string literal (PRAGMA key takes no bound parameters)."""
    return "'" + text.replace("'", "''") + "'"


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _standard(error: BaseException) -> sqlite3.Error:
    """The ``sqlite3`` exception of the same kind (IntegrityError for IntegrityError …), with the same message."""
    kind = getattr(sqlite3, type(error).__name__, sqlite3.Error)
    if not (isinstance(kind, type) and issubclass(kind, sqlite3.Error)):
        kind = sqlite3.Error
    return kind(*error.args)


class _Translating:
    """Calls through to a SQLCipher object, raising its errors as the standard ``sqlite3`` ones."""

    def __init__(self, wrapped: Any, errors: type[BaseException]) -> None:
        self._wrapped = wrapped
        self._errors = errors

    def _call(self, method: Callable[..., Any], *arguments: Any, **options: Any) -> Any:
        try:
            return method(*arguments, **options)
        except self._errors as exc:
            raise _standard(exc) from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._wrapped, name)


class _Cursor(_Translating):
    def execute(self, sql: str, parameters: Any = ()) -> _Cursor:
        self._call(self._wrapped.execute, sql, parameters)
        return self

    def executemany(self, sql: str, parameters: Any) -> _Cursor:
        self._call(self._wrapped.executemany, sql, parameters)
        return self

    def fetchone(self) -> Any:
        return self._call(self._wrapped.fetchone)

    def fetchall(self) -> list[Any]:
        return cast(list[Any], self._call(self._wrapped.fetchall))

    def fetchmany(self, size: int = 1) -> list[Any]:
        return cast(list[Any], self._call(self._wrapped.fetchmany, size))

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row


class _Connection(_Translating):
    def execute(self, sql: str, parameters: Any = ()) -> _Cursor:
        return _Cursor(self._call(self._wrapped.execute, sql, parameters), self._errors)

    def executemany(self, sql: str, parameters: Any) -> _Cursor:
        return _Cursor(self._call(self._wrapped.executemany, sql, parameters), self._errors)

    def executescript(self, script: str) -> _Cursor:
        return _Cursor(self._call(self._wrapped.executescript, script), self._errors)

    def cursor(self) -> _Cursor:
        return _Cursor(self._call(self._wrapped.cursor), self._errors)

    def commit(self) -> None:
        self._call(self._wrapped.commit)

    def rollback(self) -> None:
        self._call(self._wrapped.rollback)

    def close(self) -> None:
        self._call(self._wrapped.close)

    def __enter__(self) -> _Connection:
        self._call(self._wrapped.__enter__)
        return self

    def __exit__(self, *exc_info: object) -> bool:
        return bool(self._call(self._wrapped.__exit__, *exc_info))
