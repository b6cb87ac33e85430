"""Choosing a provider by name from settings, the env names, and Memory's wiring."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memstrata import ConfigError, Memory, load_settings
from memstrata.config import CONFIG_FILE_NAME
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.llms import LLMS, load_llm
from memstrata.llms.anthropic import AnthropicLLM
from memstrata.llms.base import LLM
from memstrata.llms.none import NoLLM
from memstrata.llms.openai_compat import OpenAICompatLLM
from memstrata.remote.costs import COST_LOG_FILE_NAME, CostLog, read_costs
from tests.llm_server import CHAT, MESSAGES, LLMServer
from tests.llms.conftest import SECRET


def test_the_registry_names_are_a_contract() -> None:
    assert set(LLMS) == {"none", "openai", "anthropic", "local"}


def test_defaults(home: Path) -> None:
    settings = load_settings(home=home)
    assert settings.llm_provider == "none"
    assert (settings.llm_base_url, settings.llm_api_key, settings.llm_model) == (None, None, None)
    assert (settings.llm_timeout_seconds, settings.llm_max_retries) == (60, 3)
    assert "gpt-4o-mini" in settings.llm_prices
    llm = load_llm(settings)
    assert isinstance(llm, NoLLM)
    assert not llm.is_available


def test_unknown_provider_lists_the_choices(home: Path) -> None:
    with pytest.raises(ConfigError, match="anthropic, local, none, openai") as info:
        load_llm(load_settings(home=home, llm_provider="gemini"))
    assert "MEMSTRATA_LLM_PROVIDER" in str(info.value)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_model_name_is_required(home: Path, provider: str) -> None:
    settings = load_settings(home=home, llm_provider=provider, llm_api_key=SECRET)
    with pytest.raises(ConfigError, match="MEMSTRATA_LLM_MODEL"):
        load_llm(settings)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_official_apis_need_a_key(home: Path, provider: str) -> None:
    with pytest.raises(ConfigError, match="MEMSTRATA_LLM_API_KEY"):
        load_llm(load_settings(home=home, llm_provider=provider, llm_model="m"))


def test_a_bad_base_url_is_a_config_error(home: Path) -> None:
    settings = load_settings(home=home, llm_provider="openai", llm_model="m", llm_base_url="localhost:11434")
    with pytest.raises(ConfigError, match="llm_base_url"):
        load_llm(settings)


@pytest.mark.parametrize(
    ("setting", "value"), [("llm_timeout_seconds", 0), ("llm_max_retries", -1), ("llm_max_retries", 99)]
)
def test_invalid_llm_settings_name_the_setting(home: Path, setting: str, value: object) -> None:
    with pytest.raises(ConfigError, match=setting):
        load_settings(home=home, **{setting: value})


def test_env_names(home: Path, monkeypatch: pytest.MonkeyPatch, llm_server: LLMServer) -> None:
    monkeypatch.setenv("MEMSTRATA_LLM_PROVIDER", " OpenAI ")
    monkeypatch.setenv("MEMSTRATA_LLM_BASE_URL", llm_server.openai_url)
    monkeypatch.setenv("MEMSTRATA_LLM_API_KEY", SECRET)
    monkeypatch.setenv("MEMSTRATA_LLM_MODEL", "llama3.1:8b")
    monkeypatch.setenv("MEMSTRATA_LLM_TIMEOUT_SECONDS", "7.5")
    monkeypatch.setenv("MEMSTRATA_LLM_MAX_RETRIES", "1")
    settings = load_settings(home=home)
    assert settings.llm_provider == "openai"
    assert settings.llm_base_url == llm_server.openai_url
    assert settings.llm_api_key is not None and settings.llm_api_key.get_secret_value() == SECRET
    assert (settings.llm_model, settings.llm_timeout_seconds, settings.llm_max_retries) == ("llama3.1:8b", 7.5, 1)
    llm = load_llm(settings)
    assert isinstance(llm, OpenAICompatLLM)
    assert llm.name == "openai:llama3.1:8b"
    assert llm.complete("hello", system="be brief") == "echo: hello"
    assert llm_server.requests_to(CHAT)[0].headers["authorization"] == f"Bearer {SECRET}"
    (entry,) = read_costs(home / COST_LOG_FILE_NAME)  # the default log lives in the data dir
    assert (entry.model, entry.purpose) == ("llama3.1:8b", "complete")


def test_toml_keys(home: Path, llm_server: LLMServer, tmp_path: Path) -> None:
    home.mkdir(parents=True)
    (home / CONFIG_FILE_NAME).write_text(
        "[memstrata]\n"
        'llm_provider = "anthropic"\n'
        f'llm_base_url = "{llm_server.anthropic_url}"\n'
        f'llm_api_key = "{SECRET}"\n'
        'llm-model = "claude-haiku-4-5"\n',
        encoding="utf-8",
    )
    log = CostLog(tmp_path / "elsewhere.jsonl")
    llm = load_llm(load_settings(home=home), cost_log=log)
    assert isinstance(llm, AnthropicLLM)
    assert llm.complete("hi") == "echo: hi"
    assert llm_server.requests_to(MESSAGES)[0].headers["x-api-key"] == SECRET
    assert len(list(read_costs(log.path))) == 1
    assert not (home / COST_LOG_FILE_NAME).exists()


def test_memory_builds_the_configured_llm_from_keywords(home: Path, llm_server: LLMServer) -> None:
    with Memory(
        home,
        embedder=HashEmbedder(),
        background=False,
        llm_provider="openai",
        llm_base_url=llm_server.openai_url,
        llm_model="qwen2.5:7b",
    ) as memory:
        assert isinstance(memory.llm, LLM)
        assert memory.llm.name == "openai:qwen2.5:7b"
        assert memory.llm.complete("ping") == "echo: ping"
    assert len(list(read_costs(home / COST_LOG_FILE_NAME))) == 1


def test_memory_defaults_to_no_llm_and_accepts_one(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        assert memory.llm.name == "none"
        assert not memory.llm.is_available
    given = NoLLM()
    with Memory(home, embedder=HashEmbedder(), background=False, llm=given) as memory:
        assert memory.llm is given


def test_memory_reports_a_misconfigured_llm(home: Path) -> None:
    with pytest.raises(ConfigError, match="MEMSTRATA_LLM_MODEL"):
        Memory(home, embedder=HashEmbedder(), background=False, llm_provider="openai", llm_api_key=SECRET)


def test_providers_are_imported_only_when_chosen() -> None:
    script = (
        "import sys, memstrata\n"
        "from memstrata.llms import load_llm\n"
        "load_llm(memstrata.load_settings())\n"
        "providers = ('memstrata.llms.openai_compat', 'memstrata.llms.anthropic', 'memstrata.llms.local',"
        " 'xllamacpp')\n"
        "print(sorted(name for name in sys.modules if name in providers))\n"
    )
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=environment, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
