"""Message bursts: consecutive messages of one speaker found as one hit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memstrata.models import Hit, Role, Turn
from memstrata.retrieval.bursts import (
    BURST_CONTEXT_CHARS,
    BURST_GAP,
    BURST_REACH,
    MAX_BURST,
    burst_of,
    burst_texts,
    joined_bursts,
    one_per_burst,
    unread,
)

START = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)


def _turn(seq: int, name: str, *, session: str | None = "s", seconds: float = 0.0, role: Role = Role.USER) -> Turn:
    return Turn(
        id=f"t{seq}",
        user_id="u",
        role=role,
        content=f"message {seq}",
        created_at=START + timedelta(seconds=seconds),
        session_id=session,
        agent_id=None,
        name=name,
    )


def _hit(turn: Turn, seq: int) -> Hit:
    return Hit(
        id=turn.id,
        tier="episodic",
        content=turn.content,
        score=1.0 / seq,
        turn=turn,
        source_turn_ids=(turn.id,),
        ranks={},
        seq=seq,
    )


def test_a_burst_is_one_speakers_messages_in_a_row() -> None:
    turns = {
        1: _turn(1, "Ana"),
        2: _turn(2, "Bo", seconds=5),
        3: _turn(3, "Bo", seconds=10),
        4: _turn(4, "Bo", seconds=20),
        5: _turn(5, "Ana", seconds=30),
    }
    assert burst_of(3, turns) == [2, 3, 4]
    assert burst_of(1, turns) == [1] and burst_of(5, turns) == [5]


def test_a_burst_ends_at_a_pause_a_session_a_role_or_a_gap_in_the_store() -> None:
    gap = BURST_GAP.total_seconds()
    assert burst_of(1, {1: _turn(1, "Bo"), 2: _turn(2, "Bo", seconds=gap)}) == [1]
    assert burst_of(1, {1: _turn(1, "Bo"), 2: _turn(2, "Bo", seconds=gap - 1)}) == [1, 2]
    assert burst_of(1, {1: _turn(1, "Bo"), 2: _turn(2, "Bo", session="other")}) == [1]
    assert burst_of(1, {1: _turn(1, "Bo", session=None), 2: _turn(2, "Bo", session=None)}) == [1]
    assert burst_of(1, {1: _turn(1, "Bo"), 2: _turn(2, "Bo", role=Role.ASSISTANT)}) == [1]
    assert burst_of(1, {1: _turn(1, "Bo"), 3: _turn(3, "Bo")}) == [1]  # seq 2 is another user's row


def test_joined_bursts_keep_the_best_pieces_rank_and_stand_for_the_whole_burst() -> None:
    names = {1: "Ana", 2: "Bo", 3: "Bo", 4: "Bo", 5: "Ana", 6: "Cy"}
    turns = {seq: _turn(seq, name, seconds=seq) for seq, name in names.items()}
    hits = [_hit(turns[3], 3), _hit(turns[5], 5), _hit(turns[2], 2), _hit(turns[6], 6)]
    joined = joined_bursts(hits, turns)
    assert [hit.id for hit in joined] == ["t3", "t5", "t6"]  # t2 folded into the burst found at t3
    assert joined[0].content == "message 2\nmessage 3\nmessage 4"
    assert joined[0].source_turn_ids == ("t2", "t3", "t4")
    assert joined[0].turn == turns[3] and joined[0].score == hits[0].score
    assert joined[1] == hits[1]  # a turn alone is as it was


def test_derived_hits_pass_through_and_only_the_bursts_edges_are_read() -> None:
    cell = Hit(
        id="c1", tier="longterm", content="likes: jazz", score=0.5, turn=None, source_turn_ids=("t1",), ranks={}, seq=9
    )
    assert joined_bursts([cell], {}) == [cell] and unread([cell], {}, set()) == []
    alone = _turn(20, "Bo")
    assert unread([_hit(alone, 20)], {}, set()) == [19, 21]  # a turn alone: its two neighbours
    assert unread([_hit(alone, 20)], {}, {19, 21}) == []  # read (or not there): done
    stored = {seq: _turn(seq, "Bo", seconds=seq) for seq in range(1, 40)}  # one long burst
    hit, known, tried = _hit(stored[20], 20), {}, set()
    while wanted := unread([hit], known, tried):
        tried.update(wanted)
        known.update({seq: stored[seq] for seq in wanted if seq in stored})
    assert min(tried) == 20 - BURST_REACH and max(tried) == 20 + BURST_REACH  # never further than the reach
    assert unread([_hit(stored[1], 1)], {}, set()) == [2]  # no seq 0


def test_one_per_burst_moves_a_bursts_later_hits_after_the_others() -> None:
    names = {1: "Ana", 2: "Bo", 3: "Bo", 4: "Bo", 5: "Ana", 6: "Cy"}
    turns = {seq: _turn(seq, name, seconds=seq) for seq, name in names.items()}
    cell = Hit(
        id="c1", tier="longterm", content="likes: jazz", score=0.5, turn=None, source_turn_ids=("t1",), ranks={}, seq=9
    )
    hits = [_hit(turns[3], 3), _hit(turns[2], 2), cell, _hit(turns[6], 6), _hit(turns[4], 4), _hit(turns[1], 1)]
    assert [hit.id for hit in one_per_burst(hits, turns)] == ["t3", "c1", "t6", "t1", "t2", "t4"]


def test_a_run_longer_than_a_burst_is_many_thoughts() -> None:
    run = {seq: _turn(seq, "Bo", seconds=seq) for seq in range(1, MAX_BURST + 1)}
    assert burst_of(3, run) == list(range(1, MAX_BURST + 1))
    longer = {**run, MAX_BURST + 1: _turn(MAX_BURST + 1, "Bo", seconds=MAX_BURST + 1)}
    assert all(burst_of(seq, longer) == [seq] for seq in longer)


def test_a_piece_is_embedded_after_the_earlier_pieces_of_its_burst() -> None:
    turns = [_turn(1, "Bo"), _turn(2, "Bo", seconds=5), _turn(3, "Ana", seconds=9), _turn(4, "Ana", seconds=70)]
    assert burst_texts(turns) == [None, "Bo: message 1\nmessage 2", None, None]
    # The burst goes on from the messages stored before, and a new one starts after MAX_BURST pieces.
    run = [_turn(seq, "Bo", seconds=seq) for seq in range(1, MAX_BURST + 3)]
    texts = burst_texts(run[2:], before=run[:2])
    assert texts[0] == "Bo: message 1\nmessage 2\nmessage 3"
    assert str(texts[MAX_BURST - 3]).count("message") == MAX_BURST and texts[MAX_BURST - 2] is None
    assert texts[MAX_BURST - 1] is None  # a run too long to be a burst: each later piece stands alone
    assert burst_texts([_turn(1, "Bo", session=None), _turn(2, "Bo", session=None)]) == [None, None]


def test_a_long_burst_keeps_the_piece_itself_whole_and_leaves_out_the_oldest_pieces() -> None:
    long = [
        Turn(
            id=f"t{n}",
            user_id="u",
            role=Role.USER,
            content=f"{n}" * 400,
            created_at=START,
            session_id="s",
            agent_id=None,
            name="Bo",
        )
        for n in range(1, 5)
    ]
    text = str(burst_texts(long)[-1])
    assert text.endswith("4" * 400) and "1" not in text and len(text) <= BURST_CONTEXT_CHARS + 400 + len("Bo: ")
