"""Working memory behaves the same wherever it lives: in the store's transaction, or in Redis (``working_url``).

Every test runs for each store (SQLite, PostgreSQL) with each home of the working set.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from memstrata import Memory
from tests.fakes import FakeLLM

WORKING = ("in-store", "redis")


@pytest.fixture(params=WORKING)
def open_working_memory(request: pytest.FixtureRequest, open_memory: Callable[..., Memory]) -> Callable[..., Memory]:
    """Opens Memories whose working set lives in the store, or in the test Redis."""
    if request.param == "in-store":
        return open_memory
    return functools.partial(open_memory, working_url=request.getfixturevalue("redis_url"))


def _exchange(
    memory: Memory, text: str, *, session: str = "s1", user: str = "ana", timestamp: datetime | None = None
) -> None:
    memory.add(
        [{"role": "user", "content": text}, {"role": "assistant", "content": f"Reply to {text}"}],
        user_id=user,
        session_id=session,
        timestamp=timestamp,
    )


def test_overflow_moves_the_oldest_exchanges_to_midterm(open_working_memory: Callable[..., Memory]) -> None:
    memory = open_working_memory(working_capacity=2)
    for n in range(4):
        _exchange(memory, f"sailing question {n}")
    _exchange(memory, "a gardening question", session="s2")
    _exchange(memory, "someone else's question", user="bob")
    report = memory.inspect(user_id="ana")
    assert [turn.content for turn in report.working] == [
        "sailing question 2",
        "Reply to sailing question 2",
        "sailing question 3",
        "Reply to sailing question 3",
        "a gardening question",
        "Reply to a gardening question",
    ]
    assert report.counts["working"] == 6
    memory.flush()
    report = memory.inspect(user_id="ana")
    assert len(report.working) == 6 and report.pending_jobs == 0
    assert sum(segment.turn_count for segment in report.segments) == 4  # the two oldest exchanges, each turn once
    assert len(memory.inspect(user_id="bob").working) == 2


def test_exchanges_said_first_leave_first_even_when_back_filled_later(
    open_working_memory: Callable[..., Memory],
) -> None:
    llm = FakeLLM({"chat": ["Sure."]})
    memory = open_working_memory(working_capacity=3, llm=llm)
    now = datetime.now(UTC)
    _exchange(memory, "said ten minutes ago", timestamp=now - timedelta(minutes=10))
    _exchange(memory, "said just now", timestamp=now)
    # Back-filled: one exchange said between the two above, then two said long before them.
    _exchange(memory, "said five minutes ago", timestamp=now - timedelta(minutes=5))
    _exchange(memory, "said last year", timestamp=now - timedelta(days=365))
    _exchange(memory, "said two years ago", timestamp=now - timedelta(days=730))
    asked = {turn.content for turn in memory.inspect(user_id="ana").working if turn.role.value == "user"}
    assert asked == {"said ten minutes ago", "said five minutes ago", "said just now"}
    memory.flush()
    filed = memory.inspect(user_id="ana").segments
    assert sum(segment.turn_count for segment in filed) == 4  # the two back-filled old exchanges, every turn once
    assert {turn.content for turn in memory.inspect(user_id="ana").working if turn.role.value == "user"} == asked
    memory.chat("what next?", user_id="ana", session_id="s1")
    (call,) = llm.calls_for("chat")
    assert [message.content for message in call.messages if message.role == "user"] == [
        "said ten minutes ago",
        "said five minutes ago",
        "said just now",
        "what next?",
    ]


def test_an_exchange_back_filled_turn_by_turn_pushes_out_no_newer_one_nor_joins_it(
    open_working_memory: Callable[..., Memory],
) -> None:
    memory = open_working_memory(working_capacity=3)
    now = datetime.now(UTC)
    for n, minutes in enumerate((10, 5, 0)):
        _exchange(memory, f"live {n}", timestamp=now - timedelta(minutes=minutes))
    old = now - timedelta(days=365)
    memory.add([{"role": "user", "content": "old question"}], user_id="ana", session_id="s1", timestamp=old)
    memory.add([{"role": "assistant", "content": "old answer"}], user_id="ana", session_id="s1", timestamp=old)
    memory.add([{"role": "user", "content": "live 3"}], user_id="ana", session_id="s1", timestamp=now)
    memory.flush()
    report = memory.inspect(user_id="ana")
    working = [turn.content for turn in report.working if turn.role.value == "user"]
    assert sorted(working) == ["live 1", "live 2", "live 3"]
    store = memory.parts.store
    filed = [
        sorted(turn.content for turn in store.get_by_seqs(store.segment_turn_seqs(segment.id), "ana").values())  # type: ignore[attr-defined]
        for segment in report.segments
    ]
    assert sorted(turn for group in filed for turn in group) == [
        "Reply to live 0",
        "live 0",
        "old answer",
        "old question",
    ]
    # The reply, back-filled in an add after its question left, joined no live exchange.
    assert not any("old answer" in group and "live 0" in group for group in filed)


def _said(memory: Memory, role: str, text: str, when: datetime) -> str:
    (turn,) = memory.add([{"role": role, "content": text}], user_id="ana", session_id="s1", timestamp=when)
    return turn.id


def _working_texts(memory: Memory) -> set[str]:
    return {turn.content for turn in memory.inspect(user_id="ana").working}


def test_a_reply_joins_the_exchange_opened_last_before_it(open_working_memory: Callable[..., Memory]) -> None:
    memory = open_working_memory(working_capacity=3)
    now = datetime.now(UTC)
    _said(memory, "user", "Q1", now - timedelta(minutes=10))
    _said(memory, "user", "Q2", now - timedelta(minutes=5))
    _said(memory, "user", "old Q", now - timedelta(days=365))  # back-filled: added last, said first
    _said(memory, "assistant", "A2", now - timedelta(minutes=4))  # answers Q2, not the old question
    _said(memory, "assistant", "A1", now - timedelta(minutes=9))  # back-filled: answers Q1
    _said(memory, "user", "Q3", now)
    assert _working_texts(memory) == {"Q1", "A1", "Q2", "A2", "Q3"}  # the old question left alone
    _said(memory, "user", "Q4", now + timedelta(minutes=1))
    assert _working_texts(memory) == {"Q2", "A2", "Q3", "Q4"}  # Q1 left with its reply


def test_an_exchange_whose_first_turn_is_deleted_is_as_old_as_its_first_turn_left(
    open_working_memory: Callable[..., Memory],
) -> None:
    memory = open_working_memory(working_capacity=2)
    now = datetime.now(UTC)
    first = _said(memory, "user", "QA", now - timedelta(minutes=20))
    _said(memory, "assistant", "RA", now - timedelta(minutes=1))
    _said(memory, "user", "QB", now - timedelta(minutes=10))
    _said(memory, "assistant", "RB", now - timedelta(minutes=9))
    memory.delete(first, user_id="ana")
    _said(memory, "user", "QC", now)
    assert _working_texts(memory) == {"RA", "QC"}  # exchange A now opens at RA's time, after B


def test_context_and_chat_read_the_sessions_working_memory(open_working_memory: Callable[..., Memory]) -> None:
    llm = FakeLLM({"chat": ["Sure."]})
    memory = open_working_memory(working_capacity=1, llm=llm)
    _exchange(memory, "the regatta starts at nine")
    _exchange(memory, "bring the blue sail")
    memory.flush()
    recent = [item for item in memory.context("sail", user_id="ana", session_id="s1").items if item.tier == "working"]
    assert [item.text for item in recent] == ["user: bring the blue sail", "assistant: Reply to bring the blue sail"]
    memory.chat("and the rope?", user_id="ana", session_id="s1")
    (call,) = llm.calls_for("chat")
    assert [message.content for message in call.messages] == [
        "bring the blue sail",
        "Reply to bring the blue sail",
        "and the rope?",
    ]
    assert [turn.content for turn in memory.inspect(user_id="ana").working] == ["and the rope?", "Sure."]


def test_new_turns_are_processed_and_forgetting_clears_working_memory(
    open_working_memory: Callable[..., Memory],
) -> None:
    memory = open_working_memory(working_capacity=2)
    _exchange(memory, "I live in Porto.")
    _exchange(memory, "Filler", session="s2")
    memory.flush()
    assert memory.profile(user_id="ana").get("location") == "Porto"
    memory.forget(user_id="ana", session_id="s2")
    assert [turn.session_id for turn in memory.inspect(user_id="ana").working] == ["s1", "s1"]
    memory.forget(user_id="ana")
    assert memory.inspect(user_id="ana").working == ()
    _exchange(memory, "Starting over")
    assert len(memory.inspect(user_id="ana").working) == 2
