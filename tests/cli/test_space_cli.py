"""Shared spaces from the command line: `memstrata space …`, --space and --spaces, `demo --agents`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.config import DATABASE_FILE_NAME
from memstrata.embeddings.hashing import HashEmbedder
from tests.cli.test_cli import assert_one_line_error, ok, run_cli

DEADLINE = "The release deadline for Apollo is March 3rd"


def team(home: Path) -> dict[str, str]:
    """Space apollo (planner admin, coder write, reviewer read) with the planner's deadline; ana's notes by coder."""
    with Memory(home, embedder=HashEmbedder()) as memory:
        memory.create_space("apollo", description="The Apollo project", agent_id="planner")
        memory.grant("apollo", "coder", "write", by="planner")
        memory.grant("apollo", "reviewer", "read", by="planner")
        [planned] = memory.add(DEADLINE, space="apollo", agent_id="planner")
        [note] = memory.add("I prefer tabs over spaces in Python code", user_id="ana", agent_id="coder")
        return {"planned": planned.id, "note": note.id}


def test_space_create_grant_list_revoke_and_delete(home: Path) -> None:
    made = json.loads(ok(run_cli("space", "create", "apollo", "--agent", "planner", "--json", home=home)))
    assert (made["name"], made["admin"]) == ("apollo", "planner")
    with Memory(home, embedder=HashEmbedder()) as memory:
        memory.add(DEADLINE, space="apollo", agent_id="planner")
    # Creating it again is refused, and what the space holds survives.
    assert "exists already" in assert_one_line_error(run_cli("space", "create", "apollo", home=home), 2)
    with Memory(home, embedder=HashEmbedder()) as memory:
        assert [turn.content for turn in memory.history(space="apollo")] == [DEADLINE]

    said = ok(run_cli("space", "grant", "apollo", "coder", "write", "--by", "planner", home=home))
    assert "agent coder has write access to space apollo" in said
    denied = assert_one_line_error(
        run_cli("space", "grant", "apollo", "reviewer", "read", "--by", "coder", home=home), 8
    )
    assert "admin is needed" in denied
    listed = json.loads(ok(run_cli("space", "list", "--agent", "coder", "--json", home=home)))
    assert [(space["name"], space["access"]) for space in listed] == [("apollo", "write")]
    assert (
        ok(run_cli("space", "list", "--agent", "stranger", home=home)).strip()
        == "no spaces that agent 'stranger' may read"
    )
    held = json.loads(ok(run_cli("space", "grants", "apollo", "--json", home=home)))
    assert {(grant["agent_id"], grant["access"]) for grant in held} == {("planner", "admin"), ("coder", "write")}

    assert "revoked the access of agent coder" in ok(
        run_cli("space", "revoke", "apollo", "coder", "--by", "planner", home=home)
    )
    assert "had no access" in ok(run_cli("space", "revoke", "apollo", "coder", home=home))
    assert_one_line_error(run_cli("space", "delete", "apollo", "--agent", "coder", "--yes", home=home), 8)
    deleted = json.loads(ok(run_cli("space", "delete", "apollo", "--agent", "planner", "--yes", "--json", home=home)))
    assert (deleted["space"], deleted["user_id"], deleted["turns"]) == ("apollo", None, 1)
    assert "no space called 'apollo'" in assert_one_line_error(run_cli("space", "grants", "apollo", home=home), 3)


def test_memory_commands_take_a_space_and_show_its_writers(home: Path) -> None:
    ids = team(home)
    said = ok(run_cli("add", "Staging runs on port 8080", "--space", "apollo", "--agent", "coder", home=home))
    assert said.startswith("stored ") and "in space apollo by coder" in said
    assert "write is needed" in assert_one_line_error(
        run_cli("add", "x", "--space", "apollo", "--agent", "reviewer", home=home), 8
    )
    assert "no space called 'mars'" in assert_one_line_error(run_cli("history", "--space", "mars", home=home), 3)

    # The coder's own notes and every space it may read, ranked together; space hits name space and writer.
    table = ok(run_cli("search", "release deadline", "--user", "ana", "--agent", "coder", "--spaces", "all", home=home))
    assert DEADLINE in table and "[apollo, by planner]" in table
    hits = json.loads(
        ok(run_cli("search", "release deadline", "--space", "apollo", "--agent", "reviewer", "--json", home=home))
    )
    assert (hits[0]["id"], hits[0]["space"], hits[0]["written_by"]) == (ids["planned"], "apollo", "planner")
    assert hits[0]["turn"]["user_id"] is None and hits[0]["turn"]["space"] == "apollo"

    history = run_cli("history", "--space", "apollo", "--json", home=home)
    assert "\\ufdd0" not in ok(history) and "\ufdd0" not in history.stdout  # the internal scope id never shows
    assert {turn["agent_id"] for turn in json.loads(history.stdout)} == {"planner", "coder"}
    shown = ok(run_cli("history", "--space", "apollo", home=home))
    assert "space" in shown and "planner" in shown and "Staging runs on port 8080" in shown

    block = ok(
        run_cli("context", "release deadline", "--user", "ana", "--agent", "coder", "--spaces", "apollo", home=home)
    )
    assert "## Shared memory (space, writer)" in block and f"[apollo, by planner] {DEADLINE}" in block
    assert "memory of space apollo" in ok(run_cli("inspect", "--space", "apollo", "--agent", "reviewer", home=home))

    assert "admin is needed" in assert_one_line_error(
        run_cli("forget", "--space", "apollo", "--agent", "coder", "--yes", home=home), 8
    )
    forgotten = json.loads(
        ok(run_cli("forget", "--space", "apollo", "--agent", "planner", "--yes", "--json", home=home))
    )
    assert (forgotten["space"], forgotten["user_id"], forgotten["turns"]) == ("apollo", None, 2)


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (("add", "tea", "--user", "ana", "--space", "apollo"), "not both"),
        (("search", "tea"), "--user or --space is required"),
        (("history", "--user", "ana", "--space", "apollo"), "not both"),
        (("context", "tea", "--space", "apollo", "--user", "ana"), "not both"),
        (("export", "out.jsonl", "--user", "ana", "--space", "apollo"), "not both"),
        (("space", "share", "x1", "--to", "apollo"), "--user or --space is required"),
        (("search", "tea", "--user", "ana", "--spaces", " , "), "--spaces needs space names"),
        (("space", "trust", "reviewer", "coder"), "OF_AGENT and WEIGHT together"),
    ],
)
def test_exactly_one_of_user_and_space_is_checked_before_any_store_opens(
    tmp_path: Path, arguments: tuple[str, ...], said: str
) -> None:
    fresh = tmp_path / "never-made"
    assert said in assert_one_line_error(run_cli(*arguments, home=fresh), 2)
    assert not fresh.exists()


def test_trust_and_share(home: Path) -> None:
    ids = team(home)
    assert "weighs what agent coder wrote at 0.2" in ok(
        run_cli("space", "trust", "reviewer", "coder", "0.2", home=home)
    )
    assert json.loads(ok(run_cli("space", "trust", "reviewer", "--json", home=home))) == {
        "agent_id": "reviewer",
        "trust": {"coder": 0.2},
    }
    assert "weight" in assert_one_line_error(run_cli("space", "trust", "reviewer", "coder", "1.5", home=home), 2)

    share = ("space", "share", ids["note"], "--to", "apollo", "--user", "ana")
    [copy] = json.loads(ok(run_cli(*share, "--agent", "coder", "--json", home=home)))
    assert (copy["space"], copy["user_id"], copy["content"]) == (
        "apollo",
        None,
        "I prefer tabs over spaces in Python code",
    )
    again = ok(run_cli(*share, "--agent", "coder", home=home))
    assert "shared 1 memory of user 'ana' into space 'apollo'" in again and copy["id"] in again
    assert "write is needed" in assert_one_line_error(run_cli(*share, "--agent", "reviewer", home=home), 8)
    with Memory(home, embedder=HashEmbedder()) as memory:
        assert len(memory.history(space="apollo")) == 2  # the deadline and one copy, shared twice


def test_chat_in_a_space_as_an_agent(home: Path) -> None:
    team(home)

    def chat(*arguments: str, lines: str) -> subprocess.CompletedProcess[str]:
        environment = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
        environment |= {"MEMSTRATA_HOME": str(home), "MEMSTRATA_EMBEDDER": "hash", "COLUMNS": "200"}
        return subprocess.run(
            [sys.executable, "-m", "memstrata", "chat", *arguments],
            input=lines,
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    said = ok(chat("--space", "apollo", "--agent", "coder", "--session", "s1", lines="/search deadline\n/inspect\n"))
    assert "memstrata chat — space apollo as agent coder, session s1" in said
    assert DEADLINE in said and "memory of space apollo" in said
    # An agent without access is stopped before the first prompt, with the access-denied exit code.
    assert "no access to space 'apollo'" in assert_one_line_error(
        chat("--space", "apollo", "--agent", "stranger", lines="hello\n"), 8
    )


def test_demo_agents_plays_the_four_beats_offline(home: Path, tmp_path: Path) -> None:
    demo_home = tmp_path / "demo"
    output = ok(run_cli("demo", "--agents", "--home", str(demo_home), home=home, embedder=None))
    assert "✗" not in output and output.count("✓") == 4
    assert "[apollo, by planner]" in output and "the coder's best hit is the planner's fact" in output
    assert "AccessDenied: agent 'reviewer' has no access to space 'apollo'" in output
    assert "trusted first: the planner's date ranks above the untrusted coder's" in output
    assert "revoked: the reviewer can no longer read apollo" in output
    assert (demo_home / DATABASE_FILE_NAME).is_file()
    # Played again on the kept home, the scenario starts over and holds again.
    assert ok(run_cli("demo", "--agents", "--home", str(demo_home), home=home, embedder=None)).count("✓") == 4
