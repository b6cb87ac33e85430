"""Verify a bundled model file against its pinned sha256, once per file version."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from memstrata.errors import EmbeddingError


def verify_file(
    path: Path, expected_sha256: str, *, cache_dir: Path | None = None, fix: str = "reinstall the package that ships it"
) -> None:
    """Raise :class:`EmbeddingError` unless ``path`` hashes to ``expected_sha256``.

    Hashing a 70 MB model costs a third of a second, so a verified (size, mtime)
    is remembered in ``cache_dir`` and not hashed again until the file changes.
    """
    if not path.is_file():
        raise EmbeddingError(f"model file {path} is missing; {fix}")
    stat = path.stat()
    stamp = f"{expected_sha256}:{stat.st_size}:{stat.st_mtime_ns}"
    cache_file = cache_dir / "verified-models.json" if cache_dir else None
    cached = _read_cache(cache_file)
    if cached.get(str(path)) == stamp:
        return
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != expected_sha256:
        raise EmbeddingError(
            f"model file {path} does not match its pinned checksum "
            f"(expected sha256 {expected_sha256}, got {digest.hexdigest()}); {fix}"
        )
    if cache_file is not None:
        cached[str(path)] = stamp
        try:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            temporary = cache_file.with_suffix(".tmp")
            temporary.write_text(json.dumps(cached))
            temporary.replace(cache_file)
        except OSError:
            pass  # the cache only saves time; failing to write it is harmless


def _read_cache(cache_file: Path | None) -> dict[str, str]:
    if cache_file is None or not cache_file.is_file():
        return {}
    try:
        data = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
