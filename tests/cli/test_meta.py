"""Meta checks on the CLI: every command has an example, is documented, and every error maps to an exit code."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from memstrata import errors
from memstrata.cli import app
from memstrata.cli.common import EXIT_CODES

REPO_ROOT = Path(__file__).resolve().parents[2]
CLI_DOCS = REPO_ROOT / "docs" / "cli.md"


def _walk(group: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """(full name, command) for every leaf command, descending into sub-apps such as ``bench``."""
    for name, command in group.commands.items():
        path = (*prefix, name)
        if getattr(command, "commands", None) is not None:
            yield from _walk(command, path)
        else:
            yield " ".join(path), command


COMMANDS = dict(_walk(typer.main.get_command(app)))
ERROR_CLASSES = [
    value
    for _, value in inspect.getmembers(errors, inspect.isclass)
    if issubclass(value, errors.MemstrataError) and value.__module__ == errors.__name__
]


def test_the_expected_commands_are_registered() -> None:
    expected = {"add", "search", "context", "history", "forget", "export", "import", "info", "reindex", "demo"}
    assert expected | {"bench ingest-search"} <= set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_help_has_an_example(name: str) -> None:
    help_text = COMMANDS[name].help or ""
    assert "Example:" in help_text, f"`memstrata {name}` has no 'Example:' in its docstring"
    example = help_text.split("Example:", 1)[1].strip()
    assert example.startswith(f"memstrata {name}"), f"the example of `memstrata {name}` runs something else: {example}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_is_documented(name: str) -> None:
    assert CLI_DOCS.is_file(), f"{CLI_DOCS.relative_to(REPO_ROOT)} is missing"
    assert f"memstrata {name}" in CLI_DOCS.read_text(encoding="utf-8")


def test_error_classes_are_found() -> None:
    assert {errors.InvalidInput, errors.NotFound, errors.StorageError, errors.MemstrataError} <= set(ERROR_CLASSES)


@pytest.mark.parametrize("kind", ERROR_CLASSES, ids=lambda kind: kind.__name__)
def test_every_error_has_an_exit_code(kind: type[errors.MemstrataError]) -> None:
    if kind is errors.MemstrataError:
        return
    assert any(issubclass(kind, mapped) for mapped, _ in EXIT_CODES), f"{kind.__name__} has no exit code"


def test_exit_codes_are_distinct_and_most_specific_first() -> None:
    codes = [code for _, code in EXIT_CODES]
    assert len(set(codes)) == len(codes)
    assert all(code not in (0, 1) for code in codes)  # 1 is the fallback, 0 is success
    for index, (earlier, _) in enumerate(EXIT_CODES):
        for later, _ in EXIT_CODES[index + 1 :]:
            assert not issubclass(later, earlier), f"{later.__name__} is shadowed by {earlier.__name__}"


def test_access_denied_has_its_own_exit_code_documented_in_the_cli_page() -> None:
    assert dict(EXIT_CODES)[errors.AccessDenied] == 8
    page = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    assert "| 8 | access denied" in page
