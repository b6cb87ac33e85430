"""The memory hierarchy end to end: working overflow, segments, cells, supersession, sleep, forgetting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memstrata import InvalidInput, Memory, NotFound, StorageError
from memstrata.embeddings.base import Vectors
from memstrata.embeddings.hashing import HashEmbedder
from memstrata.models import Cell, Consolidation
from memstrata.tiers import consolidation as consolidation_module
from memstrata.tiers import longterm as longterm_module
from memstrata.tiers import midterm as midterm_module
from memstrata.tiers.consolidation import without_labels
from tests.fakes import FakeLLM
from tests.inputs import distinct_words
from tests.races import after_first_read

USER = "ana"


#: The hash embedder scores two sentences on one topic about 0.45–0.7, on two topics below 0.35.
HASHED_TOPICS = {"segment_similarity": 0.4}


@pytest.fixture
def tiered(home: Path) -> Iterator[Memory]:
    """A Memory whose tier work runs on flush(), with a small working set."""
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=2, **HASHED_TOPICS) as opened:
        yield opened


def _exchange(memory: Memory, user_text: str, reply: str = "Noted.", session: str = "s1", **kwargs: object) -> None:
    memory.add(
        [{"role": "user", "content": user_text}, {"role": "assistant", "content": reply}],
        user_id=USER,
        session_id=session,
        **kwargs,  # type: ignore[arg-type]
    )


def test_working_overflow_moves_every_turn_to_midterm(tiered: Memory) -> None:
    texts = [f"Exchange number {n} is about topic{n} and nothing else" for n in range(6)]
    for text in texts:
        _exchange(tiered, text)
    tiered.flush()
    report = tiered.inspect(user_id=USER)
    working_ids = {turn.id for turn in report.working}
    assert len(report.working) == 4  # the last two exchanges, two turns each
    all_turns = tiered.history(user_id=USER)
    assert len(all_turns) == 12
    in_segments: set[str] = set()
    for hit in tiered.search("Exchange number topic", user_id=USER, limit=50, tiers=("midterm",)):
        if hit.tier == "midterm":
            in_segments |= set(hit.source_turn_ids)
    assert report.counts["midterm_active"] + report.counts["midterm_archived"] >= 1
    # Every turn is either still working or filed in a segment: nothing was dropped.
    assert working_ids | in_segments == {turn.id for turn in all_turns}


def test_an_exchange_filed_twice_at_once_lands_in_one_segment(tiered: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    _exchange(tiered, "We sailed to Cascais for the regatta.")
    seqs = tiered.parts.store.working_seqs(USER)
    hierarchy, store = tiered.parts.hierarchy, tiered.parts.store
    # Another worker files the same exchange right after this one read the segments.
    raced = after_first_read(monkeypatch, store, "active_segments", lambda: hierarchy.to_midterm(USER, seqs))
    hierarchy.to_midterm(USER, seqs)
    hierarchy.to_midterm(USER, seqs)  # and a retry later
    filed = [sorted(store.segment_turn_seqs(segment.id)) for segment in store.segments(USER, limit=100)]
    assert raced and filed == [sorted(seqs)]


def test_a_filing_that_read_a_segment_before_another_filing_changed_it_is_redone(
    tiered: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    _exchange(tiered, "We sailed to Cascais for the regatta.")
    first = tiered.parts.store.working_seqs(USER)
    hierarchy, store = tiered.parts.hierarchy, tiered.parts.store
    hierarchy.to_midterm(USER, first)
    _exchange(tiered, "The regatta in Cascais was windy, we sailed again.")
    _exchange(tiered, "Cascais regatta sailing: we won the second race.")
    second, third = (seqs := [seq for seq in store.working_seqs(USER) if seq not in first])[:2], seqs[2:]
    # Another worker files the third exchange into the same segment right after this read.
    raced = after_first_read(monkeypatch, store, "active_segment", lambda: hierarchy.to_midterm(USER, third))
    hierarchy.to_midterm(USER, second)
    [segment] = store.segments(USER, limit=100)
    assert raced and sorted(store.segment_turn_seqs(segment.id)) == sorted([*first, *second, *third])
    assert segment.turn_count == 6, "the summary and count cover every linked turn"


def test_a_filing_that_keeps_losing_races_fails_so_its_job_is_tried_again(
    tiered: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    _exchange(tiered, "We sailed to Cascais for the regatta.")
    monkeypatch.setattr("memstrata.tiers.midterm.FILING_PAUSE_SECONDS", 0.0)
    monkeypatch.setattr(tiered.parts.store, "save_segment", lambda *args, **kwargs: False)
    with pytest.raises(StorageError, match="could not be filed"):
        tiered.parts.hierarchy.to_midterm(USER, tiered.parts.store.working_seqs(USER))


def test_turns_in_an_archived_segment_are_not_filed_again(tiered: Memory) -> None:
    _exchange(tiered, "We sailed to Cascais for the regatta.")
    seqs = tiered.parts.store.working_seqs(USER)
    tiered.parts.hierarchy.to_midterm(USER, seqs)
    [segment] = tiered.parts.store.segments(USER, limit=100)
    tiered.parts.store.archive_segments(USER, [segment.id], {segment.id: 0.0})
    tiered.parts.hierarchy.to_midterm(USER, seqs)  # a late retry of the same job
    assert [item.state for item in tiered.parts.store.segments(USER, limit=100)] == ["archived"]


SAILING = [
    "The sailing regatta in Cascais starts at nine, sailing boats everywhere.",
    "Our sailing crew trained for the Cascais regatta all week.",
    "The regatta boats in Cascais had the best sailing wind.",
]
TAXES = [
    "The tax return is due in April, with receipts and invoices.",
    "My accountant wants the invoices and receipts for the tax return.",
    "Filing the tax return needs every invoice and receipt.",
]


def _filed(memory: Memory, user_id: str) -> list[list[str]]:
    """Each segment's turns, as their texts, in the order the segments were made."""
    store = memory.parts.store
    segments = sorted(store.segments(user_id, limit=100), key=lambda item: item.created_at)
    texts = []
    for segment in segments:
        seqs = store.segment_turn_seqs(segment.id)  # type: ignore[attr-defined]
        texts.append([turn.content for turn in store.get_by_seqs(seqs, user_id).values() if turn.role.value == "user"])
    return texts


def test_a_bulk_add_is_filed_by_topic_as_one_add_per_exchange_would_be(home: Path) -> None:
    said = [*SAILING, *TAXES, "Back to sailing: the Cascais regatta results are in, great sailing."]
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1, **HASHED_TOPICS) as memory:
        for text in said:
            memory.add(
                [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}],
                user_id="one-by-one",
            )
        memory.add(
            [
                item
                for text in said
                for item in ({"role": "user", "content": text}, {"role": "assistant", "content": "Noted."})
            ],
            user_id="at-once",
        )
        memory.add([{"role": "user", "content": "Anything else?"}], user_id="one-by-one")
        memory.add([{"role": "user", "content": "Anything else?"}], user_id="at-once")
        memory.flush()
        one_by_one, at_once = _filed(memory, "one-by-one"), _filed(memory, "at-once")
    assert at_once == one_by_one
    assert len(at_once) == 2, at_once  # sailing (with the exchange that came back to it), then taxes
    assert set(TAXES) == set(at_once[1])


def _one_by_one(memory: Memory, user_id: str, said: list[str]) -> list[list[str]]:
    for text in said:
        memory.add([{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}], user_id=user_id)
    memory.add([{"role": "user", "content": "Anything else?"}], user_id=user_id)  # pushes the last one out
    memory.flush()
    return _filed(memory, user_id)


def test_an_exchange_without_a_topic_stays_in_the_current_segment(home: Path) -> None:
    said = [*SAILING[:2], "Thanks!", "Ok, great.", SAILING[2], *TAXES[:2], "Thanks, that helps!"]
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1, **HASHED_TOPICS) as memory:
        filed = _one_by_one(memory, "u", said)
    assert filed == [[*SAILING[:2], "Thanks!", "Ok, great.", SAILING[2]], [*TAXES[:2], "Thanks, that helps!"]]


def test_returning_to_an_earlier_topic_takes_more_than_staying_on_the_current_one(home: Path) -> None:
    back = "Back to sailing: the Cascais regatta results are in, great sailing."
    said = [*SAILING, *TAXES, back]
    # "back" has a cosine of 0.67 with the sailing segment: enough to stay on it, not to return to it.
    topics = {"segment_similarity": 0.7, "segment_continue_similarity": 0.4}
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1, **topics) as memory:
        assert _one_by_one(memory, "returns", said) == [SAILING, TAXES, [back]]
        assert _one_by_one(memory, "stays", [*SAILING, back]) == [[*SAILING, back]]


def test_an_aside_whose_next_exchange_comes_back_stays_in_the_current_segment(home: Path) -> None:
    # When the aside leaves working memory, the sailing line after it is still there: it was
    # said, so it tells that the conversation came back (cosine over 0.45, halfway between 0.4
    # to stay and 0.5 to join). Two tax lines are a topic of their own: the first is followed by
    # the second, not by sailing, and the sailing line after them returns to the sailing segment.
    aside = TAXES[0]
    topics = {"segment_similarity": 0.5, "segment_continue_similarity": 0.4}
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1, **topics) as memory:
        assert _one_by_one(memory, "aside", [*SAILING[:2], aside, SAILING[2]]) == [[*SAILING[:2], aside, SAILING[2]]]
        assert _one_by_one(memory, "two", [*SAILING[:2], *TAXES[:2], SAILING[2]]) == [SAILING, TAXES[:2]]
        memory.add(
            [
                item
                for text in [*SAILING[:2], aside, SAILING[2], "Anything else?"]
                for item in ({"role": "user", "content": text}, {"role": "assistant", "content": "Noted."})
            ],
            user_id="at-once",
        )
        memory.flush()
        assert _filed(memory, "at-once") == [[*SAILING[:2], aside, SAILING[2]]]


class ChosenVectors(HashEmbedder):
    """Three-dimensional vectors: the ones given for their texts, the hash embedder's for the rest."""

    def __init__(self, chosen: dict[str, list[float]]) -> None:
        super().__init__(dimension=3)
        self._chosen = {
            text: np.asarray(vector, dtype=np.float32) / np.linalg.norm(vector) for text, vector in chosen.items()
        }

    @property
    def model_id(self) -> str:
        return "chosen-3"

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        hashed = super().embed_documents(texts)
        return np.stack([self._chosen.get(text, hashed[index]) for index, text in enumerate(texts)])


def test_an_aside_does_not_steer_its_segment_away_from_the_exchange_that_came_back(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sailing line that comes back has a cosine of 0.70 with the sailing line before the aside
    # (over 0.65, halfway between 0.5 and 0.8), but only 0.49 with the mean of that line and the aside.
    sailing, aside, back = SAILING[0], "Remind me to pay the electricity bill tomorrow.", SAILING[1]
    embedder = ChosenVectors({sailing: [1, 0, 0], aside: [0, 1, 0], back: [0.7, 0, 0.714]})
    topics = {"segment_similarity": 0.8, "segment_continue_similarity": 0.5}
    filings: list[int] = []
    filing = midterm_module.MidTerm._file

    def counted(self: midterm_module.MidTerm, user_id: str, seqs: Sequence[int], now: datetime) -> bool:
        filings.append(len(seqs))
        return filing(self, user_id, seqs, now)

    monkeypatch.setattr(midterm_module.MidTerm, "_file", counted)
    with Memory(home, embedder=embedder, background=False, working_capacity=1, **topics) as memory:
        assert _one_by_one(memory, "one-by-one", [sailing, aside, back]) == [[sailing, aside, back]]
        assert len(filings) == 3
        said = [sailing, aside, back, "Anything else?"]
        memory.add(
            [
                item
                for text in said
                for item in ({"role": "user", "content": text}, {"role": "assistant", "content": "Noted."})
            ],
            user_id="at-once",
        )
        memory.flush()
        assert _filed(memory, "at-once") == [[sailing, aside, back]]
    assert filings[3:] == [6]  # one run, filed at once: the aside does not split the batch either


def test_the_current_segment_is_the_one_of_the_turn_said_before_even_when_all_share_a_time(home: Path) -> None:
    # As in an import of a day's chat: every turn has the session's date. The last line has a
    # cosine of 0.47 with the tax segment: enough to stay on it, not to return to it.
    follow_up = "The accountant needs the April paperwork soon."
    said = [*SAILING, *TAXES, follow_up]
    day = datetime(2024, 3, 1, tzinfo=UTC)
    topics = {"segment_similarity": 0.7, "segment_continue_similarity": 0.4}
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1, **topics) as memory:
        for text in [*said, "Anything else?"]:
            memory.add([{"role": "user", "content": text}], user_id="u", timestamp=day)
        memory.flush()
        assert _filed(memory, "u") == [SAILING, [*TAXES, follow_up]]


def test_exchanges_without_a_topic_do_not_steer_their_segment(home: Path) -> None:
    fillers = ["Thanks!", "Ok, great.", "Haha, nice.", "Wow!", "Right."]
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1, **HASHED_TOPICS) as memory:
        filed = _one_by_one(memory, "u", [SAILING[0], *fillers, SAILING[1]])
    assert filed == [[SAILING[0], *fillers, SAILING[1]]]


def test_each_session_follows_its_own_topic(home: Path) -> None:
    # Two conversations at once, interleaved: each exchange continues its own session's segment.
    topics = {"segment_similarity": 0.7, "segment_continue_similarity": 0.4}
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1, **topics) as memory:
        for sailing, taxes in zip(SAILING, TAXES, strict=True):
            memory.add([{"role": "user", "content": sailing}], user_id="u", session_id="boat")
            memory.add([{"role": "user", "content": taxes}], user_id="u", session_id="office")
        memory.add([{"role": "user", "content": "Anything else?"}], user_id="u", session_id="boat")
        memory.add([{"role": "user", "content": "Anything else?"}], user_id="u", session_id="office")
        memory.flush()
        assert _filed(memory, "u") == [SAILING, TAXES]


def test_after_a_pause_an_exchange_without_a_topic_starts_afresh(home: Path) -> None:
    start = datetime(2024, 3, 1, 9, tzinfo=UTC)
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1, **HASHED_TOPICS) as memory:
        for minutes, text in ((0, SAILING[0]), (5, "Thanks!"), (300, "Hello again!"), (301, "Anything else?")):
            moment = start + timedelta(minutes=minutes)
            memory.add([{"role": "user", "content": text}], user_id="u", session_id="s", timestamp=moment)
        memory.flush()
        assert _filed(memory, "u") == [[SAILING[0], "Thanks!"], ["Hello again!"]]


def test_exchanges_leaving_together_across_a_pause_or_sessions_are_filed_as_one_at_a_time(home: Path) -> None:
    start = datetime(2024, 3, 1, 9, tzinfo=UTC)
    back = "Back to sailing: the Cascais regatta results are in, great sailing."
    said = [(0, "s", SAILING[0]), (1, "s", SAILING[1]), (300, "s", "Hello again!"), (301, "s", back)]
    topics = {"segment_similarity": 0.7, "segment_continue_similarity": 0.4}
    filed = []
    for capacity in (1, 10):  # each exchange leaves on its own, or all leave together at the end
        with Memory(home / str(capacity), embedder=HashEmbedder(), background=False, working_capacity=capacity,
                    **topics) as memory:  # fmt: skip
            for minutes, session, text in said:
                memory.add(text, user_id="u", session_id=session, timestamp=start + timedelta(minutes=minutes))
            memory.add([{"role": "user", "content": f"Bye {n}."} for n in range(10)], user_id="u", session_id="s")
            memory.flush()
            filed.append(
                [kept for group in _filed(memory, "u") if (kept := [t for t in group if not t.startswith("Bye")])]
            )
    one_at_a_time, together = filed
    assert together == one_at_a_time
    assert one_at_a_time[:2] == [SAILING[:2], ["Hello again!"]]


def test_a_segment_is_compared_by_its_latest_exchanges(home: Path) -> None:
    # The segment drifts from sailing to boat repairs. A sailing line after five repair lines no
    # longer fits where it has got to (cosine 0.16), though it fits the whole segment (0.45).
    repairs = [
        f"The boat hull repair needs {part}, epoxy resin and fibreglass cloth from the yard."
        for part in ("sanding", "primer", "filler", "clamps", "gloves")
    ]
    bridge = "After the regatta the sailing boat hull needs epoxy repair."
    again = "Our sailing crew trained in Cascais for the regatta again."
    topics = {"segment_similarity": 0.5, "segment_continue_similarity": 0.4}
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1, **topics) as memory:
        filed = _one_by_one(memory, "u", [*SAILING, bridge, *repairs, again])
    assert filed == [[*SAILING, bridge, *repairs], [again]]


class Renamed(HashEmbedder):
    """The hash embedder's vectors under another model id: another model of the same size."""

    @property
    def model_id(self) -> str:
        return "renamed-hash-384"


def test_segments_filed_by_another_model_of_the_same_size_are_not_compared(home: Path) -> None:
    # The same vectors under another model id: were the old direction compared, the last sailing
    # line would continue the sailing segment. Vectors of different models are never compared.
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1, **HASHED_TOPICS) as memory:
        for text in SAILING:
            _exchange(memory, text)
        memory.flush()
    with Memory(home, embedder=Renamed(), background=False, working_capacity=1, **HASHED_TOPICS) as memory:
        _exchange(memory, "Anything else?")
        memory.flush()
        assert _filed(memory, USER) == [SAILING[:2], [SAILING[2]]]


def test_segments_filed_by_an_embedder_of_another_size_do_not_stop_filing(home: Path) -> None:
    # A store switched to an embedder with another vector size: the old segments' directions
    # cannot be compared with the new vectors, so they are left out of the choice until refiled.
    with Memory(home, embedder=HashEmbedder(384), background=False, working_capacity=1, **HASHED_TOPICS) as memory:
        for text in [*SAILING, TAXES[0]]:
            _exchange(memory, text, session="u")
        memory.flush()
    with Memory(home, embedder=HashEmbedder(256), background=False, working_capacity=1, **HASHED_TOPICS) as memory:
        for text in TAXES[1:]:
            _exchange(memory, text, session="u")
        _exchange(memory, "Anything else?", session="u")
        memory.flush()
        report = memory.inspect(user_id=USER)
        filed = _filed(memory, USER)
    assert (report.pending_jobs, report.failed_jobs) == (0, 0)
    assert filed == [SAILING, TAXES]


def test_segment_turns_lists_a_segments_turns_for_its_user_only(tiered: Memory) -> None:
    for text in SAILING:
        _exchange(tiered, text)
    _exchange(tiered, "Anything else to add about it?")
    tiered.flush()
    (segment,) = tiered.inspect(user_id=USER).segments
    turns = tiered.segment_turns(segment.id, user_id=USER)
    assert [turn.content for turn in turns if turn.role.value == "user"] == SAILING[: len(SAILING) - 1]
    assert len(turns) == segment.turn_count
    with pytest.raises(NotFound, match="no mid-term segment"):
        tiered.segment_turns(segment.id, user_id="someone-else")
    with pytest.raises(InvalidInput):
        tiered.segment_turns("", user_id=USER)


def test_summaries_read_the_day_in_the_configured_time_zone(home: Path) -> None:
    said = datetime(2023, 5, 7, 23, 30, tzinfo=UTC)  # already 8 May in Tokyo
    with Memory(home, embedder=HashEmbedder(), background=False, timezone="Asia/Tokyo") as memory:
        for n in range(4):
            _exchange(memory, f"The shed roof leaked again yesterday, repair attempt {n} failed.", timestamp=said)
        summaries = [item.summary for item in memory.consolidate(user_id=USER)]
    assert any("yesterday, repair" in summary for summary in summaries), summaries
    assert all("[yesterday = 7 May 2023]" in summary for summary in summaries if "yesterday" in summary)


def test_newer_fact_supersedes_only_the_same_attribute(tiered: Memory) -> None:
    _exchange(tiered, "I live in Porto.")
    _exchange(tiered, "I like hiking in the mountains.")
    _exchange(tiered, "I moved to Lisbon last month.")
    tiered.flush()
    history = tiered.cells(user_id=USER, attribute="location", include_superseded=True)
    assert [cell.value for cell in history] == ["Lisbon", "Porto"]
    newest, oldest = history
    assert newest.is_current and not oldest.is_current
    assert oldest.superseded_by == newest.id and oldest.valid_to is not None
    current_values = {cell.value for cell in tiered.cells(user_id=USER)}
    assert "Lisbon" in current_values and "Porto" not in current_values
    assert any("hiking" in cell.attribute or "hiking" in cell.value for cell in tiered.cells(user_id=USER))
    assert tiered.profile(user_id=USER).get("location") == "Lisbon"
    kinds = [event.kind for event in tiered.inspect(user_id=USER).events]
    assert "supersession" in kinds


def test_search_finds_current_cells_not_superseded_ones(tiered: Memory) -> None:
    _exchange(tiered, "I live in Porto.")
    _exchange(tiered, "I moved to Lisbon last month.")
    tiered.flush()
    found = tiered.search("location Porto or Lisbon", user_id=USER, limit=20, tiers=("longterm",))
    hits = [hit for hit in found if hit.tier == "longterm"]
    assert any("Lisbon" in hit.content for hit in hits)
    assert not any("Porto" in hit.content for hit in hits), "the superseded cell is not searched"
    assert all(hit.source_turn_ids for hit in hits)


def test_scripted_conversation_recalls_seeded_facts(home: Path) -> None:
    facts = [
        ("My sister Marta lives in Berlin.", "Where does Marta live?", "Berlin"),
        ("I'm allergic to shellfish.", "What am I allergic to?", "shellfish"),
        ("I work at Tern Robotics as an engineer.", "Where do I work?", "Tern"),
        ("My favourite food is ramen.", "What is my favourite food?", "ramen"),
        ("I'm planning a trip to Japan in October.", "Where am I travelling in October?", "Japan"),
        ("My sister Marta lives in Berlin.", "Which city is my sister Marta in?", "Berlin"),
        ("I'm allergic to shellfish.", "Any allergy I should remember?", "shellfish"),
        ("I work at Tern Robotics as an engineer.", "What company employs me?", "Tern"),
        ("My favourite food is ramen.", "Suggest my favourite dish for dinner", "ramen"),
        ("I'm planning a trip to Japan in October.", "What trip am I planning?", "Japan"),
    ]
    work = [
        "Can you review this SQL query for the invoices table?",
        "The deploy failed because the migration timed out.",
        "Let's rename the helper function to parse_rows.",
        "How do I profile memory usage in Python?",
        "The CI pipeline needs a cache for pip downloads.",
        "Please write a unit test for the date parser.",
        "What does HTTP status 409 mean?",
        "The dashboard shows a spike in latency at noon.",
        "Split the report into weekly sections.",
        "Compare gzip and zstd for log compression.",
    ]
    # The real offline model: probes paraphrase their facts, which a bag of words cannot match.
    with Memory(home, background=False, working_capacity=3) as memory:
        for fact in dict.fromkeys(fact for fact, _, _ in facts):
            _exchange(memory, fact)
        for line in work:
            _exchange(memory, line, "Here is a suggestion.")
        memory.flush()
        for _, probe, expected in facts:
            # An agent asks for its context before it stores the new exchange.
            context = memory.context(probe, user_id=USER, token_budget=300)
            assert expected in context.text, (probe, context.text)
            _exchange(memory, probe, "Let me check.")
        memory.flush()
        report = memory.inspect(user_id=USER)
        assert report.counts["cells_current"] >= 4
        assert report.counts["episodic"] == 50


def test_a_sleep_is_due_after_enough_new_turns_not_after_every_turn(home: Path) -> None:
    # Hash vectors of unrelated texts do not cluster: every turn stays unconsolidated.
    with Memory(home, embedder=HashEmbedder(), background=False, consolidate_every=5) as memory:
        slept: list[str] = []
        sleep = memory.parts.hierarchy.sleep.consolidate

        def counted(user_id: str, now: datetime | None = None) -> list[Consolidation]:
            slept.append(user_id)
            return sleep(user_id, now)

        memory.parts.hierarchy.sleep.consolidate = counted  # type: ignore[method-assign]
        for n in range(12):
            memory.add(distinct_words(8, seed=n), user_id=USER)
            memory.flush()
        assert len(slept) == 2  # after the 5th and the 10th turn, not after each one from the 5th on
        assert memory.consolidations(user_id=USER) == []


def test_where_the_last_sleep_stopped_is_kept_across_processes(home: Path) -> None:
    def add(count: int, first: int) -> None:
        with Memory(home, embedder=HashEmbedder(), background=False, consolidate_every=5) as memory:
            for n in range(first, first + count):
                memory.add(distinct_words(8, seed=n), user_id=USER)
            memory.flush()

    add(6, 0)  # a sleep looked at all six (stored before their jobs ran); no cluster took any
    with Memory(home, embedder=HashEmbedder(), background=False, consolidate_every=5) as memory:
        assert not memory.parts.hierarchy.consolidation_due(USER)  # no new turn since, though six are unclustered
    add(3, 6)
    with Memory(home, embedder=HashEmbedder(), background=False, consolidate_every=5) as memory:
        memory.add(distinct_words(8, seed=9), user_id=USER)
        assert not memory.parts.hierarchy.consolidation_due(USER)  # four new turns
        memory.add(distinct_words(8, seed=10), user_id=USER)
        assert memory.parts.hierarchy.consolidation_due(USER)  # the fifth
        memory.forget(user_id=USER)
        assert memory.parts.store.slept_through(USER) == 0


def test_consolidation_stores_summaries_with_tes(tiered: Memory) -> None:
    for n in range(4):
        _exchange(tiered, f"The garden shed roof leaks near the window, repair attempt {n} failed.")
    for n in range(4):
        _exchange(tiered, f"Quarterly invoice numbers for Acme Corp were wrong in batch {n}.")
    made = tiered.consolidate(user_id=USER)
    assert made, "two clear topics should form at least one cluster"
    for item in made:
        assert item.summary and item.source_turn_ids
        assert 0.0 <= item.tes <= 1.0
        assert 0.0 <= item.compression_ratio <= 1.0
    report = tiered.inspect(user_id=USER)
    assert report.consolidations and "consolidation" in [event.kind for event in report.events]
    assert tiered.consolidate(user_id=USER) == []  # nothing new to consolidate


def test_consolidating_on_demand_works_through_a_whole_backlog_oldest_first(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consolidation_module, "CONSOLIDATION_BATCH", 8)
    topics = (
        "The garden shed roof leaks near the window, repair attempt {n} failed.",
        "Quarterly invoice numbers for Acme Corp were wrong in batch {n}.",
        "The sailing regatta in Cascais was postponed by storm number {n}.",
    )
    # No sleep on its own: every turn waits for the one asked for (a backlog, as after an import).
    settings = {"consolidate_every": 1000, "consolidate_tokens": 10**6}
    with Memory(home, embedder=HashEmbedder(), background=False, **settings) as memory:
        for topic in topics:
            for n in range(4):
                _exchange(memory, topic.format(n=n), reply=f"Noted, {topic.split()[1]}.")
        memory.flush()
        store = memory.parts.store
        assert store.slept_through(USER) == 0 and store.unconsolidated_size(USER)[0] == 24  # type: ignore[attr-defined]
        made = memory.consolidate(user_id=USER)
        covered = {turn_id for item in made for turn_id in item.source_turn_ids}
        said = [turn for turn in memory.history(user_id=USER) if "shed roof" in turn.content]
        assert said and {turn.id for turn in said} <= covered, "the oldest topic was consolidated too"
        # Every turn has been looked at: nothing is left for the next sleep to start from.
        assert store.unconsolidated_size(USER, after_seq=store.slept_through(USER)) == (0, 0)  # type: ignore[attr-defined]


def test_a_big_cluster_is_summarised_in_runs_of_consecutive_turns(home: Path) -> None:
    settings = {"consolidate_every": 1000, "consolidate_tokens": 10**6}  # only the sleep asked for
    with Memory(home, embedder=HashEmbedder(), background=False, **settings) as memory:
        hierarchy = memory.parts.hierarchy
        hierarchy.policy = replace(hierarchy.policy, max_cluster_turns=4)
        for n in range(5):
            _exchange(
                memory, f"The garden shed roof leaks again, repair {n}.", reply=f"The garden shed roof, repair {n}."
            )
        memory.flush()
        made = memory.consolidate(user_id=USER)
        order = [turn.id for turn in memory.history(user_id=USER)]
        runs = [[order.index(turn_id) for turn_id in item.source_turn_ids] for item in made]
        assert runs and all(2 <= len(run) <= 4 for run in runs), runs  # cut, and no piece below min_samples
        assert all(run == list(range(run[0], run[0] + len(run))) for run in runs), runs  # consecutive turns
        summarised = sorted(index for run in runs for index in run)
        assert len(summarised) == len(set(summarised)) >= 8  # pieces do not overlap; most of the 10 turns


def test_a_sleep_cut_short_is_done_again_by_the_retried_job(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False, consolidate_every=10) as memory:
        for n in range(15):
            _exchange(memory, f"I love hiking in the Alps, trip {n}", f"Hiking in the Alps sounds great, trip {n}")
        store = memory.parts.store
        stored, failures = store.add_consolidation, []  # type: ignore[attr-defined]

        def fails_once(*args: object) -> bool:
            if not failures:
                failures.append(True)
                raise StorageError("writing failed: database is locked")
            return bool(stored(*args))

        monkeypatch.setattr(store, "add_consolidation", fails_once)
        memory.flush(timeout=None)  # the job that slept fails once, and its retry sleeps again
        assert failures and store.tier_counts(USER)["consolidations"] > 0  # type: ignore[attr-defined]
        assert not memory.parts.hierarchy.consolidation_due(USER)


def test_an_on_demand_sleep_waits_for_a_jobs_sleep_running_in_the_same_process(tiered: Memory) -> None:
    for n in range(4):
        _exchange(tiered, f"The garden shed roof leaks near the window, repair attempt {n} failed.")
    tiered.flush()
    finished = threading.Event()
    with tiered.parts.hierarchy._lock:  # a job (and its sleep) running in the background worker
        sleeper = threading.Thread(target=lambda: (tiered.consolidate(user_id=USER), finished.set()))
        sleeper.start()
        assert not finished.wait(0.3), "the on-demand sleep ran beside the job's"
    assert finished.wait(30)
    sleeper.join(30)


def test_visits_heat_up_segments_until_promotion(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1, promote_heat=3.0) as memory:
        _exchange(memory, "The sailing regatta in Cascais starts at nine.")
        _exchange(memory, "Unrelated: buy printer toner.")
        _exchange(memory, "Another unrelated thing about taxes.")
        memory.flush()
        for _ in range(3):
            memory.search("sailing regatta Cascais", user_id=USER)
            memory.flush()
        report = memory.inspect(user_id=USER)
        assert any(segment.visits >= 1 for segment in report.segments)
        assert report.counts["scenes"] >= 1
        assert "promotion" in [event.kind for event in report.events]


def test_a_visit_job_run_again_counts_its_visits_once_and_still_promotes(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1, promote_heat=3.0) as memory:
        _exchange(memory, "The sailing regatta in Cascais starts at nine.")
        _exchange(memory, "Unrelated: buy printer toner.")
        memory.flush()
        store = memory.parts.store
        [segment] = [s for s in memory.inspect(user_id=USER).segments if "sailing" in s.summary]
        seqs = store.segment_turn_seqs(segment.id)  # type: ignore[attr-defined]
        store.enqueue_job("visit", USER, {"searches": [seqs, seqs[:1]]})  # type: ignore[attr-defined]
        job = store.claim_job(0.01)  # type: ignore[attr-defined]
        assert job is not None and job.kind == "visit"

        def dies(*_: object) -> None:
            raise RuntimeError("died")

        monkeypatch.setattr(memory.parts.hierarchy.steps, "scene", dies)
        with pytest.raises(RuntimeError, match="died"):
            memory.parts.hierarchy.run(job)  # counted, then the worker died before promoting
        monkeypatch.undo()
        time.sleep(0.05)
        memory.flush()  # the lease expired: the same job runs again
        [after] = [s for s in memory.inspect(user_id=USER).segments if s.id == segment.id]
        assert after.visits == segment.visits + 2, "two searches, counted once"
        assert after.promoted_at is not None and memory.inspect(user_id=USER).counts["scenes"] == 1


def test_eviction_archives_cold_segments_but_keeps_episodes(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1, midterm_capacity=1) as memory:
        for topic, reply in (
            ("Volcano geology lecture tomorrow", "Magma!"),
            ("Sourdough bread starter smells sour", "Feed it flour."),
            ("Bicycle gear repair kit arrived", "Great, tools."),
            ("Tax deadline moved", "Mark the calendar."),
        ):
            _exchange(memory, topic, reply)
        memory.flush()
        report = memory.inspect(user_id=USER)
        assert report.counts["midterm_active"] == 1
        assert report.counts["midterm_archived"] >= 1
        assert "eviction" in [event.kind for event in report.events]
        hits = memory.search("volcano geology lecture", user_id=USER, limit=3)
        assert any("volcano" in hit.content.lower() for hit in hits)


def test_entities_and_subgraph(tiered: Memory) -> None:
    _exchange(tiered, "I met Caroline and Melanie at the Lisbon Book Fair.")
    _exchange(tiered, "Caroline works at Google now.")
    tiered.flush()
    graph = tiered.graph(user_id=USER, query="What does Caroline do?")
    names = {node.name for node in graph.nodes}
    assert "Caroline" in names
    assert any("Caroline" in (edge.source, edge.target) for edge in graph.edges)


def test_patterns_are_counted(tiered: Memory) -> None:
    for text in ("Just give me the code, no explanation.", "Give me the code first please.", "Show me code for it"):
        _exchange(tiered, text)
    tiered.flush()
    patterns = tiered.patterns(user_id=USER)
    assert patterns and patterns[0].count >= 2


def test_patterns_matching_the_query_come_first_by_topic_words(tiered: Memory) -> None:
    for text in ("Just give me the code, no explanation.", "Give me the code first please.", "Show me code for it"):
        _exchange(tiered, text)
    _exchange(tiered, "What do dogs eat?")
    _exchange(tiered, "Which dogs shed least?")
    tiered.flush()
    descriptions = [pattern.description for pattern in tiered.patterns(user_id=USER)]
    assert "asks follow-up questions about dogs" in descriptions and descriptions[0] != descriptions[-1]
    assert tiered.patterns(user_id=USER, query="Any dog?")[0].description.endswith("about dogs")
    # "about" and "for" are not topics: such a query keeps the plain order
    asked = tiered.patterns(user_id=USER, query="What is this about, and for whom?")
    assert [pattern.key for pattern in asked] == [pattern.key for pattern in tiered.patterns(user_id=USER)]


def test_forget_user_clears_every_tier(tiered: Memory) -> None:
    _exchange(tiered, "I live in Porto and my sister Marta lives in Berlin.")
    for n in range(4):
        _exchange(tiered, f"Filler message {n}")
    tiered.flush()
    tiered.consolidate(user_id=USER)
    tiered.forget(user_id=USER)
    counts = tiered.inspect(user_id=USER).counts
    assert all(value == 0 for value in counts.values()), counts
    assert tiered.search("Porto", user_id=USER) == []


def test_deleting_a_turn_removes_what_was_derived_from_it(tiered: Memory) -> None:
    _exchange(tiered, "I live in Porto.")
    tiered.flush()
    source = tiered.cells(user_id=USER)[0].source_turn_id
    tiered.delete(source, user_id=USER)
    tiered.flush()
    assert tiered.cells(user_id=USER, include_superseded=True) == []
    assert not any("Porto" in hit.content for hit in tiered.search("Porto", user_id=USER))


def test_prune_episodic_by_count(tiered: Memory) -> None:
    for n in range(5):
        _exchange(tiered, f"Message {n}", timestamp=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=n))
    removed = tiered.prune(user_id=USER, tier="episodic", keep_last=4)
    assert removed == 6
    assert len(tiered.history(user_id=USER)) == 4
    assert "retention" in [event.kind for event in tiered.inspect(user_id=USER).events]


def test_pending_jobs_survive_a_killed_process(home: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, signal
        from memstrata import Memory
        from memstrata.embeddings.hashing import HashEmbedder
        memory = Memory({str(home)!r}, embedder=HashEmbedder(), background=False)
        memory.add([{{"role": "user", "content": "I live in Porto."}}], user_id={USER!r})
        print("added", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "added" in result.stdout and result.returncode == -signal.SIGKILL
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        assert memory.inspect(user_id=USER).pending_jobs >= 1
        memory.flush()
        assert memory.profile(user_id=USER).get("location") == "Porto"


def test_a_job_that_fails_every_attempt_is_parked_until_retried(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("memstrata.tiers.worker.FIRST_RETRY_DELAY_SECONDS", 0.01)
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        working = memory.parts.worker._run
        calls: list[int] = []

        def outage(job: object) -> None:
            calls.append(1)
            raise RuntimeError("the database is restarting")

        memory.parts.worker._run = outage
        memory.add("I live in Porto.", user_id=USER)
        memory.flush(timeout=30)
        report = memory.inspect(user_id=USER)
        assert (len(calls), report.pending_jobs, report.failed_jobs) == (3, 0, 1)
        assert memory.profile(user_id=USER) == {}
        memory.parts.worker._run = working
        assert memory.retry_failed_jobs(user_id="someone-else") == 0
        assert memory.retry_failed_jobs(user_id=USER) == 1
        memory.flush(timeout=30)
        assert memory.inspect(user_id=USER).failed_jobs == 0
        assert memory.profile(user_id=USER).get("location") == "Porto"


def test_a_crashed_workers_lease_expires_and_the_job_runs_again(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        memory.add("I live in Porto.", user_id=USER)
        store = memory.parts.store  # the job is claimed and abandoned, as by a worker killed mid-job
        job = store.claim_job(0.01)  # type: ignore[attr-defined]
        assert job is not None
        time.sleep(0.05)
        memory.flush()
        assert memory.profile(user_id=USER).get("location") == "Porto"


def test_a_job_run_again_after_its_worker_died_counts_nothing_twice(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        texts = ("Just give me the code, Caroline.", "Give me the code first please, Caroline.")
        memory.add([{"role": "user", "content": text} for text in texts], user_id=USER, session_id="s1")
        store = memory.parts.store
        job = store.claim_job(0.01)  # type: ignore[attr-defined]
        assert job is not None and job.kind == "process"
        memory.parts.hierarchy.run(job)  # the work was done, then the worker died before recording it
        time.sleep(0.05)
        once = ([(p.key, p.count) for p in memory.patterns(user_id=USER)], memory.inspect(user_id=USER).counts)
        memory.flush()  # the lease expired: the same job runs again
        again = ([(p.key, p.count) for p in memory.patterns(user_id=USER)], memory.inspect(user_id=USER).counts)
        assert once[0] and max(count for _, count in once[0]) == 2
        assert again == once
        assert [(n.name, n.mentions) for n in memory.graph(user_id=USER, query="Caroline").nodes] == [("Caroline", 2)]


def test_a_job_run_again_does_not_store_the_cells_it_stored_and_superseded(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        texts = ("I live in Porto.", "I moved, I live in Lisbon now.")
        memory.add([{"role": "user", "content": text} for text in texts], user_id=USER, session_id="s1")
        job = memory.parts.store.claim_job(0.01)
        assert job is not None and job.kind == "process"
        memory.parts.hierarchy.run(job)
        time.sleep(0.05)
        once = sorted((cell.value, cell.is_current) for cell in memory.cells(user_id=USER, include_superseded=True))
        assert once == [("Lisbon", True), ("Porto", False)]
        memory.flush()  # the lease expired: the same job runs again
        again = sorted((cell.value, cell.is_current) for cell in memory.cells(user_id=USER, include_superseded=True))
        assert again == once
        assert [event.kind for event in memory.inspect(user_id=USER).events].count("supersession") == 1


def test_a_turn_processed_after_a_newer_one_does_not_undo_its_fact(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        day = datetime(2024, 1, 1, tzinfo=UTC)
        memory.add("I live in Porto.", user_id=USER, timestamp=day)
        memory.add("I live in Lisbon.", user_id=USER, timestamp=day + timedelta(days=30))
        store = memory.parts.store
        earlier = store.claim_job(60)  # type: ignore[attr-defined]
        later = store.claim_job(60)  # type: ignore[attr-defined]
        memory.parts.hierarchy.run(later)  # two workers: the newer turn's job finishes first
        memory.parts.hierarchy.run(earlier)
        cells = memory.cells(user_id=USER, include_superseded=True)
        assert sorted((cell.value, cell.is_current) for cell in cells) == [("Lisbon", True), ("Porto", False)]
        porto = next(cell for cell in cells if cell.value == "Porto")
        assert porto.superseded_by == next(cell.id for cell in cells if cell.value == "Lisbon")
        assert porto.valid_to == day + timedelta(days=30)
        assert memory.profile(user_id=USER)["location"] == "Lisbon"
        facts = [hit.id for hit in memory.search("live", user_id=USER, tiers=["longterm"]) if hit.tier == "longterm"]
        assert facts == [next(cell.id for cell in cells if cell.value == "Lisbon")]  # history is not searched


def _raced_by_another_process(monkeypatch: pytest.MonkeyPatch, memory: Memory, seqs: list[int]) -> list[bool]:
    """Another process's worker processes ``seqs`` after this one read a fact's slot, before it writes the fact."""
    hierarchy = memory.parts.hierarchy
    return after_first_read(monkeypatch, hierarchy._ids, "new", lambda: hierarchy.process(USER, seqs))


@pytest.mark.parametrize("newer_first", [True, False])
def test_two_workers_storing_one_fact_at_once_leave_one_current_value(
    home: Path, monkeypatch: pytest.MonkeyPatch, newer_first: bool
) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        day = datetime(2024, 1, 1, tzinfo=UTC)
        memory.add("I live in Porto.", user_id=USER, timestamp=day)
        memory.add("I live in Lisbon.", user_id=USER, timestamp=day + timedelta(days=30))
        store, hierarchy = memory.parts.store, memory.parts.hierarchy
        porto_job = store.claim_job(60)  # type: ignore[attr-defined]
        lisbon_job = store.claim_job(60)  # type: ignore[attr-defined]
        assert porto_job is not None and lisbon_job is not None
        assert porto_job.payload["seqs"] < lisbon_job.payload["seqs"]
        first, second = (porto_job, lisbon_job) if newer_first else (lisbon_job, porto_job)
        raced = _raced_by_another_process(monkeypatch, memory, second.payload["seqs"])
        hierarchy.run(first)
        cells = memory.cells(user_id=USER, include_superseded=True)
        assert raced and sorted((cell.value, cell.is_current) for cell in cells) == [("Lisbon", True), ("Porto", False)]
        porto = next(cell for cell in cells if cell.value == "Porto")
        assert porto.superseded_by == next(cell.id for cell in cells if cell.value == "Lisbon")


def test_one_turn_processed_by_two_workers_at_once_stores_its_fact_once(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        memory.add("I live in Porto.", user_id=USER)
        store, hierarchy = memory.parts.store, memory.parts.hierarchy
        job = store.claim_job(60)  # type: ignore[attr-defined]
        raced = _raced_by_another_process(monkeypatch, memory, job.payload["seqs"])
        hierarchy.run(job)
        assert raced and [cell.value for cell in memory.cells(user_id=USER, include_superseded=True)] == ["Porto"]


@pytest.mark.parametrize("same_turn", [False, True])
def test_two_workers_storing_late_facts_at_once_keep_validities_apart(
    home: Path, monkeypatch: pytest.MonkeyPatch, same_turn: bool
) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        day = datetime(2024, 1, 1, tzinfo=UTC)
        for n, city in enumerate(("Porto", "Lisbon", "Berlin")):
            memory.add(f"I live in {city}.", user_id=USER, timestamp=day + timedelta(days=10 * n))
        store, hierarchy = memory.parts.store, memory.parts.hierarchy
        porto_job, lisbon_job, berlin_job = (store.claim_job(60) for _ in range(3))  # type: ignore[attr-defined]
        hierarchy.run(berlin_job)  # the newest value is stored first: the other two are late
        other = porto_job if same_turn else lisbon_job
        raced = _raced_by_another_process(monkeypatch, memory, other.payload["seqs"])
        hierarchy.run(porto_job)
        if same_turn:
            hierarchy.run(lisbon_job)
        cells = {cell.value: cell for cell in memory.cells(user_id=USER, include_superseded=True)}
        assert raced and len(memory.cells(user_id=USER, include_superseded=True)) == 3  # nothing twice
        assert (cells["Porto"].valid_to, cells["Porto"].superseded_by) == (day + timedelta(days=10), cells["Lisbon"].id)
        assert (cells["Lisbon"].valid_to, cells["Lisbon"].superseded_by) == (
            day + timedelta(days=20),
            cells["Berlin"].id,
        )
        assert [cell.value for cell in memory.cells(user_id=USER)] == ["Berlin"]


def test_a_fact_whose_slot_keeps_changing_fails_so_its_job_is_tried_again(
    tiered: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    _exchange(tiered, "I live in Porto.")
    monkeypatch.setattr(longterm_module, "FILING_PAUSE_SECONDS", 0.0)
    monkeypatch.setattr(tiered.parts.store, "add_cell", lambda *args, **kwargs: False)  # another worker always wins
    job = tiered.parts.store.claim_job(60)
    with pytest.raises(StorageError, match="other workers kept changing"):
        tiered.parts.hierarchy.run(job)


DAY = datetime(2024, 5, 2, tzinfo=UTC)


def _cities_processed_in_order(memory: Memory, order: str) -> dict[str, Cell]:
    """Paris, Rome and Berlin said a day apart, their jobs run in ``order`` ("RBP": Rome, Berlin, Paris)."""
    for n, city in enumerate(("Paris", "Rome", "Berlin")):
        memory.add(f"I live in {city}.", user_id=USER, timestamp=DAY + timedelta(days=n))
    jobs = {city[0]: memory.parts.store.claim_job(60) for city in ("Paris", "Rome", "Berlin")}
    for letter in order:
        memory.parts.hierarchy.run(jobs[letter])
    cells = {cell.value: cell for cell in memory.cells(user_id=USER, include_superseded=True)}
    assert (cells["Paris"].valid_to, cells["Paris"].superseded_by) == (DAY + timedelta(days=1), cells["Rome"].id)
    assert (cells["Rome"].valid_to, cells["Rome"].superseded_by) == (DAY + timedelta(days=2), cells["Berlin"].id)
    return cells


def test_a_late_fact_is_replaced_by_the_value_said_next(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        cells = _cities_processed_in_order(memory, "RBP")  # Paris's job last
        assert cells["Berlin"].is_current


def test_a_late_fact_between_two_values_ends_the_one_before_it(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        cells = _cities_processed_in_order(memory, "PBR")  # Rome's job last
        memory.delete(cells["Berlin"].source_turn_id, user_id=USER)
        assert [cell.value for cell in memory.cells(user_id=USER)] == ["Rome"]  # one current value


def test_deleting_a_turn_takes_back_its_pattern_occurrences(tiered: Memory) -> None:
    for text in ("Just give me the code, no explanation.", "Give me the code first please."):
        _exchange(tiered, text)
    tiered.flush()
    [first, second] = [turn for turn in tiered.history(user_id=USER) if turn.role == "user"]
    counted = {p.key: p for p in tiered.patterns(user_id=USER)}
    assert any(p.count == 2 for p in counted.values())
    tiered.delete(second.id, user_id=USER)
    left = {p.key: p for p in tiered.patterns(user_id=USER)}
    assert {key: p.count for key, p in left.items()} == {key: p.count - 1 for key, p in counted.items() if p.count > 1}
    assert all("first please" not in p.evidence for p in left.values())
    tiered.delete(first.id, user_id=USER)
    assert tiered.patterns(user_id=USER) == []


def test_background_worker_processes_without_flush_calls(home: Path) -> None:
    with Memory(home, embedder=HashEmbedder(), working_capacity=1) as memory:
        _exchange(memory, "I live in Porto.")
        deadline = time.monotonic() + 20
        while memory.profile(user_id=USER).get("location") != "Porto":
            assert time.monotonic() < deadline, "the background worker never ran"
            time.sleep(0.05)


def test_llm_writes_summaries_when_configured(home: Path) -> None:
    llm = FakeLLM({"segment_summary": [{"summary": "Ana discussed sailing in Cascais.", "keywords": ["sailing"]}]})
    with Memory(home, embedder=HashEmbedder(), llm=llm, background=False, working_capacity=1) as memory:
        _exchange(memory, "The sailing regatta in Cascais starts at nine.")
        _exchange(memory, "Something else entirely.")
        memory.flush()
        summaries = [segment.summary for segment in memory.inspect(user_id=USER).segments]
    assert "Ana discussed sailing in Cascais." in summaries
    assert "Cascais" in llm.calls_for("segment_summary")[0].prompt


def test_offline_summaries_are_extractive(tiered: Memory) -> None:
    _exchange(tiered, "The sailing regatta in Cascais starts at nine.")
    _exchange(tiered, "Something else entirely.")
    _exchange(tiered, "And a third thing.")
    tiered.flush()
    segment = tiered.inspect(user_id=USER).segments[0]
    assert segment.summary and any(part in segment.summary for part in ("regatta", "Noted"))


def test_summaries_say_what_relative_dates_meant(home: Path) -> None:
    said = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)
    with Memory(home, embedder=HashEmbedder(), background=False, working_capacity=1) as memory:
        for n in range(4):
            _exchange(
                memory, f"The garden shed roof leaked again yesterday, repair attempt {n} failed.", timestamp=said
            )
        memory.flush()
        summaries = [segment.summary for segment in memory.inspect(user_id=USER).segments]
        summaries += [item.summary for item in memory.consolidate(user_id=USER)]
    dated = [summary for summary in summaries if "yesterday" in summary]
    assert dated and all("yesterday, repair" in summary for summary in dated), summaries
    assert all(summary.count("yesterday") == 2 * summary.count("[yesterday = 7 May 2023]") for summary in dated)


def test_a_context_read_in_another_zone_shows_summaries_without_the_dates_they_resolved(home: Path) -> None:
    said = datetime(2023, 5, 8, 6, 30, tzinfo=UTC)  # still 7 May in Los Angeles
    with Memory(home, embedder=HashEmbedder(), background=False) as memory:
        for n in range(4):
            _exchange(memory, f"The shed roof leaked again yesterday, repair attempt {n} failed.", timestamp=said)
        assert memory.consolidate(user_id=USER)
        here = memory.context("shed roof repair", user_id=USER, token_budget=2000)
        there = memory.context("shed roof repair", user_id=USER, token_budget=2000, timezone="America/Los_Angeles")
    assert any(item.kind in ("consolidation", "midterm", "scene") for item in there.items)
    assert "[yesterday = 7 May 2023]" in here.text
    assert "[yesterday = 7 May 2023]" not in there.text and "[yesterday = 6 May 2023]" in there.text


def test_worker_thread_stops_on_close(home: Path) -> None:
    memory = Memory(home, embedder=HashEmbedder())
    memory.add("hello there", user_id=USER)
    memory.close()
    assert not [t for t in __import__("threading").enumerate() if t.name == "memstrata-worker" and t.is_alive()]


_ = os  # imported for the subprocess script's environment


def test_search_tiers_are_opt_in_for_summaries(tiered: Memory) -> None:
    for text in ("The sailing regatta in Cascais starts at nine.", "Buy printer toner.", "Pay the taxes."):
        _exchange(tiered, text)
    tiered.flush()
    default = {hit.tier for hit in tiered.search("sailing regatta Cascais", user_id=USER, limit=20)}
    assert default == {"episodic"}
    opted = {hit.tier for hit in tiered.search("sailing regatta Cascais", user_id=USER, limit=20, tiers=("midterm",))}
    assert "midterm" in opted
    with pytest.raises(InvalidInput):
        tiered.search("sailing", user_id=USER, tiers=("nonsense",))


@pytest.mark.parametrize("query", ["", "   ", "a\x00b", "\ud800"])
def test_graph_and_patterns_reject_bad_queries(tiered: Memory, query: str) -> None:
    with pytest.raises(InvalidInput):
        tiered.graph(user_id=USER, query=query)
    with pytest.raises(InvalidInput):
        tiered.patterns(user_id=USER, query=query)


def test_prune_rejects_bad_arguments(tiered: Memory) -> None:
    for kwargs in ({"tier": "nonsense", "keep_last": 1}, {"tier": "episodic"}, {"tier": "episodic", "keep_last": -1}):
        with pytest.raises(InvalidInput):
            tiered.prune(user_id=USER, **kwargs)  # type: ignore[arg-type]


def test_tes_reads_the_summary_without_the_speaker_labels_it_lends_its_sentences() -> None:
    summary = "Melanie: The kids loved it. [yesterday = 7 May 2023] Caroline: Nice!\nMelanie: and so Caroline: yes"
    assert without_labels(summary, {"Melanie", "Caroline"}) == (
        "The kids loved it. [yesterday = 7 May 2023] Nice!\nand so yes"
    )
    assert without_labels("Ana-Caroline: hi", {"Caroline"}) == "Ana-Caroline: hi"  # not a label of hers
    assert without_labels(summary, set()) == summary
