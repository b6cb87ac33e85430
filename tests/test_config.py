"""Settings precedence (kwargs > env > memstrata.toml > defaults), validation and lazy loading."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from memstrata import ConfigError, Memory, Settings, load_settings
from memstrata.config import CONFIG_FILE_NAME

DEFAULTS = Settings.model_fields


def _toml(directory: Path, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CONFIG_FILE_NAME
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults(home: Path) -> None:
    settings = load_settings(home=home)
    assert settings.max_text_bytes == 1_000_000
    assert settings.search_candidates == 20
    assert settings.rrf_k == 60
    assert settings.embedder == "auto"
    assert settings.timezone == "UTC" and settings.zone.key == "UTC"
    assert settings.data_dir == home
    assert settings.resolved_storage_url == f"sqlite:///{home / 'memstrata.db'}"


@pytest.mark.parametrize("table", [True, False], ids=["memstrata-table", "top-level"])
def test_precedence_kwarg_over_env_over_toml_over_default(
    home: Path, monkeypatch: pytest.MonkeyPatch, table: bool
) -> None:
    header = "[memstrata]\n" if table else ""
    _toml(home, f"{header}max_text_bytes = 111\nsearch_candidates = 11\n")
    from_toml = load_settings(home=home)
    assert (from_toml.max_text_bytes, from_toml.search_candidates) == (111, 11)

    monkeypatch.setenv("MEMSTRATA_MAX_TEXT_BYTES", "222")
    monkeypatch.setenv("MEMSTRATA_SEARCH_CANDIDATES", "22")
    from_env = load_settings(home=home)
    assert (from_env.max_text_bytes, from_env.search_candidates) == (222, 22)

    from_kwargs = load_settings(home=home, max_text_bytes=333, search_candidates=33)
    assert (from_kwargs.max_text_bytes, from_kwargs.search_candidates) == (333, 33)

    # None means "not given": the next source down still applies.
    assert load_settings(home=home, max_text_bytes=None).max_text_bytes == 222


def test_each_setting_comes_from_its_highest_source(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _toml(home, "[memstrata]\nmax_text_bytes = 111\nsearch_candidates = 11\nrrf_k = 7\n")
    monkeypatch.setenv("MEMSTRATA_SEARCH_CANDIDATES", "22")
    settings = load_settings(home=home, rrf_k=9)
    assert settings.max_text_bytes == 111  # toml
    assert settings.search_candidates == 22  # env
    assert settings.rrf_k == 9  # kwarg
    assert settings.busy_timeout_seconds == 30.0  # default


def test_toml_found_through_env_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _toml(home, "search_candidates = 44\n")
    monkeypatch.setenv("MEMSTRATA_HOME", str(home))
    settings = load_settings()
    assert settings.search_candidates == 44
    assert settings.data_dir == home


def test_toml_in_another_home_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _toml(tmp_path / "env-home", "search_candidates = 44\n")
    monkeypatch.setenv("MEMSTRATA_HOME", str(tmp_path / "env-home"))
    assert (
        load_settings(home=tmp_path / "kwarg-home").search_candidates
        == Settings.model_fields["search_candidates"].default
    )


def test_toml_accepts_hyphenated_keys(home: Path) -> None:
    _toml(home, "[memstrata]\nmax-text-bytes = 55\nsearch-candidates = 5\n")
    settings = load_settings(home=home)
    assert (settings.max_text_bytes, settings.search_candidates) == (55, 5)


def test_toml_top_level_keys_and_a_memstrata_table_are_one_set_of_settings(home: Path) -> None:
    # llms.md shows a [memstrata.llm_prices] table; the keys above it must not be dropped.
    _toml(
        home,
        'embedder = "hash"\nmax_text_bytes = 55\n\n'
        '[memstrata.llm_prices]\n"my-model" = { input = 1.0, output = 2.0 }\n',
    )
    settings = load_settings(home=home)
    assert (settings.embedder, settings.max_text_bytes) == ("hash", 55)
    assert settings.llm_prices["my-model"].output == 2.0
    _toml(home, "max_text_bytes = 55\n[memstrata]\nmax_text_bytes = 56\n")
    with pytest.raises(ConfigError, match="max_text_bytes is set twice"):
        load_settings(home=home)
    _toml(home, 'llm-model = "a"\n[memstrata]\nllm_model = "b"\n')
    with pytest.raises(ConfigError, match="llm_model is set twice"):
        load_settings(home=home)
    _toml(home, '[memstrata]\nllm-model = "a"\nllm_model = "b"\n')
    with pytest.raises(ConfigError, match="llm_model is set twice"):
        load_settings(home=home)


def test_an_llm_timeout_past_a_day_is_a_config_error(home: Path) -> None:
    with pytest.raises(ConfigError, match="llm_timeout_seconds"):
        load_settings(home=home, llm_timeout_seconds=1e10)


def test_memory_reads_the_toml_in_its_directory(home: Path) -> None:
    _toml(home, '[memstrata]\nembedder = "hash"\nmax_text_bytes = 20\n')
    with Memory(home) as memory:
        assert memory.settings.max_text_bytes == 20
        assert memory.info()["embedder"] == "hash-bow-384"
        memory.add("x" * 20, user_id="ana")
        with pytest.raises(ValueError, match="over the limit"):
            memory.add("x" * 21, user_id="ana")
    with Memory(home, max_text_bytes=30) as memory:
        assert memory.settings.max_text_bytes == 30


def test_embedder_setting_as_a_memory_keyword(home: Path) -> None:
    # docs/python-api.md: Memory("./m", max_text_bytes=200_000, embedder="minilm")  # any setting as a keyword
    with Memory(home, embedder="hash", max_text_bytes=200_000) as memory:
        assert memory.settings.embedder == "hash"
        assert memory.info()["embedder"] == "hash-bow-384"
        memory.add("chosen by name", user_id="ana")
        assert memory.search("chosen", user_id="ana")
    with pytest.raises(ConfigError, match="unknown embedder"):
        Memory(home, embedder="nope")


def test_env_values_are_normalised(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSTRATA_EMBEDDER", "  HASH ")
    assert load_settings(home=home).embedder == "hash"


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("max_text_bytes", 0),
        ("max_text_bytes", "lots"),
        ("search_candidates", 0),
        ("search_candidates", 10_001),
        ("embedding_threads", 0),
        ("embedding_threads", 65),
        ("rrf_k", 0),
        ("busy_timeout_seconds", 0),
        ("busy_timeout_seconds", -1.5),
        ("timezone", "Mars/Olympus"),
        ("timezone", "../etc/passwd"),
        ("working_ttl_seconds", float("inf")),  # once killed the worker thread on the first Redis upkeep
        ("busy_timeout_seconds", float("inf")),
        ("promote_heat", float("nan")),
    ],
)
def test_invalid_value_in_any_source_raises_config_error_naming_it(
    home: Path, monkeypatch: pytest.MonkeyPatch, setting: str, value: object
) -> None:
    with pytest.raises(ConfigError, match=setting):
        load_settings(home=home, **{setting: value})

    monkeypatch.setenv(f"MEMSTRATA_{setting.upper()}", str(value))
    with pytest.raises(ConfigError, match=setting):
        load_settings(home=home)
    monkeypatch.delenv(f"MEMSTRATA_{setting.upper()}")

    literal = f'"{value}"' if isinstance(value, str) else str(value)
    _toml(home, f"[memstrata]\n{setting} = {literal}\n")
    with pytest.raises(ConfigError, match=setting):
        load_settings(home=home)


def test_a_time_zone_is_an_iana_name_from_any_source(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings(home=home, timezone=" America/Los_Angeles ").zone.key == "America/Los_Angeles"
    monkeypatch.setenv("MEMSTRATA_TIMEZONE", "Asia/Tokyo")
    assert load_settings(home=home).zone.key == "Asia/Tokyo"
    with pytest.raises(ConfigError, match="IANA name such as 'Europe/Paris'"):
        load_settings(home=home, timezone="CEST+2")


def test_invalid_env_value_raises_even_when_a_kwarg_overrides_another_setting(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMSTRATA_RRF_K", "garbage")
    with pytest.raises(ConfigError, match="rrf_k"):
        load_settings(home=home, max_text_bytes=5)


@pytest.mark.parametrize(
    "text",
    [
        "max_text_bytes = \n",
        "[memstrata\nmax_text_bytes = 1\n",
        "max_text_bytes = 1\nmax_text_bytes = 2\n",
        "this is not toml",
        "memstrata = 5\n",
    ],
    ids=["no-value", "bad-table", "duplicate", "prose", "non-table-section"],
)
def test_malformed_toml_raises_config_error(home: Path, text: str) -> None:
    path = _toml(home, text)
    with pytest.raises(ConfigError) as info:
        load_settings(home=home)
    assert str(path) in str(info.value)


def test_non_utf8_toml_raises_config_error(home: Path) -> None:
    home.mkdir(parents=True)
    (home / CONFIG_FILE_NAME).write_bytes(b"max_text_bytes = \xff\xfe\n")
    with pytest.raises(ConfigError):
        load_settings(home=home)


def test_unknown_keys_rejected(home: Path) -> None:
    with pytest.raises(ConfigError, match="max_text_byte"):
        load_settings(home=home, max_text_byte=5)
    _toml(home, "[memstrata]\nsearch_candidate = 5\n")
    with pytest.raises(ConfigError, match="search_candidate"):
        load_settings(home=home)
    with pytest.raises(ConfigError):
        Memory(home)


def test_data_dir_defaults_to_a_platform_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSTRATA_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # keep the real user dir out of it
    settings = load_settings()
    assert settings.home is None
    assert settings.data_dir.is_absolute()
    assert settings.data_dir.name == "memstrata"
    assert settings.resolved_storage_url.endswith(str(Path("memstrata") / "memstrata.db"))


def test_toml_in_the_platform_dir_is_read_when_home_is_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMSTRATA_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    platform_dir = load_settings().data_dir
    _toml(platform_dir, "rrf_k = 17\n")
    assert load_settings().rrf_k == 17


def test_home_expands_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    _toml(tmp_path / "mem", "rrf_k = 3\n")
    settings = load_settings(home="~/mem")
    assert settings.data_dir == tmp_path / "mem"
    assert settings.rrf_k == 3


def test_relative_home_is_shown_absolute_without_dot_dots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path = tmp_path.resolve()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    settings = load_settings(home="elsewhere/../mem")
    assert settings.data_dir == tmp_path / "mem"
    assert settings.resolved_storage_url == f"sqlite:///{tmp_path / 'mem' / 'memstrata.db'}"
    with Memory(settings=settings) as memory:
        assert memory.info()["storage"] == str(tmp_path / "mem" / "memstrata.db")


def test_dot_dots_after_a_link_go_where_the_os_goes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # "link/.." is the link target's parent, not the directory holding the link.
    tmp_path = tmp_path.resolve()
    (tmp_path / "disk" / "projects" / "agent").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "disk" / "projects" / "agent")
    _toml(tmp_path / "disk" / "projects" / "mem", "rrf_k = 3\n")
    monkeypatch.chdir(tmp_path)
    settings = load_settings(home="link/../mem")
    assert settings.data_dir == tmp_path / "disk" / "projects" / "mem"
    assert settings.rrf_k == 3  # the settings file and the store are read from the same directory


def test_storage_url_override(home: Path, tmp_path: Path) -> None:
    settings = load_settings(home=home, storage_url=f"sqlite:///{tmp_path / 'elsewhere.db'}")
    assert settings.resolved_storage_url == f"sqlite:///{tmp_path / 'elsewhere.db'}"


def test_nothing_is_read_at_import_time(tmp_path: Path) -> None:
    bad_home = tmp_path / "bad-home"
    _toml(bad_home, "this is [[[ not toml")
    env = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
    env.update(MEMSTRATA_MAX_TEXT_BYTES="garbage", MEMSTRATA_HOME=str(bad_home))
    script = (
        "import memstrata, memstrata.memory, memstrata.config, memstrata.cli\n"
        "from memstrata import ConfigError, load_settings\n"
        "try:\n"
        "    load_settings()\n"
        "except ConfigError:\n"
        "    print('raised on use')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "raised on use"


def test_settings_fields_have_descriptions() -> None:
    assert all(field.description for field in DEFAULTS.values())


def test_neighbour_weights_come_from_env_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSTRATA_NEIGHBOUR_WEIGHTS", "[0.5]")
    assert load_settings().neighbour_weights == (0.5,)
    monkeypatch.setenv("MEMSTRATA_NEIGHBOUR_WEIGHTS", "[]")
    assert load_settings().neighbour_weights == ()
    monkeypatch.setenv("MEMSTRATA_NEIGHBOUR_WEIGHTS", "[2]")
    with pytest.raises(ConfigError, match="neighbour"):
        load_settings()


@pytest.mark.parametrize("setting", ["neighbour_weights", "llm_prices"])
def test_a_json_setting_the_environment_cannot_decode_is_a_config_error(
    home: Path, monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    monkeypatch.setenv(f"MEMSTRATA_{setting.upper()}", "notjson")
    with pytest.raises(ConfigError, match=setting):
        load_settings(home=home)


def test_an_empty_home_means_the_platform_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platformdirs, "user_data_dir", lambda *args, **kwargs: str(tmp_path / "platform"))
    monkeypatch.setenv("MEMSTRATA_HOME", "")
    (tmp_path / "platform").mkdir()
    (tmp_path / "platform" / "memstrata.toml").write_text("[memstrata]\nworking_capacity = 7\n")
    settings = load_settings()
    assert settings.data_dir == tmp_path / "platform" and settings.working_capacity == 7
    assert load_settings(home="  ").data_dir == tmp_path / "platform"


def test_a_home_under_an_unknown_users_directory_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="cannot be expanded"):
        load_settings(home="~no-such-user-here/memory")
    monkeypatch.setenv("MEMSTRATA_HOME", "~no-such-user-here/memory")
    with pytest.raises(ConfigError, match="cannot be expanded"):
        load_settings()


def test_a_blank_home_argument_leaves_the_home_to_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMSTRATA_HOME", str(tmp_path / "env-home"))
    (tmp_path / "env-home").mkdir()
    (tmp_path / "env-home" / "memstrata.toml").write_text("[memstrata]\nworking_capacity = 7\n")
    for blank in ("", "  "):
        settings = load_settings(home=blank)
        assert (settings.data_dir, settings.working_capacity) == (tmp_path / "env-home", 7)


def test_prices_refuse_infinite_numbers(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    with pytest.raises(ConfigError, match="llm_prices"):
        load_settings(home=home, llm_prices={"m": {"input": float("inf"), "output": 1.0}})
    monkeypatch.setenv("MEMSTRATA_LLM_PRICES", '{"m": {"input": Infinity, "output": 1}}')
    with pytest.raises(ConfigError, match="llm_prices"):
        load_settings(home=home)


def test_staying_on_a_topic_cannot_take_more_than_returning_to_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"segment_continue_similarity \(0.9\) cannot be above segment_similarity"):
        load_settings(home=tmp_path, segment_similarity=0.8, segment_continue_similarity=0.9)
    settings = load_settings(home=tmp_path, segment_continue_similarity=0.9)  # alone: join is raised to it
    assert settings.segment_continue_similarity == 0.9 and settings.segment_similarity is None


def test_the_server_agent_comes_from_the_environment_and_must_be_an_id(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_settings(home=home).server_agent_id is None
    monkeypatch.setenv("MEMSTRATA_SERVER_AGENT_ID", "ops-bot")
    assert load_settings(home=home).server_agent_id == "ops-bot"
    monkeypatch.setenv("MEMSTRATA_SERVER_AGENT_ID", "  ")
    with pytest.raises(ConfigError, match="server_agent_id"):
        load_settings(home=home)
