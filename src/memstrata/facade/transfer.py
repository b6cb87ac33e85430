"""Export to JSONL and import from it: the moving half of the Memory API."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, Protocol, TextIO

from memstrata.config import CONFIG_FILE_NAME, DATABASE_FILE_NAME, Settings
from memstrata.embeddings.base import Embedder
from memstrata.errors import InvalidInput, StorageError
from memstrata.models import TransferReport, Turn
from memstrata.remote.costs import COST_LOG_FILE_NAME
from memstrata.storage.roles import Maintenance, TurnStore, VectorStore
from memstrata.tiers.episodic import Episodic
from memstrata.transfer import end_line, header_line, read_export_file, turn_line

EXPORT_PAGE = 500


class TransferStore(TurnStore, VectorStore, Maintenance, Protocol):
    """What export and import need: every turn in order, their vectors, where the store lives."""


class Transfer:
    """Writes a store's turns (with or without vectors) to a JSONL file atomically, and reads one back."""

    def __init__(self, *, store: TransferStore, embedder: Embedder, episodic: Episodic, settings: Settings) -> None:
        self._store = store
        self._embedder = embedder
        self._episodic = episodic
        self._settings = settings

    def export(self, path: object, user_id: str | None, *, embeddings: bool) -> TransferReport:
        """Write turns (of one user, or all) to JSONL; the file appears complete or not at all."""
        given = _path(path, "the export path")
        target = _export_target(given, _own_files(self._settings.data_dir, self._store.location))
        turns = vectors = 0
        temporary: Path | None = None
        try:
            # A name of its own beside the target (two exports at once never share one), created
            # readable by its owner only: it holds the memories.
            descriptor, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
            temporary = Path(name)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(header_line(self._embedder.model_id))
                page: list[tuple[int, Turn]] = []
                for item in self._store.iterate(user_id):
                    page.append(item)
                    if len(page) == EXPORT_PAGE:
                        vectors += self._write_page(handle, page, embeddings)
                        turns, page = turns + len(page), []
                vectors += self._write_page(handle, page, embeddings)
                turns += len(page)
                handle.write(end_line(turns))
                handle.flush()
                os.fsync(handle.fileno())
            if target.exists():
                with contextlib.suppress(OSError):  # the file it replaces keeps its permissions
                    shutil.copymode(target, temporary)
            temporary.replace(target)
        except OSError as exc:
            _remove(temporary)
            raise StorageError(f"cannot write the export to {target}: {exc.strerror or exc}") from exc
        except BaseException:
            _remove(temporary)  # a store error or an interrupt: no half copy of the memories stays
            raise
        _sync_directory(target.parent)
        return TransferReport(path=str(given), turns=turns, embeddings=vectors)

    def import_(self, path: object, spaces: Callable[[set[str]], None] | None = None) -> TransferReport:
        """Load a JSONL export; a bad line or a conflicting id stores none of it.

        Every line, and every id against the store, is checked first; the turns are then
        written in transactions of at most ``max_messages_per_add``, so no one transaction
        holds the store's write lock for long. Stopped in between (a crash, a store error),
        the batches written stay, and importing the file again stores the rest: lines
        already stored unchanged are skipped.

        ``spaces`` is given the names of the spaces the file holds memories of, to create those
        missing once the turns are stored: a file refused (a bad line, a conflicting id) creates
        none. Stopped in between, the turns wait unseen under the space's name, and importing
        the file again (or creating the space) brings them in.
        """
        source = _path(path, "the file to import")
        settings = self._settings
        items = read_export_file(
            source, max_bytes=settings.max_text_bytes, max_metadata_bytes=settings.max_metadata_bytes
        )
        named = {item.turn.space for item in items if item.turn.space is not None}
        model_id, dimension = self._embedder.model_id, self._embedder.dimension
        known = {
            item.turn.id: item.vector
            for item in items
            if item.vector is not None and item.model_id == model_id and item.vector.shape == (dimension,)
        }
        turns = [item.turn for item in items]
        # A line is already present only if it is the stored turn as exported: same message,
        # time and metadata (an import restores memories; it never edits one).
        conflict = (
            f"in {source} names a different message than the stored one (its text, speaker, scope, time"
            " or metadata differ)"
        )
        # Conflicts are checked for the whole file before its first batch is written.
        self._episodic.refuse_conflicts(turns, conflict, _same_turn)
        fresh: list[Turn] = []
        for start in range(0, len(turns), settings.max_messages_per_add):
            batch = turns[start : start + settings.max_messages_per_add]
            fresh.extend(self._episodic.store_turns(batch, known, conflict, same=_same_turn)[1])
        if named and spaces is not None:
            spaces(named)
        return TransferReport(
            path=str(source),
            turns=len(fresh),
            embeddings=len([t for t in fresh if t.id in known]),
            skipped=len(turns) - len(fresh),
        )

    def _write_page(self, handle: TextIO, page: list[tuple[int, Turn]], embeddings: bool) -> int:
        """Write one page of turns; how many vectors went with them."""
        model_id = self._embedder.model_id
        stored = self._store.vectors_for(model_id, [seq for seq, _ in page]) if embeddings else {}
        for seq, turn in page:
            vector = stored.get(seq)
            handle.write(turn_line(turn, model_id=model_id if vector is not None else None, vector=vector))
        return len(stored)


def _same_turn(stored: Turn, imported: Turn) -> bool:
    """Whether an imported line is the stored turn: the same message, said at the same time, with the same metadata."""
    return (
        stored.is_same_message(imported)
        and stored.created_at == imported.created_at
        and _same_value(_numbers_as_floats(stored.metadata), _numbers_as_floats(imported.metadata))
    )


def _same_value(left: Any, right: Any) -> bool:
    """JSON equality in which a flag is never a number (Python's ``True == 1`` would say it is)."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same_value(left[key], right[key]) for key in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same_value(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)


def _numbers_as_floats(metadata: Mapping[str, Any]) -> Any:
    """Metadata with every number a float: PostgreSQL's jsonb gives ``1e23`` back as the integer 10**23."""
    try:
        return json.loads(json.dumps(metadata), parse_int=float)
    except (TypeError, ValueError):  # not JSON (a store never hands such metadata back): compare as is
        return metadata


def _path(value: object, what: str) -> Path:
    """``value`` as a path with ``~`` expanded; InvalidInput for anything that is not one."""
    if not isinstance(value, str | os.PathLike):
        raise InvalidInput(f"{what} must be a path (str or os.PathLike), not {type(value).__name__}")
    text = os.fspath(value)
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"{what} must be a non-empty path")
    try:
        return Path(text).expanduser()
    except RuntimeError as exc:  # "~nobody/x": no such user's home
        raise InvalidInput(f"{what} {text!r} cannot be expanded: {exc}") from exc


def _own_files(data_dir: Path, store_location: str) -> set[Path]:
    """The files memstrata keeps, which an export must never replace: the store's, the settings, the cost log."""
    databases = [data_dir / DATABASE_FILE_NAME]
    if store_location != ":memory:" and "://" not in store_location:  # a SQLite file; PostgreSQL's is a URL
        databases.append(Path(store_location))  # made absolute when the store was opened
    own = {data_dir / CONFIG_FILE_NAME, data_dir / COST_LOG_FILE_NAME}
    for database in databases:
        own |= {database, *(database.with_name(database.name + suffix) for suffix in ("-wal", "-shm", "-journal"))}
    resolved: set[Path] = set()
    for path in own:
        with contextlib.suppress(OSError, RuntimeError):
            resolved.add(path.resolve())
    return resolved


def _export_target(target: Path, own_files: Collection[Path] = ()) -> Path:
    """Where an export goes: a regular file's path, through any symlink to it.

    The export is written beside its target and renamed over it, so a symlink is followed
    first (the link keeps pointing at the new file) and a target that is not a regular file
    (a directory, a FIFO, a device), or one of memstrata's own files (``own_files``, the
    store's database among them), is refused rather than replaced.
    """
    if target.name in ("", ".", ".."):
        raise InvalidInput(f"the export path {str(target)!r} names a directory; give a file name, e.g. backup.jsonl")
    try:
        resolved = target.resolve()
        present = resolved.exists()
    except RuntimeError as exc:  # a symlink loop (Python 3.11 raises this, not OSError)
        raise InvalidInput(f"the export path {str(target)!r} cannot be followed: {exc}") from exc
    except OSError as exc:
        raise StorageError(f"cannot write the export to {target}: {exc.strerror or exc}") from exc
    if present and not resolved.is_file():
        kind = "a directory" if resolved.is_dir() else "not a regular file"
        raise InvalidInput(f"the export path {str(target)!r} is {kind}; give a regular file's path")
    if resolved in own_files:
        raise InvalidInput(
            f"the export path {str(target)!r} is one of memstrata's own files (the store, its settings or its"
            " cost log), which the export would replace; give another name, e.g. backup.jsonl"
        )
    return resolved


def _remove(path: Path | None) -> None:
    """Delete a partial file if there is one; a failure to is not the error worth reporting."""
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def _sync_directory(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX); where directories cannot be opened, the rename stands as is."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
