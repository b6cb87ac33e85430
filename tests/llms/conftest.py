"""Fixtures for provider tests: a recording sleep and providers pointed at the local fake server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from memstrata.llms.anthropic import AnthropicLLM, AnthropicOptions
from memstrata.llms.openai_compat import OpenAICompatLLM, OpenAIOptions
from memstrata.remote.costs import CostLog
from tests.llm_server import LLMServer

SECRET = "sk-test-THIS-MUST-NEVER-LEAK-1234567890"


class Sleeps:
    """Stands in for ``time.sleep``: records each requested delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    """A sleep that only records."""
    return Sleeps()


@pytest.fixture
def cost_log(tmp_path: Path) -> CostLog:
    """A cost log in a temporary directory."""
    return CostLog(tmp_path / "costs.jsonl")


@pytest.fixture
def make_openai(llm_server: LLMServer, sleeps: Sleeps, cost_log: CostLog) -> Iterator[Callable[..., OpenAICompatLLM]]:
    """Build OpenAI-compatible providers against the fake server (options may be overridden)."""
    made: list[OpenAICompatLLM] = []

    def make(**overrides: object) -> OpenAICompatLLM:
        options = {
            "model": "gpt-4o-mini",
            "base_url": llm_server.openai_url,
            "api_key": SecretStr(SECRET),
            "timeout_seconds": 5.0,
            "max_retries": 3,
            **overrides,
        }
        llm = OpenAICompatLLM(OpenAIOptions.model_validate(options), cost_log=cost_log, sleep=sleeps)
        made.append(llm)
        return llm

    yield make
    for llm in made:
        llm.close()


@pytest.fixture
def make_anthropic(llm_server: LLMServer, sleeps: Sleeps, cost_log: CostLog) -> Iterator[Callable[..., AnthropicLLM]]:
    """Build Anthropic providers against the fake server (options may be overridden)."""
    made: list[AnthropicLLM] = []

    def make(**overrides: object) -> AnthropicLLM:
        options = {
            "model": "claude-haiku-4-5",
            "base_url": llm_server.anthropic_url,
            "api_key": SecretStr(SECRET),
            "timeout_seconds": 5.0,
            "max_retries": 3,
            **overrides,
        }
        llm = AnthropicLLM(AnthropicOptions.model_validate(options), cost_log=cost_log, sleep=sleeps)
        made.append(llm)
        return llm

    yield make
    for llm in made:
        llm.close()
