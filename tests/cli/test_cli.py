"""End-to-end CLI tests: `python -m memstrata` in a subprocess, so exit codes and stderr are real."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory
from memstrata.config import DATABASE_FILE_NAME
from memstrata.embeddings.hashing import HashEmbedder

START = datetime(2025, 5, 1, 9, 0, tzinfo=UTC)


def run_cli(
    *args: str, home: Path, embedder: str | None = "hash", env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m memstrata args…`` with its own data dir and no stdin (in ``cwd``, if given)."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("MEMSTRATA_")}
    environment["MEMSTRATA_HOME"] = str(home)
    environment["COLUMNS"] = "200"  # keep rich tables from wrapping what the tests look for
    if embedder is not None:
        environment["MEMSTRATA_EMBEDDER"] = embedder
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "memstrata", *args],
        cwd=cwd,
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """Assert a zero exit and return stdout."""
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result.stdout


def seed(home: Path, texts: list[str], *, user: str = "ana", session: str | None = "s1") -> list[str]:
    """Store ``texts`` one minute apart through the library; return their ids."""
    with Memory(home, embedder=HashEmbedder()) as memory:
        return [
            memory.add(text, user_id=user, session_id=session, timestamp=START + timedelta(minutes=i))[0].id
            for i, text in enumerate(texts)
        ]


def count_turns(home: Path, user: str | None = None) -> int:
    """Turns in the data dir's database, read with sqlite3 directly."""
    connection = sqlite3.connect(home / DATABASE_FILE_NAME)
    try:
        if user is None:
            return int(connection.execute("SELECT COUNT(*) FROM turns").fetchone()[0])
        return int(connection.execute("SELECT COUNT(*) FROM turns WHERE user_id = ?", (user,)).fetchone()[0])
    finally:
        connection.close()


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int) -> str:
    """Exit ``code``, one ``error:`` line on stderr, no traceback; return that line."""
    assert result.returncode == code, f"exit {result.returncode}\nstderr: {result.stderr}"
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


def test_add_runs_the_tier_work_of_what_it_stored(home: Path) -> None:
    ok(run_cli("add", "We're thinking about going camping next month.", "--user", "mel", home=home))
    connection = sqlite3.connect(home / DATABASE_FILE_NAME)
    try:
        pending = connection.execute("SELECT COUNT(*) FROM jobs WHERE user_id = 'mel'").fetchone()[0]
        cells = connection.execute("SELECT COUNT(*) FROM cells WHERE user_id = 'mel'").fetchone()[0]
    finally:
        connection.close()
    assert (pending, cells) == (0, 1)  # the plan is a fact already, not a job left for later


def test_add_json_and_plain(home: Path) -> None:
    stored = json.loads(
        ok(run_cli("add", "I moved to Lisbon in May", "--user", "ana", "--session", "s1", "--json", home=home))
    )
    assert len(stored) == 1
    turn: dict[str, Any] = stored[0]
    assert turn["id"]
    assert (turn["content"], turn["user_id"], turn["session_id"], turn["role"]) == (
        "I moved to Lisbon in May",
        "ana",
        "s1",
        "user",
    )

    output = ok(
        run_cli("add", "Noted, Lisbon it is.", "--user", "ana", "--role", "assistant", "--id", "m-2", home=home)
    )
    assert "stored m-2 for ana" in output

    with Memory(home, embedder=HashEmbedder()) as memory:
        assert memory.get(turn["id"], user_id="ana").content == "I moved to Lisbon in May"
        assert memory.get("m-2", user_id="ana").role.value == "assistant"


def test_search_json_and_table(home: Path) -> None:
    ids = seed(home, ["I live in Lisbon near the river", "My cat is called Miso", "I work at a robotics startup"])

    hits = json.loads(ok(run_cli("search", "Lisbon river", "--user", "ana", "--json", home=home)))
    assert hits[0]["id"] == ids[0]
    assert hits[0]["content"] == "I live in Lisbon near the river"
    assert set(hits[0]["ranks"]) == {"fulltext", "vector"}
    assert hits[0]["score"] > 0
    assert "seq" not in hits[0]  # the store's row number is not part of the contract

    table = ok(run_cli("search", "cat Miso", "--user", "ana", "--limit", "1", home=home))
    assert "My cat is called Miso" in table
    assert "Lisbon" not in table

    varied = json.loads(ok(run_cli("search", "Lisbon", "--user", "ana", "--diversity", "0.5", "--json", home=home)))
    assert varied[0]["id"] == ids[0] and len(varied) == 3
    assert "diversity" in assert_one_line_error(
        run_cli("search", "x", "--user", "ana", "--diversity", "2", home=home), 2
    )


def test_search_covers_derived_tiers_with_dated_facts(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder()) as memory:
        memory.add("We're thinking about going camping next month.", user_id="mel", timestamp="2023-05-31T13:00:00Z")
        memory.flush()

    def facts(*options: str) -> list[str]:
        hits = json.loads(ok(run_cli("search", "camping", "--user", "mel", "--json", *options, home=home)))
        return [hit["content"] for hit in hits if hit["tier"] == "longterm"]

    assert facts() == []  # the messages only, by default
    dated = facts("--tiers", "longterm")
    assert dated and all(text.endswith("[next month = June 2023]") for text in dated)
    late = facts("--tiers", " longterm,", "--timezone", "Pacific/Kiritimati")  # already 1 June there
    assert late and all(text.endswith("[next month = July 2023]") for text in late)
    assert "tiers" in assert_one_line_error(run_cli("search", "x", "--user", "mel", "--tiers", "nope", home=home), 2)
    assert "timezone" in assert_one_line_error(
        run_cli("search", "x", "--user", "mel", "--timezone", "Mars/Olympus", home=home), 2
    )


def test_context_prints_the_block_and_its_size(home: Path) -> None:
    ids = seed(home, ["I live in Lisbon near the river", "My cat is called [bold]Miso[/bold]", "I work at a startup"])

    result = run_cli("context", "Where do I live?", "--user", "ana", "--budget", "300", home=home)
    block = ok(result)
    assert block.startswith("# Memory\n")
    assert "I live in Lisbon near the river" in block
    # The block is printed as it is, not read as rich markup (quoted whole: 300 tokens hold it).
    assert "My cat is called [bold]Miso[/bold]" in block
    assert " of 300 tokens, " in result.stderr and " items" in result.stderr

    asked = ("context", "Where do I live?", "--user", "ana", "--budget", "300")
    built = json.loads(ok(run_cli(*asked, "--json", home=home)))
    assert built["token_budget"] == 300 and 0 < built["tokens"] <= 300
    assert built["text"] + "\n" == block
    assert {turn for item in built["items"] for turn in item["source_turn_ids"]} == set(built["turn_ids"]) == set(ids)
    # The work the adds queued (still pending when their Memory closed) ran first: the fact from
    # the last one is in the block.
    assert "employer: startup" in block
    assert any(item["kind"] == "profile" for item in built["items"])
    # Its fact quotes a turn the block shows as an excerpt, so it is not said twice.
    assert block.count("work at") == 1

    nobody = run_cli("context", "Where do I live?", "--user", "bob", home=home)
    assert ok(nobody) == "" and "nothing in memory" in nobody.stderr
    assert "--budget must be between 50 and" in assert_one_line_error(
        run_cli("context", "x", "--user", "ana", "--budget", "10", home=home), 2
    )
    assert "empty" in assert_one_line_error(run_cli("context", "  ", "--user", "ana", home=home), 2)
    assert "timezone" in assert_one_line_error(
        run_cli("context", "x", "--user", "ana", "--timezone", "Mars/Olympus", home=home), 2
    )


def test_context_abridges_later_excerpts_unless_verbatim(home: Path) -> None:
    said = [f"I really think that the hike number {n} was a lot of fun for me" for n in range(1, 7)]
    seed(home, said)
    asked = ("context", "the hike number", "--user", "ana", "--budget", "100", "--json")  # too few tokens to quote all
    abridged = json.loads(ok(run_cli(*asked, home=home)))
    excerpts = [item["is_abridged"] for item in abridged["items"] if item["kind"] == "episode"]
    assert len(excerpts) == 6 and 0 < sum(excerpts) < 6
    verbatim = json.loads(ok(run_cli(*asked, "--verbatim", home=home)))
    quoted = [item["text"].removeprefix("user: ") for item in verbatim["items"] if item["kind"] == "episode"]
    assert 0 < len(quoted) < 6 and all(text in said for text in quoted)
    assert json.loads(ok(run_cli(*asked, "--abridged", home=home)))["text"] == abridged["text"]


def test_history_json(home: Path) -> None:
    ids = seed(home, ["first thing", "second thing", "third thing"])
    seed(home, ["other session"], session="s2")
    seed(home, ["someone else"], user="bob")

    turns = json.loads(ok(run_cli("history", "--user", "ana", "--session", "s1", "--json", home=home)))
    assert [turn["id"] for turn in turns] == ids
    assert [turn["content"] for turn in turns] == ["first thing", "second thing", "third thing"]
    assert datetime.fromisoformat(turns[0]["created_at"]) == START


def test_forget_with_yes(home: Path) -> None:
    seed(home, ["ana one", "ana two"])
    seed(home, ["bob one"], user="bob")

    deletion = json.loads(ok(run_cli("forget", "--user", "ana", "--yes", "--json", home=home)))
    assert (deletion["user_id"], deletion["turns"]) == ("ana", 2)
    assert count_turns(home, "ana") == 0
    assert count_turns(home, "bob") == 1


def test_forget_without_yes_and_no_stdin_deletes_nothing(home: Path) -> None:
    seed(home, ["ana one", "ana two"])

    result = run_cli("forget", "--user", "ana", home=home)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert count_turns(home, "ana") == 2


def test_export_import_round_trip(home: Path, tmp_path: Path) -> None:
    seed(home, ["ana fact one", "ana fact two"])
    seed(home, ["bob fact"], user="bob", session=None)
    backup = tmp_path / "backup.jsonl"

    exported = json.loads(ok(run_cli("export", str(backup), "--json", home=home)))
    assert exported["turns"] == 3
    assert backup.is_file()

    second = tmp_path / "second-home"
    imported = json.loads(ok(run_cli("import", str(backup), "--home", str(second), "--json", home=tmp_path / "unused")))
    assert (imported["turns"], imported["skipped"]) == (3, 0)
    assert not (tmp_path / "unused").exists()  # --home wins over MEMSTRATA_HOME

    with Memory(home, embedder=HashEmbedder()) as source, Memory(second, embedder=HashEmbedder()) as target:
        for user in ("ana", "bob"):
            assert target.history(user_id=user) == source.history(user_id=user)
        assert [hit.content for hit in target.search("fact two", user_id="ana", limit=1)] == ["ana fact two"]


def test_export_from_a_home_with_no_store_fails_and_leaves_the_backup_alone(home: Path, tmp_path: Path) -> None:
    seed(home, ["ana fact one"])
    backup = tmp_path / "backup.jsonl"
    ok(run_cli("export", str(backup), home=home))
    good = backup.read_text(encoding="utf-8")
    typo = tmp_path / "hmoe"
    result = run_cli("export", str(backup), "--home", str(typo), home=home)
    assert result.returncode == 3 and "no memstrata store at" in result.stderr and "Traceback" not in result.stderr
    assert backup.read_text(encoding="utf-8") == good and not typo.exists()
    # A failed import creates no home either.
    result = run_cli("import", str(tmp_path / "missing.jsonl"), "--home", str(typo), home=home)
    assert result.returncode == 2 and "no such file" in result.stderr and not typo.exists()
    # Nor does one whose file is cut short: the whole file is checked before the store is opened.
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(good.splitlines(keepends=True)[:-1]), encoding="utf-8")
    result = run_cli("import", str(cut), "--home", str(typo), home=home)
    assert result.returncode == 2 and "Traceback" not in result.stderr and not typo.exists(), result.stderr
    # Nor does one with a key memstrata does not know, which add() would refuse too.
    lines = good.splitlines(keepends=True)
    record = json.loads(lines[1])
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text("".join([lines[0], json.dumps({**record, "colour": "red"}) + "\n", *lines[2:]]))
    result = run_cli("import", str(unknown), "--home", str(typo), home=home)
    assert result.returncode == 2 and not typo.exists()
    assert "line 2: a turn line has unknown keys ['colour']" in result.stderr


@pytest.mark.parametrize(
    "arguments",
    [
        ("search", "", "--user", "ana"),
        ("search", "tea", "--user", " "),
        ("search", "tea", "--user", "ana", "--timezone", "Mars/Olympus"),
        ("context", "  ", "--user", "ana"),
        ("context", "tea", "--user", "ana", "--budget", "3"),
        ("add", "", "--user", "ana"),
        ("add", "tea", "--user", "ana", "--session", ""),
        ("add", "tea", "--user", "ana", "--role", "wizard"),
        ("add", "tea", "--user", "ana", "--timestamp", "yesterday"),
        ("add", "tea", "--user", "ana", "--id", " "),
        ("add", "tea", "--user", "ana", "--name", " "),
        ("search", "tea", "--user", "ana", "--limit", "0"),
        ("search", "tea", "--user", "ana", "--diversity", "2"),
        ("search", "tea", "--user", "ana", "--tiers", "attic"),
        ("history", "--user", ""),
        ("history", "--user", "ana", "--limit", "0"),
        ("history", "--user", "ana", "--offset", "-1"),
        ("forget", "--user", "", "--yes"),
        ("segment", " ", "--user", "ana"),
        ("segment", "01JB2Q8V6Z3N4M5K6J7H8G9F0E", "--user", ""),
    ],
)
def test_a_command_refused_for_its_input_opens_no_store(tmp_path: Path, arguments: tuple[str, ...]) -> None:
    # Opening would create the home and its database (and embed every turn again after a change of embedder).
    fresh = tmp_path / "never-made"
    result = run_cli(*arguments, home=fresh)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and not fresh.exists()


def test_info_json(home: Path) -> None:
    seed(home, ["one", "two"])
    seed(home, ["three"], user="bob")

    details = json.loads(ok(run_cli("info", "--json", home=home)))
    assert Path(details["data_dir"]) == home
    assert details["embedder"] == "hash-bow-384"
    assert details["dimension"] == 384
    assert details["counts"]["turns"] == 3
    assert details["counts"]["users"] == 2
    assert details["counts"]["vectors[hash-bow-384]"] == 3
    assert details["size_bytes"] > 0


def test_reindex_rebuilds_fulltext_and_missing_vectors(home: Path) -> None:
    # Stored with a 64-dimensional embedder, so the CLI's 384-dimensional one has vectors to make.
    with Memory(home, embedder=HashEmbedder(64)) as memory:
        memory.add("the quokka smiled at the camera", user_id="ana", id="q")
        memory.add("I live in Porto", user_id="bob")  # a fact, embedded by its tier job with the 64-dimensional one
        memory.flush()
    connection = sqlite3.connect(home / DATABASE_FILE_NAME, isolation_level=None)
    try:
        connection.execute("DELETE FROM turns_fts")
    finally:
        connection.close()
    with Memory(home, embedder=HashEmbedder(64)) as memory:
        assert memory.search("quokka", user_id="ana", mode="fulltext") == []

    output = ok(run_cli("reindex", "--fulltext", home=home))
    # Opening embedded the turns already; the fact is left to embed.
    assert "embedded 1 missing vector (turns and facts) and rebuilt the full-text index" in output

    with Memory(home, embedder=HashEmbedder()) as memory:
        assert [hit.id for hit in memory.search("quokka", user_id="ana", mode="fulltext")] == ["q"]
        assert memory.info()["counts"]["vectors[hash-bow-384]"] == 2
        assert len(memory.parts.store.cell_vectors("bob", "hash-bow-384")) == 1  # the fact, embedded by this model too


def test_vacuum_rewrites_the_store_and_reports_its_size(home: Path) -> None:
    seed(home, [f"ana's long note {n} " + "words " * 200 for n in range(30)])
    seed(home, ["bob one"], user="bob")
    ok(run_cli("forget", "--user", "ana", "--yes", home=home))

    report = json.loads(ok(run_cli("vacuum", "--json", home=home)))
    assert report["bytes_after"] < report["bytes_before"]
    assert report["complete"] is True
    assert count_turns(home, "bob") == 1
    assert "rewrote the store:" in ok(run_cli("vacuum", home=home))


def test_vacuum_of_a_home_without_a_store_creates_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "nothing-here"
    result = run_cli("vacuum", home=empty)
    assert result.returncode == 3 and "no memstrata store at" in result.stderr and "Traceback" not in result.stderr
    assert not empty.exists()


def test_demo_recalls_all_facts_with_the_default_embedder(home: Path, tmp_path: Path) -> None:
    demo_home = tmp_path / "demo"
    output = ok(run_cli("demo", "--home", str(demo_home), home=home, embedder=None))
    assert "5/5" in output
    assert (demo_home / DATABASE_FILE_NAME).is_file()


def test_bench_ingest_search_writes_json(home: Path, tmp_path: Path) -> None:
    target = tmp_path / "results" / "bench.json"
    arguments = ["--source", "synthetic", "--turns", "300", "--queries", "10", "--singles", "5", "--json", str(target)]
    ok(run_cli("bench", "ingest-search", *arguments, home=home))

    result = json.loads(target.read_text())
    assert {"benchmark", "machine", "summary"} <= set(result)
    assert result["benchmark"] == "ingest-search"
    assert result["embedder"] == "hash-bow-384"
    assert result["summary"]["turns"] == 300
    assert len(result["search_ms"]) == 10
    assert len(result["add_ms"]) == 5
    for key, value in result["summary"].items():
        assert isinstance(value, int | float) and not isinstance(value, bool), key
        assert value > 0, (key, value)


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["locomo", "--limit", "0"], "--limit"),
        (["locomo", "--conversations", "3-1"], "range from 1"),
        (["locomo", "--conversations", "11"], "no conversation 11"),
        (["locomo", "--tiers", "bogus"], "unknown tiers"),
        (["ingest-search", "--source", "foo"], "--source"),
        (["approximate", "--shares", "a,b"], "--shares"),
        (["approximate", "--shares", "0"], "--shares"),
    ],
)
def test_bad_bench_options_exit_2_before_any_work(home: Path, arguments: list[str], said: str) -> None:
    line = assert_one_line_error(run_cli("bench", *arguments, home=home), 2)
    assert said in line


def test_invalid_input_exits_2_with_one_line(home: Path) -> None:
    line = assert_one_line_error(run_cli("add", "   ", "--user", "u", home=home), 2)
    assert "empty" in line


def test_missing_user_is_a_usage_error(home: Path) -> None:
    result = run_cli("search", "anything", home=home)
    assert result.returncode == 2
    assert "--user" in result.stderr
    assert "Traceback" not in result.stderr


def test_config_error_exits_4(home: Path) -> None:
    line = assert_one_line_error(run_cli("info", home=home, embedder="nope"), 4)
    assert "nope" in line


def test_storage_error_exits_5(home: Path, tmp_path: Path) -> None:
    not_a_database = tmp_path / "notes.txt"
    not_a_database.write_text("just some text, not SQLite\n" * 100)
    line = assert_one_line_error(run_cli("info", "--home", str(not_a_database), home=home), 5)
    assert str(not_a_database) in line


def test_stored_text_that_looks_like_markup_prints_as_typed(home: Path) -> None:
    user = "[x]\\"  # a trailing backslash once came out doubled
    said = "I [bold]love[/bold] Lisbon [/] and [red]hiking[/red] :thumbs_up:"
    assert f"stored [/] for {user}\n" in ok(run_cli("add", said, "--user", user, "--id", "[/]", home=home))
    assert said in ok(run_cli("history", "--user", user, home=home))
    assert said in ok(run_cli("search", "Lisbon", "--user", user, home=home))
    for n in range(4):
        ok(
            run_cli(
                "add", f"The garden shed roof [/] leaks again near window {n} :thumbs_up:", "--user", user, home=home
            )
        )
    made = ok(run_cli("consolidate", "--user", user, home=home))
    assert "roof [/] leaks again" in made and ":thumbs_up:" in made
    assert "roof [/] leaks again" in ok(run_cli("inspect", "--user", user, home=home))


def test_inspect_json_and_table(home: Path) -> None:
    seed(home, ["I live in Porto.", "I moved to Lisbon last month.", "My sister Marta lives in Berlin."])
    report = json.loads(ok(run_cli("inspect", "--user", "ana", "--json", home=home)))
    assert report["user_id"] == "ana"
    assert report["counts"]["episodic"] == 3
    assert report["pending_jobs"] == 0, "inspect waits for queued tier work"
    assert report["profile"].get("location") == "Lisbon"
    values = {(cell["attribute"], cell["value"], cell["valid_to"] is None) for cell in report["cells"]}
    assert ("location", "Lisbon", True) in values and ("location", "Porto", False) in values
    table = ok(run_cli("inspect", "--user", "ana", home=home))
    assert "long-term cells" in table and "Lisbon" in table


def test_segment_lists_the_turns_of_a_segment_inspect_shows(home: Path) -> None:
    exchanges = [("I live in Lisbon near the river", "Lisbon is lovely."), ("My cat is called Miso", "A fine name.")]
    exchanges.append(("I work at a robotics startup", "Robots, nice."))  # stays in working memory
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1) as memory:
        for minute, (said, reply) in enumerate(exchanges):
            messages = [{"role": "user", "content": said}, {"role": "assistant", "content": reply, "name": "Bot"}]
            memory.add(messages, user_id="ana", session_id="s1", timestamp=START + timedelta(minutes=minute))
        memory.flush()
    segments = json.loads(ok(run_cli("inspect", "--user", "ana", "--json", home=home)))["segments"]
    table = ok(run_cli("inspect", "--user", "ana", home=home))
    assert all(segment["id"] in table for segment in segments), table

    listed = {
        segment["id"]: json.loads(ok(run_cli("segment", segment["id"], "--user", "ana", "--json", home=home)))
        for segment in segments
    }
    # However the policy groups them, the segments hold the two older exchanges, each segment in the order said.
    filed = sorted((turn for turns in listed.values() for turn in turns), key=lambda turn: turn["created_at"])
    assert [(turn["role"], turn["content"]) for turn in filed] == [
        ("user", "I live in Lisbon near the river"),
        ("assistant", "Lisbon is lovely."),
        ("user", "My cat is called Miso"),
        ("assistant", "A fine name."),
    ]
    assert all(turns == sorted(turns, key=lambda turn: turn["created_at"]) for turns in listed.values())
    assert all(turn["user_id"] == "ana" and turn["session_id"] == "s1" for turn in filed)

    segment_id, turns = next(iter(listed.items()))
    printed = ok(run_cli("segment", segment_id, "--user", "ana", home=home))
    assert f"segment {segment_id} of ana ({len(turns)} turns)" in printed
    assert all(turn["content"] in printed and turn["id"] in printed for turn in turns)
    assert "2025-05-01 09:0" in printed and "Bot" in printed and "robotics" not in printed

    line = assert_one_line_error(run_cli("segment", segment_id, "--user", "bob", home=home), 3)
    assert f"user 'bob' has no mid-term segment '{segment_id}'" in line


def test_read_commands_leave_queued_tier_work_alone(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        memory.add("I live in Porto.", user_id="bob")  # bob's job stays queued: nothing runs it
    commands = [
        ["search", "Porto", "--user", "ana"],
        ["history", "--user", "ana"],
        ["info"],
        ["export", str(home / "backup.jsonl")],
        ["forget", "--user", "ana", "--yes"],
        ["reindex", "--fulltext"],
        ["context", "Porto", "--user", "ana"],  # these two run Ana's queued work only
        ["inspect", "--user", "ana"],
    ]
    for command in commands:
        ok(run_cli(*command, home=home))
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        assert memory.inspect(user_id="bob").pending_jobs >= 1, "a command about Ana ran Bob's queued job"
        assert memory.profile(user_id="bob") == {}


def test_failed_jobs_show_in_inspect_and_retry_jobs_runs_them(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        memory.add("I live in Porto.", user_id="ana")
        store = memory.parts.store  # the job failed every attempt: parked, its facts missing
        job = store.claim_job(60)  # type: ignore[attr-defined]
        store.fail_job(job.id, "RuntimeError: boom", retry=False, attempt=job.attempts)  # type: ignore[attr-defined]
    report = json.loads(ok(run_cli("inspect", "--user", "ana", "--json", home=home)))
    assert (report["failed_jobs"], report["profile"]) == (1, {})
    assert "memstrata retry-jobs --user ana" in ok(run_cli("inspect", "--user", "ana", home=home))
    retried = json.loads(ok(run_cli("retry-jobs", "--user", "ana", "--json", home=home)))
    assert retried == {"requeued": 1, "failed_again": 0}
    report = json.loads(ok(run_cli("inspect", "--user", "ana", "--json", home=home)))
    assert (report["failed_jobs"], report["profile"]) == (0, {"location": "Porto"})
    assert "0 failed jobs queued again" in ok(run_cli("retry-jobs", home=home))


def test_consolidate_reports_tes(home: Path) -> None:
    seed(home, [f"The garden shed roof leaks again near window {n}" for n in range(4)])
    made = json.loads(ok(run_cli("consolidate", "--user", "ana", "--json", home=home)))
    assert made and all(0.0 <= item["tes"] <= 1.0 and item["source_turn_ids"] for item in made)
    assert "0 consolidations" in ok(run_cli("consolidate", "--user", "ana", home=home))


def test_control_characters_in_stored_messages_print_as_text(tmp_path: Path) -> None:
    home = tmp_path / "home"
    seed(home, ["evil \x1b[31mRED\x1b[0m \x1b]0;pwned\x07 title \x9b2J"])
    for command in (["history", "--user", "ana"], ["search", "RED", "--user", "ana"]):
        printed = ok(run_cli(*command, home=home))
        assert "\\x1b[31mRED" in printed and "\\x9b" in printed, printed
        assert not any(character in printed for character in "\x1b\x07\x9b"), printed
    seed(home, [f"The garden shed roof leaks \x1b[31mRED\x1b[0m, repair {n}." for n in range(4)], session="s2")
    for command in (["consolidate", "--user", "ana"], ["inspect", "--user", "ana"]):  # summaries quote the turns
        printed = ok(run_cli(*command, home=home))
        assert "\\x1b[31mRED" in printed and "\x1b" not in printed, printed
    piped = ok(run_cli("context", "RED", "--user", "ana", home=home))  # not a terminal: the block as assembled
    assert "\x1b]0;pwned\x07" in piped and "\\x1b" not in piped  # (click drops colour codes when piped)
