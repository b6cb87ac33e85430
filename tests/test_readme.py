"""The README's examples run as written: a quickstart that went stale fails here."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.cli.test_cli import run_cli

README = Path(__file__).resolve().parents[1] / "README.md"
NOT_RUN = {"bench"}  # the LoCoMo benchmark takes minutes; `memstrata bench` has tests of its own


def _block(heading: str, language: str) -> str:
    """The first ``language`` code block under the README's ``## heading``."""
    section = README.read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return section.split(f"```{language}\n", 1)[1].split("```", 1)[0]


def test_the_python_quickstart_runs_and_recalls_the_fact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # it opens "./agent-memory"
    exec(compile(_block("Use it from Python", "python"), str(README), "exec"), {})
    printed = capsys.readouterr().out
    hits, context = printed.split(" # Memory\n", 1)  # "<tokens> <block>"
    assert "I'm allergic to peanuts." in hits and "I'm allergic to peanuts." in context
    assert (tmp_path / "agent-memory").is_dir()


def test_the_shell_examples_run_in_order(tmp_path: Path) -> None:
    ran = []
    for line in _block("Use it from the shell", "bash").splitlines():
        words = shlex.split(line, comments=True)
        if not words or words[1] in NOT_RUN:
            continue
        assert words[0] == "memstrata", line
        result = run_cli(*words[1:], home=tmp_path / "home", cwd=tmp_path)
        assert result.returncode == 0, f"{line}\nstdout: {result.stdout}\nstderr: {result.stderr}"
        if "--json" in words:
            json.loads(result.stdout)
        ran.append(words[1])
    assert {"add", "search", "context", "export", "import", "forget", "chat"} <= set(ran)
    assert (tmp_path / "backup.jsonl").is_file()
