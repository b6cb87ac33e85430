"""The ``TierStore`` protocol, backend by backend: the job queue, the working set and every derived tier."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from contextlib import closing
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np

from memstrata.models import Cell, Consolidation, Role, Scope, Segment, Turn
from memstrata.storage.base import TierStore

MODEL = "contract-model"
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _turn(turn_id: str, content: str, *, user_id: str = "ana", role: Role = Role.USER, session: str = "s") -> Turn:
    return Turn(id=turn_id, user_id=user_id, role=role, content=content, created_at=T0, session_id=session)


def _segment(segment_id: str, *, user_id: str = "ana", heat: float = 1.0, state: str = "active") -> Segment:
    return Segment(
        id=segment_id,
        user_id=user_id,
        summary=f"summary of {segment_id} about sailing",
        keywords=("sailing", "regatta"),
        visits=0,
        turn_count=2,
        heat=heat,
        state=state,
        created_at=T0,
        last_activity=T0 + timedelta(hours=1),
        session_id="s",
    )


def _cell(cell_id: str, value: str, *, valid_from: datetime = T0, source: str = "t0") -> Cell:
    return Cell(
        id=cell_id,
        user_id="ana",
        kind="fact",
        subject="user",
        attribute="location",
        value=value,
        content=f"I live in {value}",
        salience=0.8,
        valid_from=valid_from,
        source_turn_id=source,
    )


def _stored_text(storage_url: str, item_id: str, replacement: str | None = None) -> str:
    """A derived item's stored search text, first overwritten with ``replacement`` behind the store's back."""
    if storage_url.startswith("sqlite:///"):
        with closing(sqlite3.connect(storage_url.removeprefix("sqlite:///"))) as connection, connection:
            if replacement is not None:
                connection.execute("UPDATE derived SET content = ? WHERE id = ?", (replacement, item_id))
            return str(connection.execute("SELECT content FROM derived WHERE id = ?", (item_id,)).fetchone()[0])
    import psycopg

    with psycopg.connect(storage_url) as connection:
        if replacement is not None:
            connection.execute("UPDATE derived SET content = %s WHERE id = %s", (replacement, item_id))
        row = connection.execute("SELECT content FROM derived WHERE id = %s", (item_id,)).fetchone()
        assert row is not None
        return str(row[0])


# -- the job queue --------------------------------------------------------------------------


def test_jobs_are_claimed_in_order_leased_finished_and_failed(store: TierStore) -> None:
    first = store.enqueue_job("process", "ana", {"seqs": [1, 2]})
    second = store.enqueue_job("visit", "bob", {"searches": [[3]]})
    assert second > first
    assert store.count_jobs() == 2 and store.count_jobs("ana") == 1 and store.count_jobs("carol") == 0
    job = store.claim_job(60)
    assert job is not None and (job.id, job.kind, job.user_id, job.payload, job.attempts) == (
        first,
        "process",
        "ana",
        {"seqs": [1, 2]},
        1,
    )
    assert store.count_jobs() == 2  # running still counts
    other = store.claim_job(60)
    assert other is not None and other.id == second
    assert store.claim_job(60) is None  # both leased
    store.finish_job(first)
    store.fail_job(second, "boom", retry=True)
    assert store.count_jobs() == 1
    again = store.claim_job(60)
    assert again is not None and again.id == second and again.attempts == 2
    store.fail_job(second, "boom again", retry=False)
    assert store.count_jobs() == 0 and store.claim_job(60) is None


def test_a_claim_for_one_user_takes_only_that_users_jobs_oldest_first(store: TierStore) -> None:
    store.enqueue_job("process", "ana", {"seqs": [1]})
    bobs = [store.enqueue_job("process", "bob", {"seqs": [n]}) for n in (2, 3)]
    first = store.claim_job(60, user_id="bob")
    assert first is not None and first.id == bobs[0] and first.user_id == "bob"
    second = store.claim_job(60, user_id="bob")
    assert second is not None and second.id == bobs[1]
    assert store.claim_job(60, user_id="bob") is None and store.claim_job(60, user_id="carol") is None
    anas = store.claim_job(60)
    assert anas is not None and anas.user_id == "ana"


def test_a_worker_whose_lease_was_taken_over_changes_nothing(store: TierStore) -> None:
    store.enqueue_job("process", "ana", {"seqs": [1]})
    stale = store.claim_job(0.01)
    assert stale is not None
    while (current := store.claim_job(60)) is None:  # the stale worker's lease runs out
        threading.Event().wait(0.01)
    assert (current.id, current.attempts) == (stale.id, stale.attempts + 1)
    assert not store.renew_job(stale.id, attempt=stale.attempts, lease_seconds=60)
    store.fail_job(stale.id, "late failure", retry=True, attempt=stale.attempts)
    store.finish_job(stale.id, attempt=stale.attempts)
    assert store.count_jobs() == 1 and store.claim_job(60) is None  # still running, for the new claim
    assert store.renew_job(current.id, attempt=current.attempts, lease_seconds=60)
    store.finish_job(current.id, attempt=current.attempts)
    assert store.count_jobs() == 0


def test_a_failed_job_waits_before_its_next_attempt_and_a_parked_one_can_be_retried(store: TierStore) -> None:
    first = store.enqueue_job("process", "ana", {"seqs": [1]})
    store.enqueue_job("process", "bob", {"seqs": [2]})
    job = store.claim_job(60)
    assert job is not None and job.id == first
    store.fail_job(job.id, "database restarting", retry=True, attempt=job.attempts, retry_after=0.3)
    other = store.claim_job(60)
    assert other is not None and other.user_id == "bob"  # the failed one waits; the queue goes on
    assert store.claim_job(60) is None and store.count_jobs("ana") == 1
    threading.Event().wait(0.35)
    again = store.claim_job(60)
    assert again is not None and (again.id, again.attempts) == (first, 2)
    store.fail_job(again.id, "still broken", retry=False, attempt=again.attempts)
    assert (store.count_failed_jobs("ana"), store.count_failed_jobs("bob"), store.count_failed_jobs()) == (1, 0, 1)
    assert store.count_jobs("ana") == 0
    assert store.retry_failed_jobs("bob") == 0
    assert store.retry_failed_jobs("ana") == 1
    assert store.count_failed_jobs() == 0 and store.count_jobs("ana") == 1
    retried = store.claim_job(60)
    assert retried is not None and (retried.id, retried.attempts) == (first, 1)


def test_a_job_that_outlives_its_lease_too_often_is_parked(store: TierStore) -> None:
    store.enqueue_job("process", "ana", {"seqs": [1]})
    for attempt in (1, 2):
        while (job := store.claim_job(0.01, 2)) is None:
            threading.Event().wait(0.01)
        assert job.attempts == attempt  # its worker "dies": the lease runs out
    threading.Event().wait(0.05)
    assert store.claim_job(60, 2) is None  # the third claim parks it instead
    assert store.count_jobs() == 0 and store.count_failed_jobs("ana") == 1


def test_an_expired_lease_is_claimed_again(store: TierStore) -> None:
    job_id = store.enqueue_job("process", "ana", {})
    abandoned = store.claim_job(0.01)
    assert abandoned is not None and abandoned.id == job_id
    deadline = datetime.now(UTC) + timedelta(seconds=10)
    while (retaken := store.claim_job(60)) is None:
        assert datetime.now(UTC) < deadline, "the expired lease was never taken over"
    assert retaken.id == job_id and retaken.attempts == 2


def test_two_stores_claiming_at_once_never_share_a_job(open_tier_store: Callable[[], TierStore]) -> None:
    stores = [open_tier_store(), open_tier_store()]
    ids = {stores[0].enqueue_job("process", f"user{n % 3}", {"n": n}) for n in range(40)}
    claimed: list[list[int]] = [[], []]
    start = threading.Barrier(2)

    def drain(index: int) -> None:
        start.wait()
        while (job := stores[index].claim_job(60)) is not None:
            claimed[index].append(job.id)
            stores[index].finish_job(job.id)

    threads = [threading.Thread(target=drain, args=(index,)) for index in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(claimed[0] + claimed[1]) == sorted(ids)  # every job ran exactly once
    assert stores[1].count_jobs() == 0


def test_insert_tracks_the_working_set_and_queues_jobs_in_the_same_transaction(store: TierStore) -> None:
    turns = []
    for n in range(4):
        turns += [_turn(f"u{n}", f"question {n}"), _turn(f"a{n}", f"answer {n}", role=Role.ASSISTANT)]
    seqs = store.insert_turns(turns, None, MODEL, working_capacity=2)
    assert store.working_seqs("ana") == seqs[4:]
    assert store.working_seqs("ana", "s") == seqs[4:] and store.working_seqs("ana", "other") == []
    jobs = [store.claim_job(60) for _ in range(2)]
    assert store.claim_job(60) is None
    by_kind = {job.kind: job for job in jobs if job is not None}
    assert by_kind["midterm"].payload == {"seqs": seqs[:4]}  # the two oldest exchanges overflowed
    assert by_kind["process"].payload == {"seqs": seqs}
    store.insert_turns(turns[:2], None, MODEL, working_capacity=2)  # a retry queues nothing new
    assert store.claim_job(60) is None
    assert store.tier_counts("ana")["working"] == 4


# -- segments, scenes, cells, profile ------------------------------------------------------------


def test_the_segment_before_a_turn_is_that_of_the_latest_filed_turn_said_before_it_in_its_session(
    store: TierStore,
) -> None:
    late, early = T0 + timedelta(hours=1), T0 - timedelta(hours=1)
    said = [_turn("a", "one"), _turn("b", "two"), replace(_turn("c", "three"), created_at=late)]
    said += [replace(_turn("d", "back-filled"), created_at=early), _turn("e", "same time as a and b")]
    said += [_turn("f", "another session", session="other"), replace(_turn("g", "no session"), session_id=None)]
    a, b, c, d, e, f, g = store.insert_turns(said, None, MODEL)
    centroid = np.zeros(4, dtype=np.float32).tobytes()
    assert store.segment_before("ana", b) is None  # nothing filed yet
    store.save_segment(_segment("first"), centroid, [a])
    store.save_segment(_segment("second"), centroid, [b, c])
    assert store.segment_before("ana", b) == ("first", T0)
    assert store.segment_before("ana", e) == ("second", T0)  # said with a and b, stored after them: b is before it
    assert store.segment_before("ana", d) is None  # said before everything filed
    assert store.segment_before("ana", f) is None and store.segment_before("ana", g) is None  # other sessions
    assert store.segment_before("ana", 10**9) is None and store.segment_before("bob", e) is None
    store.save_segment(_segment("third"), centroid, [e])
    assert store.segment_before("ana", c) == ("third", T0)  # by time: e was said before c, though stored after it
    store.archive_segments("ana", ["third"], {"third": 0.0})
    assert store.segment_before("ana", c) == ("third", T0)  # archived: still the segment that turn is in


def test_a_segments_direction_is_read_only_for_the_model_that_made_it(store: TierStore) -> None:
    centroid = np.arange(4, dtype=np.float32).tobytes()
    store.save_segment(_segment("mine"), centroid, [], model_id="model-a")
    store.save_segment(_segment("older"), centroid, [])  # stored before the model was recorded
    store.save_segment(_segment("theirs"), centroid, [], model_id="model-b")
    read = {segment.id: direction for segment, direction in store.active_segments("ana", "model-a")}
    assert read == {"mine": centroid, "older": centroid, "theirs": None}
    assert all(direction == centroid for _, direction in store.active_segments("ana"))
    store.save_segment(_segment("theirs"), centroid, [], model_id="model-a")  # refiled by the new model
    assert dict((s.id, d) for s, d in store.active_segments("ana", "model-a"))["theirs"] == centroid


def test_the_turns_after_a_turn_are_those_said_after_it_in_its_session_in_order(store: TierStore) -> None:
    late, early = T0 + timedelta(hours=1), T0 - timedelta(hours=1)
    said = [_turn("a", "one"), replace(_turn("b", "later"), created_at=late), _turn("c", "same time as a")]
    said += [replace(_turn("d", "back-filled"), created_at=early), _turn("e", "another session", session="other")]
    said += [replace(_turn("f", "no session"), session_id=None), replace(_turn("g", "none"), session_id=None)]
    a, b, c, d, e, f, g = store.insert_turns(said, None, MODEL)
    assert store.turns_after("ana", a, 10) == [c, b]  # by time, then seq
    assert store.turns_after("ana", d, 2) == [a, c]
    assert store.turns_after("ana", b, 10) == [] and store.turns_after("ana", e, 10) == []
    assert store.turns_after("ana", f, 10) == [g]  # turns without a session count as one session
    assert store.turns_after("bob", a, 10) == [] and store.turns_after("ana", 10**9, 10) == []


def test_segments_are_saved_heated_archived_promoted_and_searchable(store: TierStore) -> None:
    seqs = store.insert_turns([_turn("t0", "sailing in Cascais"), _turn("t1", "the regatta starts")], None, MODEL)
    centroid = np.arange(4, dtype=np.float32).tobytes()
    store.save_segment(_segment("seg1", heat=2.0), centroid, seqs[:1])
    store.save_segment(_segment("seg1", heat=3.0), centroid, seqs[1:])
    store.save_segment(_segment("seg2", heat=5.0), centroid, [])
    [(active, stored_centroid), _] = store.active_segments("ana")
    assert active.id == "seg1" and active.heat == 3.0 and stored_centroid == centroid
    assert active.keywords == ("sailing", "regatta") and active.created_at == T0
    assert store.segment_turn_seqs("seg1") == seqs
    assert [s.id for s in store.segments("ana")] == ["seg2", "seg1"]  # hottest first
    assert store.active_segments("bob") == []
    found = store.derived_fulltext('"sailing"', "ana", 10, ("midterm",))
    items = store.derived_items([seq for seq, _ in found], "ana")
    assert sorted(item[0] for item in items.values()) == ["seg1", "seg2"]
    assert {item[3] for item in items.values()} == {("t0", "t1"), ()}
    assert store.derived_items([seq for seq, _ in found], "bob") == {}

    # A turn is filed once: a second filing of it (a job run twice at once) stores nothing.
    assert store.filed_turns([*seqs, 10**9]) == set(seqs) and store.filed_turns([]) == set()
    assert store.save_segment(_segment("seg3", heat=7.0), centroid, seqs[1:]) is False
    assert [s.id for s in store.segments("ana")] == ["seg2", "seg1"]
    assert store.save_segment(_segment("seg1", heat=3.0), centroid, seqs) is True  # its own turns again
    # A filing that read the segment before another filing (or a delete) changed it stores nothing.
    assert store.save_segment(_segment("seg1", heat=4.0), centroid, [], known_turns=1) is False
    assert store.save_segment(_segment("gone", heat=4.0), centroid, [], known_turns=0) is False
    assert store.save_segment(_segment("seg1", heat=3.0), centroid, [], known_turns=2) is True
    assert [s.id for s in store.segments("ana")] == ["seg2", "seg1"]
    snapshot = store.active_segment("seg1")
    assert snapshot is not None and snapshot[0].id == "seg1" and snapshot[1] == seqs
    assert store.active_segment("nope") is None
    # A turn deleted since the filing read it is not linked: the filing is redone without it.
    [late] = store.insert_turns([_turn("t9", "said and deleted before it was filed")], None, MODEL)
    store.delete("t9", "ana")
    assert store.save_segment(_segment("seg1", heat=3.0), centroid, [late], known_turns=2) is False
    # A filing keeps the segment's visits: a visit may land between its read and its write.
    visited = T0 + timedelta(days=2)
    job = store.enqueue_job("visit", "ana", {})
    store.count_visits(job, "ana", [seqs[:1]] * 7, visited, lambda visits, turns: 9.5)
    assert store.save_segment(_segment("seg1", heat=3.0), centroid, [], known_turns=2) is True
    kept = next(s for s in store.segments("ana") if s.id == "seg1")
    assert (kept.visits, kept.heat, kept.last_activity) == (7, 9.5, visited), "nor heat or activity back"

    later = T0 + timedelta(days=1)
    store.count_visits(store.enqueue_job("visit", "ana", {}), "ana", [seqs], later, lambda visits, turns: 9.0)
    store.promote_segment(store.segments("ana")[0], "scene1", "sailing, regatta", later)
    # A second worker that read the segment before the promotion makes no second scene.
    store.promote_segment(store.segments("ana")[0], "scene2", "sailing again", later + timedelta(hours=1))
    promoted = next(s for s in store.segments("ana") if s.id == "seg1")
    assert (promoted.visits, promoted.heat, promoted.last_activity, promoted.promoted_at) == (8, 9.0, later, later)
    scene_hits = store.derived_fulltext('"regatta"', "ana", 10, ("scene",))
    [(scene_id, tier, content, sources)] = store.derived_items([seq for seq, _ in scene_hits], "ana").values()
    assert (scene_id, tier, sources) == ("scene1", "scene", ("t0", "t1")) and content.startswith("sailing, regatta:")

    store.archive_segments("ana", ["seg2"], {"seg2": 0.1})
    assert [s.id for s, _ in store.active_segments("ana")] == ["seg1"]
    assert store.active_segment("seg2") is None, "archived"
    assert store.save_segment(_segment("seg2"), centroid, [], known_turns=0) is False, "evicted meanwhile"
    assert [s.state for s in store.segments("ana")] == ["active", "archived"]
    remaining = store.derived_items(
        [seq for seq, _ in store.derived_fulltext('"sailing"', "ana", 10, ("midterm",))], "ana"
    )
    assert [item[0] for item in remaining.values()] == ["seg1"]
    kinds = [event.kind for event in store.events("ana")]
    assert kinds == ["eviction", "promotion", "delete"]
    counts = store.tier_counts("ana")
    assert (counts["midterm_active"], counts["midterm_archived"], counts["scenes"]) == (1, 1, 1)


def test_a_visit_job_counts_once_and_concurrent_ones_all_count(open_tier_store: Callable[[], TierStore]) -> None:
    store = open_tier_store()
    seqs = store.insert_turns([_turn(f"t{n}", f"sailing day {n}") for n in range(4)], None, MODEL)
    centroid = np.zeros(4, dtype=np.float32).tobytes()
    store.save_segment(_segment("seg1"), centroid, seqs[:2])
    store.save_segment(_segment("seg2"), centroid, seqs[2:3])
    store.save_segment(_segment("bobs", user_id="bob"), centroid, [])

    def heat(visits: int, turns: int) -> float:
        return visits * 10.0 + turns

    job = store.enqueue_job("visit", "ana", {})
    # A search is one visit to each segment it touched, however many of its turns it found.
    searches = [[seqs[0], seqs[1]], [seqs[1], seqs[2]], [seqs[3]], [10**9]]
    touched = {s.id: s for s in store.count_visits(job, "ana", searches, T0 + timedelta(days=1), heat)}
    assert {key: (s.visits, s.heat, s.last_activity) for key, s in touched.items()} == {
        "seg1": (2, 22.0, T0 + timedelta(days=1)),
        "seg2": (1, 12.0, T0 + timedelta(days=1)),
    }
    # Run again (a retry after a crash before the job was finished): nothing counted twice,
    # and the segments come back as they are, so the caller can still promote them.
    again = {s.id: (s.visits, s.heat) for s in store.count_visits(job, "ana", searches, T0, heat)}
    assert again == {"seg1": (2, 22.0), "seg2": (1, 12.0)}
    store.finish_job(job)
    assert store.count_visits(job, "ana", searches, T0, heat) != []
    assert store.count_visits(store.enqueue_job("visit", "ana", {}), "bob", searches, T0, heat) == []
    assert {s.id: s.visits for s in store.segments("ana")} == {"seg1": 2, "seg2": 1}, "a finished job counts nothing"

    # Two stores (two processes) counting at once lose none of each other's visits.
    stores = [store, open_tier_store()]
    jobs = [[stores[0].enqueue_job("visit", "ana", {}) for _ in range(15)] for _ in stores]
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def count(index: int) -> None:
        start.wait()
        try:
            for job_id in jobs[index]:
                stores[index].count_visits(job_id, "ana", [seqs[:1]], T0, heat)
        except BaseException as error:  # seen by the assertion below, not lost in the thread
            failures.append(error)

    threads = [threading.Thread(target=count, args=(index,)) for index in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == [] and not any(thread.is_alive() for thread in threads)
    [seg1] = [s for s in store.segments("ana") if s.id == "seg1"]
    assert (seg1.visits, seg1.heat) == (32, 322.0)


def test_rebuild_fulltext_rewrites_cell_text_an_older_version_stored(store: TierStore, storage_url: str) -> None:
    [porto_seq, lisbon_seq] = store.insert_turns(
        [_turn("t0", "I live in Porto"), _turn("t1", "Lisbon now")], None, MODEL
    )
    store.add_cell(_cell("c1", "Porto"), porto_seq, single_valued=True, supersede=[])
    store.add_cell(_cell("c2", "Lisbon", source="t1"), lisbon_seq, single_valued=True, supersede=["c1"])
    _stored_text(storage_url, "c2", "location: Lisbon — I live in Lisbon")  # the format before subjects
    _stored_text(storage_url, "c1", "location: Porto — I live in Porto")
    assert store.derived_fulltext('"user"', "ana", 10) == []

    store.rebuild_fulltext()

    hits = store.derived_fulltext('"user"', "ana", 10)  # the new text is what the index holds
    [(cell_id, _, content, _)] = store.derived_items([seq for seq, _ in hits], "ana").values()
    assert (cell_id, content) == ("c2", "user · location: Lisbon — I live in Lisbon")
    assert _stored_text(storage_url, "c1") == "user · location: Porto — I live in Porto"  # replaced ones too
    assert [seq for seq, _ in store.derived_fulltext('"lisbon"', "ana", 10)] == [seq for seq, _ in hits]
    assert store.derived_fulltext('"porto"', "ana", 10) == []  # the index still serves current cells only


def test_cells_supersede_keep_history_and_feed_the_profile(store: TierStore) -> None:
    [porto_seq, lisbon_seq] = store.insert_turns(
        [_turn("t0", "I live in Porto"), _turn("t1", "Lisbon now")], None, MODEL
    )
    store.add_cell(_cell("c1", "Porto"), porto_seq, single_valued=True, supersede=[])
    later = T0 + timedelta(days=30)
    store.add_cell(
        _cell("c2", "Lisbon", valid_from=later, source="t1"), lisbon_seq, single_valued=True, supersede=["c1"]
    )
    assert [cell.value for cell in store.current_cells("ana", "user", "location")] == ["Lisbon"]
    history = store.cells("ana", attribute="location", include_superseded=True)
    assert [(c.id, c.valid_to, c.superseded_by, c.source_turn_id) for c in history] == [
        ("c2", None, None, "t1"),
        ("c1", later, "c2", "t0"),
    ]
    assert store.cells("ana", subject="nobody") == [] and store.cells("bob") == []
    assert len(store.cells("ana", include_superseded=True, limit=1)) == 1
    hits = store.derived_fulltext('"porto" OR "lisbon"', "ana", 10)  # longterm: current cells only
    [(cell_id, tier, content, sources)] = store.derived_items([seq for seq, _ in hits], "ana").values()
    assert (cell_id, tier, sources) == ("c2", "longterm", ("t1",))
    assert content == "user · location: Lisbon — I live in Lisbon"  # storage.text.cell_text on both backends
    store.set_profile("ana", {"location": "Porto", "job": "engineer"}, porto_seq, T0)
    store.set_profile("ana", {"location": "Lisbon"}, lisbon_seq, later)
    assert store.profile("ana") == {"job": "engineer", "location": "Lisbon"}
    assert list(store.profile("ana")) == ["job", "location"] and store.profile("bob") == {}
    assert [event.kind for event in store.events("ana")] == ["supersession"]
    assert store.events("ana")[0].detail == {"old": "c1", "new": "c2"}  # ids, never what the facts say


def test_profile_entries_name_who_said_each_trait(store: TierStore) -> None:
    tim, john, anonymous = store.insert_turns(
        [
            replace(_turn("t0", "My favourite book is Dune"), name="Tim"),
            replace(_turn("t1", "I live in Seattle"), name="John"),
            _turn("t2", "I'm vegan"),
        ],
        None,
        MODEL,
    )
    store.set_profile("ana", {"favourite:book": "Dune", "location": "London"}, tim, T0)
    store.set_profile("ana", {"location": "Seattle"}, john, T0 + timedelta(days=1))
    store.set_profile("ana", {"diet": "vegan"}, anonymous, T0 + timedelta(days=2))
    assert store.profile_entries("ana") == [
        ("diet", "vegan", None),
        ("favourite:book", "Dune", "Tim"),
        ("location", "Seattle", "John"),
    ]
    assert store.profile_entries("bob") == []


def test_a_late_cell_takes_over_the_end_of_the_value_before_it(store: TierStore) -> None:
    seqs = store.insert_turns([_turn(f"t{n}", f"I live in {c}") for n, c in enumerate("PRB")], None, MODEL)
    store.add_cell(_cell("c0", "P"), seqs[0], single_valued=True, supersede=[])
    berlin = _cell("c2", "B", valid_from=T0 + timedelta(days=60), source="t2")
    store.add_cell(berlin, seqs[2], single_valued=True, supersede=["c0"])
    late = replace(_cell("c1", "R", valid_from=T0 + timedelta(days=30), source="t1"), valid_to=berlin.valid_from)
    store.add_cell(replace(late, superseded_by="c2"), seqs[1], single_valued=True, supersede=["c0", "c2"])
    history = {c.id: (c.valid_to, c.superseded_by) for c in store.cells("ana", include_superseded=True)}
    assert history == {  # c2 began after c1, so c1 does not end it
        "c0": (T0 + timedelta(days=30), "c1"),
        "c1": (T0 + timedelta(days=60), "c2"),
        "c2": (None, None),
    }
    hits = store.derived_fulltext('"b"', "ana", 10)  # c2 is still searched as current
    assert [item[0] for item in store.derived_items([seq for seq, _ in hits], "ana").values()] == ["c2"]
    assert [event.detail for event in store.events("ana")] == [  # newest first; none says c1 ended c2
        {"old": "c0", "new": "c1"},
        {"old": "c1", "new": "c2"},
        {"old": "c0", "new": "c2"},
    ]


def test_forgetting_the_newer_value_makes_the_one_it_replaced_current_again(store: TierStore) -> None:
    cities = ["Porto", "Lisbon", "Faro", "Braga"]
    seqs = store.insert_turns(
        [_turn(f"t{n}", f"I live in {city}", session="x" if n > 1 else "s") for n, city in enumerate(cities)],
        None,
        MODEL,
    )
    for n, city in enumerate(cities):  # each replaces the one before
        cell = _cell(f"c{n}", city, valid_from=T0 + timedelta(days=30 * n), source=f"t{n}")
        store.add_cell(cell, seqs[n], single_valued=True, supersede=[f"c{n - 1}"] if n else [])
    store.delete("t1", "ana")  # Porto now lasted until Faro
    history = {c.id: (c.valid_to, c.superseded_by) for c in store.cells("ana", include_superseded=True)}
    assert history == {
        "c0": (T0 + timedelta(days=60), "c2"),
        "c2": (T0 + timedelta(days=90), "c3"),
        "c3": (None, None),
    }
    store.forget(Scope("ana", session_id="x"))  # Faro and Braga at once: Porto is current again
    assert [(c.id, c.valid_to, c.superseded_by) for c in store.cells("ana", include_superseded=True)] == [
        ("c0", None, None)
    ]
    assert [c.value for c in store.current_cells("ana", "user", "location")] == ["Porto"]
    hits = store.derived_fulltext('"porto"', "ana", 10)  # searched as a current fact again
    assert [item[0] for item in store.derived_items([seq for seq, _ in hits], "ana").values()] == ["c0"]


def test_forgetting_the_turn_that_set_a_trait_brings_back_the_value_it_replaced(store: TierStore) -> None:
    porto, lisbon, _ = store.insert_turns(
        [
            _turn("t0", "I live in Porto"),
            _turn("t1", "I live in Lisbon", session="x"),
            _turn("t2", "a cat", session="x"),
        ],
        None,
        MODEL,
    )
    later = T0 + timedelta(days=30)
    store.add_cell(_cell("c0", "Porto"), porto, single_valued=True, supersede=[])
    store.set_profile("ana", {"location": "Porto"}, porto, T0)
    store.add_cell(_cell("c1", "Lisbon", valid_from=later, source="t1"), lisbon, single_valued=True, supersede=["c0"])
    store.set_profile("ana", {"location": "Lisbon", "pet": "cat"}, lisbon, later)
    store.forget(Scope("ana", session_id="x"))
    assert store.profile("ana") == {"location": "Porto"}  # no fact is left for "pet": it goes
    store.delete("t0", "ana")
    assert store.profile("ana") == {}


def test_a_cell_whose_slot_changed_since_it_was_read_is_not_stored(store: TierStore) -> None:
    [porto, lisbon, braga] = store.insert_turns(
        [_turn("t0", "I live in Porto"), _turn("t1", "I live in Lisbon"), _turn("t2", "I live in Braga")], None, MODEL
    )
    assert store.add_cell(_cell("c0", "Porto"), porto, single_valued=True, supersede=[], seen_slot={})
    # A worker that read the slot empty, before "Porto" was stored, stores nothing.
    stale = _cell("c1", "Lisbon", source="t1")
    assert not store.add_cell(stale, lisbon, single_valued=True, supersede=[], seen_slot={})
    assert [cell.id for cell in store.cells("ana", include_superseded=True)] == ["c0"]
    assert store.derived_items([seq for seq, _ in store.derived_fulltext('"lisbon"', "ana", 10)], "ana") == {}
    assert [event.kind for event in store.events("ana")] == []
    # Read again, it supersedes the current value as usual.
    assert store.add_cell(stale, lisbon, single_valued=True, supersede=["c0"], seen_slot={"c0": True})
    # A caller that saw a value since ended is refused too, as is one that missed a cell.
    braga_cell = _cell("c2", "Braga", source="t2")
    assert not store.add_cell(braga_cell, braga, single_valued=True, supersede=["c0"], seen_slot={"c0": True})
    assert not store.add_cell(braga_cell, braga, single_valued=True, supersede=[], seen_slot={"c1": True})
    assert [(cell.id, cell.is_current) for cell in store.cells("ana", include_superseded=True)] == [
        ("c1", True),
        ("c0", False),
    ]


def test_a_late_cell_whose_slot_gained_history_since_it_was_read_is_not_stored(store: TierStore) -> None:
    day = timedelta(days=10)
    [porto, lisbon, berlin] = store.insert_turns(
        [_turn("t0", "I live in Porto"), _turn("t1", "I live in Lisbon"), _turn("t2", "I live in Berlin")], None, MODEL
    )
    assert store.add_cell(
        _cell("c2", "Berlin", valid_from=T0 + 2 * day, source="t2"), berlin, single_valued=True, supersede=[]
    )
    # Two late values read the slot with Berlin alone; Lisbon is stored first, as history.
    lisbon_cell = replace(
        _cell("c1", "Lisbon", valid_from=T0 + day, source="t1"), valid_to=T0 + 2 * day, superseded_by="c2"
    )
    porto_cell = replace(_cell("c0", "Porto", source="t0"), valid_to=T0 + 2 * day, superseded_by="c2")
    assert store.add_cell(lisbon_cell, lisbon, single_valued=True, supersede=[], seen_slot={"c2": True})
    assert not store.add_cell(porto_cell, porto, single_valued=True, supersede=[], seen_slot={"c2": True})
    assert [cell.id for cell in store.cells("ana", include_superseded=True)] == ["c2", "c1"]


def test_a_slot_is_read_whole_without_a_limit(store: TierStore) -> None:
    seqs = store.insert_turns([_turn(f"t{n}", f"I like sport {n}") for n in range(502)], None, MODEL)
    for n, seq in enumerate(seqs):
        cell = replace(_cell(f"c{n}", f"sport {n}", source=f"t{n}"), attribute="likes")
        store.add_cell(cell, seq, single_valued=False, supersede=[])
    assert len(store.current_cells("ana", "user", "likes")) == 502
    assert len(store.cells("ana", attribute="likes", include_superseded=True, limit=None)) == 502
    assert len(store.cells("ana", attribute="likes")) == 500  # the default limit of a listing


def test_importance_scores_and_neighbouring_turns(store: TierStore) -> None:
    turns = [_turn("t0", "first"), _turn("t1", "reply", role=Role.ASSISTANT), _turn("t2", "second")]
    turns.append(Turn(id="t3", user_id="ana", role=Role.USER, content="pinned", created_at=T0, importance=0.9))
    seqs = store.insert_turns(turns, np.eye(4, 4, dtype=np.float32), MODEL)
    store.set_importance({seqs[0]: 0.5, seqs[3]: 0.1})
    store.set_importance({seqs[0]: 0.25})
    assert store.importance_of(seqs) == {seqs[0]: 0.25, seqs[3]: 0.9}
    assert store.previous_user_text("ana", "s", seqs[2]) == "first"
    assert store.previous_user_text("ana", "s", seqs[0]) is None
    assert store.previous_user_text("ana", None, seqs[3] + 1) == "pinned"
    recent = store.recent_vectors(MODEL, "ana", seqs[2], 5)
    assert [np.frombuffer(blob, dtype=np.float32).tolist() for blob in recent] == [
        [0.0, 1.0, 0.0, 0.0],
        [1.0, 0.0, 0.0, 0.0],
    ]


def test_patterns_and_entities_count_and_connect(store: TierStore) -> None:
    seqs = store.insert_turns([_turn("t0", "Caroline met Melanie"), _turn("t1", "Caroline again")], None, MODEL)
    later = T0 + timedelta(days=2)
    store.observe_pattern(
        "ana", seqs[0], "code_first", description="wants code first", evidence="give me the code", when=T0
    )
    store.observe_pattern(
        "ana", seqs[1], "code_first", description="wants code first", evidence="code please", when=later
    )
    store.observe_pattern(
        "ana", seqs[1], "code_first", description="wants code first", evidence="code please", when=later
    )  # a retry
    [(key, description, count, first, last, evidence)] = store.pattern_rows("ana")
    assert (key, description, count, first, last, evidence) == (
        "code_first",
        "wants code first",
        2,
        T0,
        later,
        "code please",
    )
    store.add_entities("ana", seqs[0], [("Caroline", "other"), ("Melanie", "person"), ("Caroline", "other")], T0)
    store.add_entities("ana", seqs[1], [("Caroline", "person")], later)
    store.add_entities("ana", seqs[1], [("Caroline", "person")], later)  # the same mention again counts once
    nodes = store.entities("ana")
    assert [(n.name, n.kind, n.mentions, n.first_seen, n.last_seen) for n in nodes] == [
        ("Caroline", "person", 2, T0, later),
        ("Melanie", "person", 1, T0, T0),
    ]
    assert [n.name for n in store.entities("ana", names=["caroline"])] == ["Caroline"]
    assert store.entities("ana", names=[]) == [] and store.entities("bob") == []
    [edge] = store.neighbours("ana", ["MELANIE"])
    assert {edge.source, edge.target} == {"Caroline", "Melanie"} and edge.weight == 1
    assert store.neighbours("ana", []) == [] and store.neighbours("bob", ["Caroline"]) == []
    counts = store.tier_counts("ana")
    assert (counts["patterns"], counts["entities"]) == (1, 2)


def test_entity_name_vectors_are_kept_per_model_and_read_with_their_mentions(store: TierStore) -> None:
    seqs = store.insert_turns([_turn("t0", "Spain with Caroline"), _turn("t1", "Spain again")], None, MODEL)
    store.add_entities("ana", seqs[0], [("Spain", "place"), ("Caroline", "person")], T0)
    store.add_entities("ana", seqs[1], [("Spain", "place")], T0)
    [bobs] = store.insert_turns([_turn("b0", "Oslo", user_id="bob")], None, MODEL)
    store.add_entities("bob", bobs, [("Oslo", "place")], T0)
    missing = store.entities_without_vectors("ana", MODEL, 10)
    assert [name for _, name in missing] == ["Spain", "Caroline"]  # most mentioned first
    assert [name for _, name in store.entities_without_vectors("ana", MODEL, 1)] == ["Spain"]
    ids = dict((name, entity_id) for entity_id, name in missing)
    spain = np.array([1, 0, 0], dtype=np.float32)
    store.save_entity_vectors(MODEL, {ids["Spain"]: spain, 10**9: spain})  # an unknown id is skipped
    assert [name for _, name in store.entities_without_vectors("ana", MODEL, 10)] == ["Caroline"]
    assert [name for _, name in store.entities_without_vectors("ana", "other-model", 10)] == ["Spain", "Caroline"]
    [(entity_id, name, vector)] = store.entity_vectors("ana", MODEL)
    assert (entity_id, name) == (ids["Spain"], "Spain") and vector.tolist() == [1.0, 0.0, 0.0]
    store.save_entity_vectors(MODEL, {ids["Spain"]: np.array([0, 1, 0], dtype=np.float32)})  # replaced
    assert store.entity_vectors("ana", MODEL)[0][2].tolist() == [0.0, 1.0, 0.0]
    assert store.entity_vectors("bob", MODEL) == [] and store.entity_vectors("ana", "other-model") == []
    assert store.entity_mention_seqs("ana", [ids["Spain"], ids["Caroline"]]) == {
        ids["Spain"]: seqs,
        ids["Caroline"]: [seqs[0]],
    }
    [(oslo, _)] = store.entities_without_vectors("bob", MODEL, 10)
    assert store.entity_mention_seqs("ana", [oslo]) == {}  # another user's entity reads nothing
    assert store.entity_mention_seqs("ana", []) == {}


def test_an_entity_retired_or_forgotten_takes_its_name_vector_with_it(store: TierStore, storage_url: str) -> None:
    seqs = store.insert_turns([_turn("t0", "Zanzibar with Caroline"), _turn("t1", "Caroline again")], None, MODEL)
    store.add_entities("ana", seqs[0], [("Zanzibar", "place"), ("Caroline", "person")], T0)
    store.add_entities("ana", seqs[1], [("Caroline", "person")], T0)
    one = np.ones(3, dtype=np.float32)
    missing = store.entities_without_vectors("ana", MODEL, 9)
    store.save_entity_vectors(MODEL, {entity_id: one for entity_id, _ in missing})
    assert _rows(storage_url, "entity_vectors") == 2
    store.delete("t0", "ana")  # Zanzibar's only mention
    assert [name for _, name, _ in store.entity_vectors("ana", MODEL)] == ["Caroline"]
    assert _rows(storage_url, "entity_vectors") == 1
    store.forget(Scope("ana"))
    assert _rows(storage_url, "entity_vectors") == 0


def test_fact_vectors_are_kept_per_model_and_read_for_current_facts(store: TierStore) -> None:
    porto, lisbon = store.insert_turns(
        [_turn("t0", "I live in Porto, I like jazz"), _turn("t1", "Lisbon now")], None, MODEL
    )
    later = T0 + timedelta(days=30)
    store.add_cell(_cell("c1", "Porto"), porto, single_valued=True, supersede=[])
    jazz = replace(_cell("c3", "jazz"), attribute="likes:jazz", content="I like jazz")
    store.add_cell(jazz, porto, single_valued=False, supersede=[])
    store.add_cell(_cell("c2", "Lisbon", valid_from=later, source="t1"), lisbon, single_valued=True, supersede=["c1"])
    [bobs] = store.insert_turns([_turn("b0", "I live in Oslo", user_id="bob")], None, MODEL)
    store.add_cell(replace(_cell("b1", "Oslo", source="b0"), user_id="bob"), bobs, single_valued=True, supersede=[])
    # Current facts only (c1 was superseded), newest first.
    assert [cell.id for cell in store.cells_without_vectors("ana", MODEL, 10)] == ["c2", "c3"]
    assert [cell.id for cell in store.cells_without_vectors("ana", MODEL, 1)] == ["c2"]
    east, west = np.array([1, 0, 0], dtype=np.float32), np.array([0, 1, 0], dtype=np.float32)
    store.save_cell_vectors(MODEL, {"c2": east, "c1": east, "gone": east})  # an unknown id is skipped
    assert [cell.id for cell in store.cells_without_vectors("ana", MODEL, 10)] == ["c3"]
    assert [cell.id for cell in store.cells_without_vectors("ana", "other-model", 10)] == ["c2", "c3"]
    [(seq, subject, vector)] = store.cell_vectors("ana", MODEL)  # c1 has one too, but is no longer current
    [(found, _)] = store.derived_fulltext('"lisbon"', "ana", 10)
    assert (seq, subject) == (found, "user") and vector.tolist() == [1.0, 0.0, 0.0]  # the seq search ranks the fact by
    store.save_cell_vectors(MODEL, {"c2": west})  # replaced
    assert store.cell_vectors("ana", MODEL)[0][2].tolist() == [0.0, 1.0, 0.0]
    assert store.cell_vectors("ana", "other-model") == [] and store.cell_vectors("bob", MODEL) == []
    assert [cell.id for cell in store.cells_without_vectors("bob", MODEL, 10)] == ["b1"]


def test_a_fact_deleted_rehomed_or_forgotten_takes_its_vector_with_it(store: TierStore, storage_url: str) -> None:
    first, again, jazz_turn = store.insert_turns(
        [_turn("t0", "I live in Porto"), _turn("t1", "I live in Porto"), _turn("t2", "I like jazz")], None, MODEL
    )
    store.add_cell(_cell("c1", "Porto"), first, single_valued=True, supersede=[])
    assert store.restate_cell("ana", "c1", again, "Porto", "I live in Porto")
    jazz = replace(_cell("c3", "jazz", source="t2"), attribute="likes:jazz", content="I like jazz")
    store.add_cell(jazz, jazz_turn, single_valued=False, supersede=[])
    one = np.ones(3, dtype=np.float32)
    store.save_cell_vectors(MODEL, {"c1": one, "c3": one})
    assert _rows(storage_url, "cell_vectors") == 2
    # The fact stays, said again by t1, but its vector was made from what t0 said: it goes, to be made again.
    store.delete("t0", "ana")
    assert [cell.id for cell in store.cells_without_vectors("ana", MODEL, 10)] == ["c1"]
    assert _rows(storage_url, "cell_vectors") == 1
    store.delete("t2", "ana")  # the jazz fact goes, and its vector with it
    assert _rows(storage_url, "cell_vectors") == 0 and store.cell_vectors("ana", MODEL) == []
    store.save_cell_vectors(MODEL, {"c1": one})
    store.forget(Scope("ana"))
    assert _rows(storage_url, "cell_vectors") == 0


def _rows(storage_url: str, table: str) -> int:
    """How many rows a table of the database holds, for any user."""
    if storage_url.startswith("sqlite:///"):
        with closing(sqlite3.connect(storage_url.removeprefix("sqlite:///"))) as connection:
            return int(connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    import psycopg

    with psycopg.connect(storage_url) as connection:
        row = connection.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert row is not None
        return int(row[0])


def test_consolidations_link_their_turns(store: TierStore) -> None:
    seqs = store.insert_turns([_turn(f"t{n}", f"garden shed roof leak number {n}") for n in range(4)], None, MODEL)
    assert store.unconsolidated_turns("ana", 10) == seqs
    assert store.unconsolidated_size("ana") == (4, 24)
    made = Consolidation(
        id="k1",
        user_id="ana",
        summary="The shed roof leaks.",
        source_turn_ids=("t0", "t1", "t2"),
        compression_ratio=0.5,
        entity_preservation=1.0,
        tes=0.75,
        created_at=T0,
    )
    assert store.add_consolidation(made, seqs[:3])
    # A second sleep that read the same turns before the first stored its summary stores nothing.
    overlapping = Consolidation(
        id="k2",
        user_id="ana",
        summary="The roof.",
        source_turn_ids=("t2", "t3"),
        compression_ratio=0.5,
        entity_preservation=1.0,
        tes=0.75,
        created_at=T0,
    )
    assert not store.add_consolidation(overlapping, seqs[2:])
    assert store.consolidations("ana") == [made]
    assert store.consolidations("bob") == []
    assert store.unconsolidated_turns("ana", 10) == seqs[3:]
    assert store.unconsolidated_size("ana") == (1, 6)
    hits = store.derived_fulltext('"shed"', "ana", 5, ("consolidation",))
    [(item_id, tier, _, sources)] = store.derived_items([seq for seq, _ in hits], "ana").values()
    assert (item_id, tier, sources) == ("k1", "consolidation", ("t0", "t1", "t2"))
    assert store.events("ana")[0].detail == {"id": "k1", "turns": 3, "tes": 0.75}


def test_a_sleep_takes_the_turns_no_sleep_looked_at_oldest_first_then_the_newest_older_ones(
    store: TierStore,
) -> None:
    seqs = store.insert_turns([_turn(f"t{n}", f"garden shed number {n}") for n in range(6)], None, MODEL)
    assert store.unconsolidated_turns("ana", 2) == seqs[:2]  # none looked at yet: a backlog, in order
    assert store.unconsolidated_turns("ana", 2, after_seq=seqs[3]) == seqs[4:]
    # Room left goes to the newest turns an earlier sleep could not cluster.
    assert store.unconsolidated_turns("ana", 4, after_seq=seqs[3]) == seqs[2:]
    assert store.unconsolidated_turns("ana", 10, after_seq=seqs[-1]) == seqs
    assert store.unconsolidated_turns("bob", 10) == []
    store.mark_slept("ana", seqs[3])
    store.mark_slept("ana", seqs[1])  # never moves back
    store.mark_slept("bob", seqs[5])  # a user without turns (forgotten meanwhile) leaves no mark
    assert (store.slept_through("ana"), store.slept_through("bob")) == (seqs[3], 0)


# -- deletion reaches every tier ----------------------------------------------------------------


def _populate(store: TierStore) -> list[int]:
    seqs = store.insert_turns(
        [_turn("t0", "I live in Porto"), _turn("t1", "Caroline says hi"), _turn("t2", "sailing talk", session="x")],
        np.eye(3, 4, dtype=np.float32),
        MODEL,
        working_capacity=10,
    )
    store.add_cell(_cell("c1", "Porto"), seqs[0], single_valued=True, supersede=[])
    store.set_profile("ana", {"location": "Porto"}, seqs[0], T0)
    store.add_entities("ana", seqs[1], [("Caroline", "person")], T0)
    store.save_segment(_segment("seg1"), b"", seqs[:2])
    store.add_consolidation(
        Consolidation(
            id="k1",
            user_id="ana",
            summary="summary",
            source_turn_ids=("t0", "t1"),
            compression_ratio=0.5,
            entity_preservation=0.5,
            tes=0.5,
            created_at=T0,
        ),
        seqs[:2],
    )
    store.set_importance({seq: 0.5 for seq in seqs})
    return seqs


def test_deleting_a_turn_purges_what_was_derived_from_it(store: TierStore) -> None:
    seqs = _populate(store)
    while (job := store.claim_job(60)) is not None:
        store.finish_job(job.id)
    assert store.delete("t0", "ana") == seqs[0]
    assert store.cells("ana", include_superseded=True) == [] and store.profile("ana") == {}
    assert store.segments("ana") == [] and store.consolidations("ana") == []
    assert store.derived_fulltext('"porto" OR "summary" OR "sailing"', "ana", 10, ("longterm", "midterm")) == []
    assert store.working_seqs("ana") == seqs[1:]
    job = store.claim_job(60)  # the deleted segment's other turn goes back to mid-term
    assert job is not None and (job.kind, job.payload) == ("midterm", {"seqs": [seqs[1]]})
    assert store.importance_of(seqs) == {seqs[1]: 0.5, seqs[2]: 0.5}
    assert store.events("ana")[0].kind == "delete"


def test_deleting_a_turn_retires_the_entities_only_it_mentioned(store: TierStore) -> None:
    seqs = store.insert_turns([_turn("t0", "Zanzibar with Caroline"), _turn("t1", "Caroline again")], None, MODEL)
    store.add_entities("ana", seqs[0], [("Zanzibar", "place"), ("Caroline", "person")], T0)
    store.add_entities("ana", seqs[1], [("Caroline", "person")], T0)
    store.delete("t0", "ana")
    assert [(n.name, n.mentions) for n in store.entities("ana")] == [("Caroline", 1)]
    assert store.neighbours("ana", ["Caroline"]) == []


def test_deleting_a_turn_takes_back_the_co_occurrences_it_made(store: TierStore) -> None:
    texts = ["Alice is dating Bob", "Alice and Bob at lunch", "Alice with Bob and Carol", "Alice at the gym"]
    seqs = store.insert_turns([_turn(f"t{n}", text) for n, text in enumerate(texts)], None, MODEL)
    for seq, names in zip(
        seqs, [["Alice", "Bob"], ["Alice", "Bob"], ["Alice", "Bob", "Carol"], ["Alice"]], strict=True
    ):
        store.add_entities("ana", seq, [(name, "person") for name in names], T0)
    [bobs] = store.insert_turns([_turn("b0", "Alice and Bob", user_id="bob")], None, MODEL)
    store.add_entities("bob", bobs, [("Alice", "person"), ("Bob", "person")], T0)
    assert {(e.source, e.target, e.weight) for e in store.neighbours("ana", ["Alice"])} == {
        ("Alice", "Bob", 3),
        ("Alice", "Carol", 1),
    }
    store.delete("t2", "ana")  # Carol's only turn, and one of Alice and Bob's three
    assert {(e.source, e.target, e.weight) for e in store.neighbours("ana", ["Alice"])} == {("Alice", "Bob", 2)}
    store.delete("t0", "ana")
    store.delete("t1", "ana")  # Bob's last mention: no edge is left
    assert store.neighbours("ana", ["Alice", "Bob"]) == []
    assert {(n.name, n.mentions) for n in store.entities("ana")} == {("Alice", 1)}
    assert [(e.source, e.target, e.weight) for e in store.neighbours("bob", ["Alice"])] == [("Alice", "Bob", 1)]


def test_deleting_a_turn_takes_back_its_pattern_occurrence(store: TierStore) -> None:
    seqs = store.insert_turns([_turn(f"t{n}", f"give me the code {n}") for n in range(3)], None, MODEL)
    for n, seq in enumerate(seqs):
        store.observe_pattern(
            "ana", seq, "code_first", description="wants code first", evidence=f"code {n}", when=T0 + timedelta(days=n)
        )
    store.observe_pattern("ana", seqs[0], "terse", description="writes tersely", evidence="code 0", when=T0)
    [bobs] = store.insert_turns([_turn("b0", "give me the code", user_id="bob")], None, MODEL)
    store.observe_pattern("bob", bobs, "terse", description="writes tersely", evidence="not ana's", when=T0)
    store.observe_pattern(
        "bob", seqs[1], "terse", description="writes tersely", evidence="ana's turn", when=T0
    )  # not bob's: not counted
    store.delete("t2", "ana")
    rows = {row[0]: row[2:] for row in store.pattern_rows("ana")}
    assert rows == {
        "code_first": (2, T0, T0 + timedelta(days=1), "code 1"),
        "terse": (1, T0, T0, "code 0"),
    }
    store.delete("t0", "ana")
    assert [row[0:3] for row in store.pattern_rows("ana")] == [("code_first", "wants code first", 1)]
    assert [row[2] for row in store.pattern_rows("bob")] == [1]
    # A job that read t0 before it was deleted observes it afterwards: nothing is counted.
    store.observe_pattern("ana", seqs[0], "terse", description="writes tersely", evidence="code 0", when=T0)
    store.observe_pattern("ana", seqs[0], "code_first", description="wants code first", evidence="code 0", when=T0)
    assert [row[0:3] for row in store.pattern_rows("ana")] == [("code_first", "wants code first", 1)]


def test_forgetting_a_user_empties_every_tier_and_spares_others(store: TierStore) -> None:
    _populate(store)
    store.insert_turns([_turn("b0", "I live in Oslo", user_id="bob")], None, MODEL, working_capacity=10)
    assert store.forget(Scope("ana")) == 3
    assert all(value == 0 for value in store.tier_counts("ana").values()), store.tier_counts("ana")
    assert store.count_jobs("ana") == 0 and store.count_jobs("bob") == 1
    assert store.tier_counts("bob")["episodic"] == 1
    assert store.events("ana")[0].detail == {"agent_id": None, "session_id": None, "turns": 3}


def test_forgetting_a_session_keeps_the_rest(store: TierStore) -> None:
    seqs = _populate(store)
    assert store.forget(Scope("ana", session_id="x")) == 1
    assert store.tier_counts("ana")["episodic"] == 2
    assert [c.id for c in store.cells("ana")] == ["c1"] and [s.id for s in store.segments("ana")] == ["seg1"]
    assert store.working_seqs("ana") == seqs[:2]


# -- retention -------------------------------------------------------------------------------------


def test_prune_each_tier_by_age_and_count(store: TierStore) -> None:
    turns = [
        Turn(id=f"t{n}", user_id="ana", role=Role.USER, content=f"note {n}", created_at=T0 + timedelta(days=n))
        for n in range(5)
    ]
    seqs = store.insert_turns(turns, None, MODEL)
    store.insert_turns([_turn("b0", "bob's note", user_id="bob")], None, MODEL)
    for n, seq in enumerate(seqs[:3]):
        later = T0 + timedelta(days=n)
        store.add_cell(
            _cell(f"c{n}", f"City{n}", valid_from=later, source=f"t{n}"),
            seq,
            single_valued=True,
            supersede=[f"c{n - 1}"] if n else [],
        )
    assert store.prune("ana", "longterm", None, 1) == 1  # superseded cells: c1 and c0; keep c1
    assert [c.id for c in store.cells("ana", include_superseded=True)] == ["c2", "c1"]
    assert store.prune("ana", "longterm", T0 + timedelta(days=10), None) == 1
    assert [c.id for c in store.cells("ana", include_superseded=True)] == ["c2"]
    store.save_segment(_segment("old", state="archived"), b"", [])
    store.save_segment(_segment("live"), b"", [])
    assert store.prune("ana", "midterm", T0 + timedelta(days=10), None) == 1
    assert [s.id for s in store.segments("ana")] == ["live"]
    assert store.prune("ana", "episodic", T0 + timedelta(days=1), None) == 1
    assert store.prune("ana", "episodic", None, 2) == 2
    assert [turn.id for turn in store.history(Scope("ana"), limit=10)] == ["t3", "t4"]
    assert store.history(Scope("bob"), limit=10)[0].id == "b0"
    assert store.prune("ana", "episodic", None, 2) == 0
    retention = [event.detail for event in store.events("ana") if event.kind == "retention"]
    assert retention[0] == {"tier": "episodic", "items": 2, "cutoff": None, "keep_last": 2}
    assert retention[1]["cutoff"] == "2024-01-02T00:00:00.000000+00:00"
