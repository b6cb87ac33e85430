"""Shared spaces on every backend: grants, access checks, provenance, federated search, trust, sharing."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.errors import AccessDenied, IdConflict, InvalidInput, NotFound
from memstrata.models import Access, SearchFilters, space_scope


@pytest.fixture
def project(memory: Memory) -> Memory:
    """A space ``apollo`` where the planner is admin, the coder writes and the reviewer reads."""
    memory.create_space("apollo", description="the Apollo project", agent_id="planner")
    memory.grant("apollo", "coder", "write", by="planner")
    memory.grant("apollo", "reviewer", "read", by="planner")
    return memory


def test_spaces_are_created_listed_and_named_uniquely(memory: Memory) -> None:
    made = memory.create_space("apollo", description="the Apollo project", agent_id="planner")
    memory.create_space("zeus")
    assert made.name == "apollo" and made.description == "the Apollo project"
    assert [space.name for space in memory.spaces()] == ["apollo", "zeus"]
    assert [space.name for space in memory.spaces(prefix="ze")] == ["zeus"]
    # An agent sees the spaces it may read; the creator got admin.
    assert [space.name for space in memory.spaces(agent_id="planner")] == ["apollo"]
    assert memory.spaces(agent_id="stranger") == []
    assert [(g.agent_id, g.access) for g in memory.grants("apollo")] == [("planner", Access.ADMIN)]
    with pytest.raises(IdConflict):
        memory.create_space("apollo")
    assert len(memory.spaces()) == 2


def test_a_space_holds_memories_like_a_user_and_is_no_user(project: Memory) -> None:
    (turn,) = project.add("The release deadline is March 3rd", space="apollo", agent_id="coder")
    assert turn.space == "apollo" and turn.agent_id == "coder"
    assert project.get(turn.id, space="apollo").content == turn.content
    assert [t.id for t in project.history(space="apollo", agent_id="reviewer")] == [turn.id]
    (hit,) = project.search("release deadline", space="apollo", agent_id="reviewer", tiers=())
    assert (hit.id, hit.space, hit.written_by) == (turn.id, "apollo", "coder")
    assert "March 3rd" in project.context("release deadline", space="apollo", agent_id="reviewer").text
    assert project.users() == []
    # Not reachable as a user, nor from a user's memory.
    with pytest.raises(NotFound):
        project.get(turn.id, user_id="ana")
    with pytest.raises(InvalidInput):
        project.search("deadline", user_id=space_scope("apollo"))
    project.delete(turn.id, space="apollo", agent_id="coder")
    assert project.history(space="apollo") == []


def test_each_call_needs_its_access_and_a_denied_call_changes_nothing(project: Memory) -> None:
    project.add("The staging server runs on port 8080", space="apollo", agent_id="coder")
    before = project.history(space="apollo")
    with pytest.raises(AccessDenied, match="stranger"):
        project.search("staging", space="apollo", agent_id="stranger")
    with pytest.raises(AccessDenied, match="write is needed"):
        project.add("port 9090 now", space="apollo", agent_id="reviewer")
    with pytest.raises(AccessDenied):
        project.delete(before[0].id, space="apollo", agent_id="reviewer")
    with pytest.raises(AccessDenied):
        project.grant("apollo", "reviewer", "admin", by="coder")
    with pytest.raises(AccessDenied):
        project.forget(space="apollo", agent_id="coder")
    with pytest.raises(AccessDenied):
        project.delete_space("apollo", agent_id="coder")
    with pytest.raises(AccessDenied):
        project.cells(space="apollo", agent_id="stranger")
    assert project.history(space="apollo") == before
    assert project.grants("apollo", agent_id="reviewer")[2].access == Access.READ
    # The application itself (no agent) may do anything.
    project.add("port 9090 now", space="apollo")
    assert len(project.history(space="apollo")) == 2


def test_revoking_takes_access_away_and_granting_again_replaces_it(project: Memory) -> None:
    project.add("The staging server runs on port 8080", space="apollo", agent_id="coder")
    assert project.revoke("apollo", "reviewer", by="planner") is True
    assert project.revoke("apollo", "reviewer", by="planner") is False
    with pytest.raises(AccessDenied):
        project.history(space="apollo", agent_id="reviewer")
    project.grant("apollo", "reviewer", "write", by="planner")
    project.grant("apollo", "reviewer", "read", by="planner")
    access = {g.agent_id: g.access for g in project.grants("apollo")}
    assert access == {"coder": Access.WRITE, "planner": Access.ADMIN, "reviewer": Access.READ}


def test_unknown_spaces_and_bad_names_are_clear_errors(memory: Memory) -> None:
    with pytest.raises(NotFound, match="no space called 'nowhere'"):
        memory.search("x", space="nowhere")
    with pytest.raises(NotFound):
        memory.add("x", space="nowhere")
    with pytest.raises(NotFound):
        memory.grant("nowhere", "coder", "read")
    with pytest.raises(NotFound):
        memory.delete_space("nowhere")
    memory.create_space("apollo")
    with pytest.raises(InvalidInput, match="access"):
        memory.grant("apollo", "coder", "owner")
    for agent in (5, "", "  ", None, "x" * 300):
        with pytest.raises(InvalidInput):
            memory.grant("apollo", agent, "read")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="not both"):
        memory.search("x", user_id="ana", space="apollo")
    with pytest.raises(InvalidInput, match="user_id or space"):
        memory.add("x")
    with pytest.raises(InvalidInput):
        memory.set_trust("a", "b", 1.5)
    with pytest.raises(InvalidInput):
        memory.search("x", user_id="ana", spaces="everything")
    assert memory.grants("apollo") == []


def test_federated_search_ranks_a_user_and_spaces_together_and_names_the_source(project: Memory) -> None:
    project.create_space("secret")
    project.add("The launch codes for the secret project are in the safe", space="secret")
    project.add("The release deadline for Apollo is March 3rd", space="apollo", agent_id="planner")
    project.add("I had pasta for lunch", user_id="ana", agent_id="coder")
    hits = project.search("release deadline", user_id="ana", agent_id="coder", spaces="all", tiers=())
    assert hits[0].space == "apollo" and hits[0].written_by == "planner"
    assert {hit.space for hit in hits} <= {None, "apollo"}
    assert any(hit.space is None for hit in hits)
    with pytest.raises(AccessDenied):
        project.search("launch codes", user_id="ana", agent_id="coder", spaces=["secret"])
    # The application reads every space.
    found = project.search("launch codes", user_id="ana", spaces="all", tiers=())
    assert found[0].space == "secret"
    context = project.context("release deadline", user_id="ana", agent_id="coder", spaces=["apollo"])
    assert "[apollo, by planner] The release deadline for Apollo is March 3rd" in context.text
    shared = [item for item in context.items if item.space == "apollo"]
    assert shared and shared[0].written_by == "planner"
    assert context.tokens <= context.token_budget


def test_no_read_ever_returns_a_space_the_agent_may_not_read(memory: Memory) -> None:
    rng = random.Random(7)
    agents = [f"agent-{i}" for i in range(4)]
    spaces = [f"space-{i}" for i in range(5)]
    for name in spaces:
        memory.create_space(name)
        memory.add(f"the shared note about widgets in {name}", space=name)
    memory.add("my own note about widgets", user_id="ana")
    readable: dict[str, set[str]] = {agent: set() for agent in agents}
    for agent in agents:
        for name in rng.sample(spaces, 2):
            memory.grant(name, agent, rng.choice(["read", "write", "admin"]))
            readable[agent].add(name)
    for _ in range(60):
        agent = rng.choice(agents)
        asked = rng.sample(spaces, rng.randint(1, 3))
        try:
            hits = memory.search("widgets note", user_id="ana", agent_id=agent, spaces=asked, tiers=())
        except AccessDenied:
            assert not set(asked) <= readable[agent]
            continue
        assert set(asked) <= readable[agent]
        assert {hit.space for hit in hits if hit.space} <= readable[agent]
        hits = memory.search("widgets note", user_id="ana", agent_id=agent, spaces="all", tiers=())
        assert {hit.space for hit in hits if hit.space} == readable[agent]


def test_trust_orders_what_a_reader_sees_and_which_conflicting_fact_is_current(project: Memory) -> None:
    project.grant("apollo", "intern", "write")
    project.add("My favourite colour is green", space="apollo", agent_id="coder")
    project.add("My favourite colour is blue", space="apollo", agent_id="intern")
    project.flush()
    assert [c.value for c in project.cells(space="apollo", agent_id="reviewer")] == ["blue"]
    project.set_trust("reviewer", "intern", 0.2)
    assert project.trust("reviewer") == {"intern": 0.2}
    assert [c.value for c in project.cells(space="apollo", agent_id="reviewer")] == ["green"]
    history = project.cells(space="apollo", agent_id="reviewer", include_superseded=True)
    assert sorted(c.value for c in history) == ["blue", "green"]  # nothing deleted
    # Other readers still see the newest.
    assert [c.value for c in project.cells(space="apollo", agent_id="coder")] == ["blue"]
    hits = project.search("favourite colour", space="apollo", agent_id="reviewer", tiers=())
    assert hits[0].written_by == "coder"
    project.set_trust("reviewer", "intern", 1)
    assert project.trust("reviewer") == {}


def test_sharing_copies_with_a_link_and_never_moves(project: Memory) -> None:
    (mine,) = project.add("The API key rotates every 90 days", user_id="ana", agent_id="coder")
    (copy,) = project.share([mine.id], user_id="ana", to_space="apollo", agent_id="coder")
    assert copy.space == "apollo" and copy.id != mine.id and copy.content == mine.content
    assert project.get(mine.id, user_id="ana").content == mine.content
    origin = project.origin(copy.id, space="apollo", agent_id="reviewer")
    assert origin is not None and origin.source_id == mine.id and origin.from_space is None
    assert origin.shared_by == "coder"
    # Idempotent: the same copy again.
    assert [t.id for t in project.share([mine.id], user_id="ana", to_space="apollo", agent_id="coder")] == [copy.id]
    assert len(project.history(space="apollo")) == 1
    with pytest.raises(AccessDenied):
        project.share([mine.id], user_id="ana", to_space="apollo", agent_id="reviewer")
    with pytest.raises(NotFound):
        project.share(["missing"], user_id="ana", to_space="apollo")
    # Deleting the space the copy was shared to leaves the source; a copy shared on from a
    # deleted space keeps naming where it came from.
    project.create_space("archive")
    (again,) = project.share([copy.id], space="apollo", to_space="archive")
    deleted = project.delete_space("apollo", agent_id="planner")
    assert deleted.space == "apollo" and deleted.turns == 1
    assert project.get(mine.id, user_id="ana").content == mine.content
    kept = project.origin(again.id, space="archive")
    assert kept is not None and kept.from_space == "apollo"
    with pytest.raises(NotFound):
        project.history(space="apollo")
    assert project.grants("archive") == []


def test_a_deleted_space_leaves_nothing_and_its_name_can_be_used_again(project: Memory) -> None:
    project.add("The staging server runs on port 8080", space="apollo", agent_id="coder")
    project.flush()
    project.delete_space("apollo")
    assert project.spaces() == []
    project.create_space("apollo")
    assert project.history(space="apollo") == []
    assert project.grants("apollo") == []
    assert project.search("staging", space="apollo") == []


def test_two_agents_writing_the_same_fact_at_once_both_land(open_memory: Callable[..., Memory]) -> None:
    first, second = open_memory(), open_memory()
    first.create_space("apollo")
    first.grant("apollo", "coder", "write")
    first.grant("apollo", "tester", "write")
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def write(memory: Memory, agent: str) -> None:
        try:
            barrier.wait()
            memory.add("My favourite colour is green", space="apollo", agent_id=agent)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=pair) for pair in ((first, "coder"), (second, "tester"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    writers = sorted(t.agent_id or "" for t in first.history(space="apollo"))
    assert writers == ["coder", "tester"]
    first.flush()
    # One fact, not two: the second writer restated it.
    assert [(c.attribute, c.value) for c in first.cells(space="apollo")] == [("favourite:color", "green")]


def test_revoking_while_a_search_runs_gives_the_search_a_whole_answer_or_a_denial(project: Memory) -> None:
    for i in range(30):
        project.add(f"note {i} about the build pipeline", space="apollo", agent_id="coder")
    outcomes: list[str] = []
    stop = threading.Event()

    def searching() -> None:
        while not stop.is_set():
            try:
                hits = project.search("build pipeline", space="apollo", agent_id="reviewer", tiers=())
                assert all(hit.space == "apollo" for hit in hits)
                outcomes.append("answered")
            except AccessDenied:
                outcomes.append("denied")

    thread = threading.Thread(target=searching)
    thread.start()
    try:
        while len(outcomes) < 3:
            threading.Event().wait(0.01)
        project.revoke("apollo", "reviewer", by="planner")
        seen = len(outcomes)
        while len(outcomes) < seen + 3:
            threading.Event().wait(0.01)
    finally:
        stop.set()
        thread.join()
    assert outcomes[0] == "answered" and outcomes[-1] == "denied"
    # Once denied, never answered again.
    assert "answered" not in outcomes[outcomes.index("denied") :]


def test_a_space_is_exported_by_name_and_imported_into_a_new_store(project: Memory, tmp_path: Path) -> None:
    project.add("The release deadline is March 3rd", space="apollo", agent_id="coder")
    project.add("I like tea", user_id="ana")
    report = project.export(tmp_path / "apollo.jsonl", space="apollo", agent_id="reviewer")
    assert report.turns == 1
    line = (tmp_path / "apollo.jsonl").read_text(encoding="utf-8").splitlines()[1]
    assert '"space": "apollo"' in line and "user_id" not in line
    with Memory(tmp_path / "other", embedder=HashEmbedder(), background=False) as other:
        assert other.import_(tmp_path / "apollo.jsonl").turns == 1
        assert [space.name for space in other.spaces()] == ["apollo"]
        (turn,) = other.history(space="apollo")
        assert (turn.content, turn.agent_id) == ("The release deadline is March 3rd", "coder")
        assert other.users() == []
    with Memory(tmp_path / "third", embedder=HashEmbedder(), background=False) as third:
        (exported,) = project.history(space="apollo")
        third.add("something else", user_id="bob", id=exported.id)
        with pytest.raises(IdConflict):
            third.import_(tmp_path / "apollo.jsonl")
        assert third.spaces() == []  # a refused file creates no space


def test_full_text_over_several_memories_gives_each_the_list_it_gets_alone(memory: Memory) -> None:
    rng = random.Random(11)
    words = ["deadline", "release", "server", "database", "migration", "budget", "kitchen", "garden", "invoice"]
    owners = ["ana", "bob", space_scope("apollo"), space_scope("zeus")]
    memory.create_space("apollo")
    memory.create_space("zeus")
    for owner in owners:
        space = owner[1:] if owner.startswith("\ufdd0") else None
        for _ in range(40):
            text = " ".join(rng.choice(words) for _ in range(6))
            who = rng.choice(["Ana", "Bo", None])
            message = {"role": "user", "content": text, **({"name": who} if who else {})}
            memory.add([message], user_id=None if space else owner, space=space, agent_id=None if space else "a")
    memory.flush()
    store = memory.parts.store
    for match in ['"deadline" OR "release"', '"kitchen"', '"server" OR "budget" OR "invoice"']:
        for filters in (SearchFilters(), SearchFilters(agent_id="a")):
            together = store.fulltext_many(match, owners, filters, 20)
            assert together == {owner: store.fulltext(match, owner, filters, 20) for owner in owners}
        derived = store.derived_fulltext_many(match, owners, 20, ("longterm", "midterm"))
        assert derived == {owner: store.derived_fulltext(match, owner, 20, ("longterm", "midterm")) for owner in owners}


def test_the_block_a_reader_gets_takes_its_trusted_fact_as_current(project: Memory) -> None:
    project.grant("apollo", "intern", "write")
    project.add("My favourite colour is green", space="apollo", agent_id="coder")
    project.add("My favourite colour is blue", space="apollo", agent_id="intern")
    project.flush()
    project.set_trust("reviewer", "intern", 0.2)
    trusting = project.context("favourite colour", space="apollo", agent_id="reviewer", include_superseded=True)
    assert "- favourite color: green" in trusting.text
    assert "blue — My favourite colour is blue (said later, by a writer trusted less)" in trusting.text
    assert trusting.tokens <= trusting.token_budget
    assert {item.written_by for item in trusting.items if item.source_turn_ids} <= {"coder", "intern"}
    others = project.context("favourite colour", space="apollo", agent_id="coder")
    assert "- favourite color: blue" in others.text


def test_a_deletion_stopped_half_way_is_finished_by_the_next_and_holds_the_name_meanwhile(project: Memory) -> None:
    project.add("The staging server runs on port 8080", space="apollo", agent_id="coder")
    # As a crash after the deletion began and before the memories went would leave it.
    assert project.parts.store.begin_space_deletion("apollo", datetime.now(UTC))
    assert project.spaces() == []
    with pytest.raises(NotFound):
        project.search("staging", space="apollo")
    with pytest.raises(NotFound):
        project.add("more", space="apollo")
    with pytest.raises(IdConflict, match="being deleted"):
        project.create_space("apollo")
    with pytest.raises(NotFound):
        project.delete_space("apollo", agent_id="coder")  # only an admin (or the application) finishes it
    assert project.delete_space("apollo", agent_id="planner").turns == 1
    project.create_space("apollo")
    assert project.history(space="apollo") == []


def test_creating_a_taken_name_changes_nothing(project: Memory) -> None:
    project.add("The staging server runs on port 8080", space="apollo", agent_id="coder")
    with pytest.raises(IdConflict):
        project.create_space("apollo", agent_id="intruder")
    assert len(project.history(space="apollo")) == 1
    assert "intruder" not in {grant.agent_id for grant in project.grants("apollo")}
