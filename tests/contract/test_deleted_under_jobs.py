"""Tier jobs whose turns are deleted while they run: the gone turns are skipped quietly, the rest is done."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from memstrata import Memory
from memstrata.models import Turn

USER = "ana"
TOPICS = (
    "Ana visited Lisbon with Marta, trip number {n} along the Tagus.",
    "The garden shed roof leaks near the window, repair attempt {n} failed.",
)


def _exchanges(memory: Memory, count: int) -> list[Turn]:
    stored: list[Turn] = []
    for n in range(count):
        text = TOPICS[n % 2].format(n=n)
        stored += memory.add(
            [{"role": "user", "content": text}, {"role": "assistant", "content": f"Noted: {text}"}],
            user_id=USER,
            session_id="s1",
        )
    return stored


def _after_first_read(monkeypatch: pytest.MonkeyPatch, owner: object, method: str, step: Callable[[], None]) -> None:
    """Run ``step`` right after ``owner.method`` first returns, as a deletion by another caller would land."""
    read = getattr(owner, method)

    def stale(*args: object, **kwargs: object) -> object:
        found = read(*args, **kwargs)
        monkeypatch.setattr(owner, method, read)
        step()
        return found

    monkeypatch.setattr(owner, method, stale)


def _before_first_call(monkeypatch: pytest.MonkeyPatch, owner: object, method: str, step: Callable[[], None]) -> None:
    """Run ``step`` right before ``owner.method`` first writes, as a deletion by another caller would land."""
    write = getattr(owner, method)

    def late(*args: object, **kwargs: object) -> object:
        monkeypatch.setattr(owner, method, write)
        step()
        return write(*args, **kwargs)

    monkeypatch.setattr(owner, method, late)


def _quiet_about(caplog: pytest.LogCaptureFixture) -> None:
    errors = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert not errors, [record.getMessage() for record in errors]
    skipped = [record for record in caplog.records if "deleted" in record.getMessage()]
    assert skipped and all(record.levelno == logging.INFO and record.exc_info is None for record in skipped)


def test_a_job_whose_turn_is_deleted_while_it_runs_skips_that_turn_and_does_the_rest(
    open_memory: Callable[..., Memory], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    memory = open_memory(working_capacity=100)
    turns = _exchanges(memory, 2)
    store = memory.parts.store
    gone = turns[0]
    # The job read its turns; then the first is deleted before it writes what it derived from them.
    _after_first_read(monkeypatch, store, "get_by_seqs", lambda: memory.delete(gone.id, user_id=USER))
    with caplog.at_level(logging.INFO, logger="memstrata"):
        memory.flush()
    assert store.count_failed_jobs() == 0 and store.count_jobs() == 0
    _quiet_about(caplog)
    kept = {turn.id for turn in memory.history(user_id=USER, limit=10)}
    assert kept == {turn.id for turn in turns[1:]}
    seqs = sorted(seq for seq, turn in store.iterate(USER))
    assert set(store.importance_of(seqs)) == set(seqs), "the turns still there were scored"
    assert store.entities(USER), "and their entities stored"


def test_a_user_forgotten_while_a_job_runs_leaves_the_job_finished_not_failed(
    open_memory: Callable[..., Memory], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    memory = open_memory(working_capacity=100)
    _exchanges(memory, 2)
    store = memory.parts.store
    _after_first_read(monkeypatch, store, "get_by_seqs", lambda: memory.forget(user_id=USER))
    with caplog.at_level(logging.INFO, logger="memstrata"):
        memory.flush()
    assert store.count_failed_jobs() == 0 and store.count_jobs() == 0
    _quiet_about(caplog)
    assert memory.history(user_id=USER, limit=10) == []
    assert memory.inspect(user_id=USER).events == [] or all(
        event.kind == "forget" for event in memory.inspect(user_id=USER).events
    )


def test_a_sleep_whose_turn_is_deleted_before_it_stores_its_summary_summarises_the_rest(
    open_memory: Callable[..., Memory], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    memory = open_memory(working_capacity=100, consolidate_every=1000, consolidate_tokens=10**6)
    turns = _exchanges(memory, 8)
    memory.flush()
    store = memory.parts.store
    gone = turns[2]  # a user turn of the Lisbon topic
    _after_first_read(monkeypatch, store, "get_by_seqs", lambda: memory.delete(gone.id, user_id=USER))
    store.enqueue_job("consolidate", USER, {})
    with caplog.at_level(logging.INFO, logger="memstrata"):
        memory.flush()
    assert store.count_failed_jobs() == 0 and store.count_jobs() == 0
    made = memory.consolidations(user_id=USER)
    assert made, "the clusters were summarised without the deleted turn"
    assert all(gone.id not in item.source_turn_ids and item.source_turn_ids for item in made)
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]


def test_scores_and_summaries_for_deleted_turns_are_skipped_in_the_write(
    open_memory: Callable[..., Memory],
) -> None:
    memory = open_memory(working_capacity=100)
    turns = _exchanges(memory, 2)
    store = memory.parts.store
    seqs = sorted(seq for seq, _ in store.iterate(USER))
    memory.delete(turns[0].id, user_id=USER)
    store.set_importance({seq: 0.5 for seq in seqs})
    assert set(store.importance_of(seqs[1:])) == set(seqs[1:])


def test_a_filing_whose_turn_is_deleted_before_its_segment_is_saved_files_the_rest(
    open_memory: Callable[..., Memory], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    memory = open_memory(working_capacity=1)
    turns = _exchanges(memory, 3)  # the first two exchanges leave working memory for mid-term
    store = memory.parts.store
    gone = turns[0]
    _before_first_call(monkeypatch, store, "save_segment", lambda: memory.delete(gone.id, user_id=USER))
    with caplog.at_level(logging.INFO, logger="memstrata"):
        memory.flush()
    assert store.count_failed_jobs() == 0 and store.count_jobs() == 0
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING]
    filed = {seq for segment in store.segments(USER, limit=100) for seq in store.segment_turn_seqs(segment.id)}
    kept = dict(store.iterate(USER))
    assert filed and filed <= set(kept)
    assert {kept[seq].id for seq in filed} >= {turn.id for turn in turns[1:4]}, "the rest of the overflow is filed"


def test_a_sleep_asked_for_whose_turn_is_deleted_under_it_summarises_the_rest(
    open_memory: Callable[..., Memory], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = open_memory(working_capacity=100, consolidate_every=1000, consolidate_tokens=10**6)
    turns = _exchanges(memory, 8)
    memory.flush()
    store = memory.parts.store
    gone = turns[2]
    _before_first_call(monkeypatch, store, "add_consolidation", lambda: memory.delete(gone.id, user_id=USER))
    made = memory.consolidate(user_id=USER)
    assert made and all(gone.id not in item.source_turn_ids for item in made)
    assert {item.id for item in store.consolidations(USER)} == {item.id for item in made}
