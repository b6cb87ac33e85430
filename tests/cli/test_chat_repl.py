"""`memstrata chat` as a person runs it: the real CLI in a subprocess, lines typed on stdin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memstrata import Memory
from memstrata.embeddings.hashing import HashEmbedder
from tests.llm_server import CHAT, LLMServer


def _chat(*lines: str, home: Path, args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> str:
    """Run ``python -m memstrata chat`` with ``lines`` on stdin; assert it exits 0 and return stdout."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
    environment |= {"MEMSTRATA_HOME": str(home), "MEMSTRATA_EMBEDDER": "hash", "COLUMNS": "200", **(env or {})}
    result = subprocess.run(
        [sys.executable, "-m", "memstrata", "chat", "--user", "ana", "--session", "s1", *args],
        input="".join(line + "\n" for line in lines),
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result.stdout


def test_a_session_without_an_llm(tmp_path: Path) -> None:
    home = tmp_path / "h"
    output = _chat(
        "I keep my passport in the blue drawer.",
        "Where is my passport?",
        "/search passport",
        "/memories",
        "What about my passport?",
        "/forget",
        "n",
        "/quit",
        "this line is never read",
        home=home,
    )
    assert output.count("No LLM is configured") == 1 and "MEMSTRATA_LLM_PROVIDER" in output
    assert "memory> Here is what I remember:" in output and "- user: I keep my passport in the blue drawer." in output
    assert "search: passport" in output and "memories used" in output
    assert "Permanently delete every memory of user ana?" in output and "nothing deleted" in output
    with Memory(home, embedder=HashEmbedder()) as memory:
        stored = [turn.content for turn in memory.history(user_id="ana", session_id="s1")]
    assert stored == ["I keep my passport in the blue drawer.", "Where is my passport?", "What about my passport?"]


def test_end_of_input_ends_the_session_and_forget_deletes_when_confirmed(tmp_path: Path) -> None:
    home = tmp_path / "h"
    _chat("I am allergic to peanuts.", home=home)
    output = _chat("/forget", "y", home=home)
    assert "deleted 1 turns of user ana" in output
    with Memory(home, embedder=HashEmbedder()) as memory:
        assert memory.history(user_id="ana") == []


def test_a_session_with_an_llm_sends_its_earlier_messages_once(tmp_path: Path, llm_server: LLMServer) -> None:
    home = tmp_path / "h"
    _chat("I keep my passport in the blue drawer.", home=home)
    llm_server.queue(CHAT, "It is in the blue drawer.")
    env = {
        "MEMSTRATA_LLM_PROVIDER": "openai",
        "MEMSTRATA_LLM_BASE_URL": llm_server.openai_url,
        "MEMSTRATA_LLM_MODEL": "chat-model",
        "MEMSTRATA_BACKGROUND": "false",  # no tier work calling the fake server on the side
    }
    output = _chat("Where is my passport?", "/quit", home=home, args=("--budget", "300"), env=env)
    assert "Replies by openai:chat-model" in output and "No LLM" not in output
    assert "agent> It is in the blue drawer." in output
    [request] = llm_server.requests_to(CHAT)
    system, *history, question = request.body["messages"]
    # The session's earlier message goes in once, as a message; the memory block leaves it out.
    assert [m["content"] for m in history] == ["I keep my passport in the blue drawer."]
    assert "I keep my passport in the blue drawer." not in system["content"]
    assert question == {"role": "user", "content": "Where is my passport?"}


def test_bad_options_exit_with_the_invalid_input_code(tmp_path: Path) -> None:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
    environment |= {"MEMSTRATA_HOME": str(tmp_path / "h"), "MEMSTRATA_EMBEDDER": "hash"}
    for command in (["chat"], ["bench", "lcs"]):
        result = subprocess.run(
            [sys.executable, "-m", "memstrata", *command, "--budget", "3"],
            input="",
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 2 and "--budget must be between 50 and" in result.stderr, result.stderr
    assert not (tmp_path / "h").exists()  # checked before anything was opened
