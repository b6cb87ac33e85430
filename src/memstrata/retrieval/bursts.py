"""Message bursts: one thought sent as several messages in a row.

Pure: turns in, bursts out. A search keeps one piece of each burst in its top hits
(:func:`one_per_burst`), a context block shows a burst as one excerpt
(:func:`joined_bursts`), and a piece is embedded with the pieces before it
(:func:`burst_texts`). See docs/retrieval.md#3c-message-bursts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta

from memstrata.models import Hit, Turn
from memstrata.retrieval.fulltext import indexed_text

#: Messages this far apart are separate thoughts, even from one speaker (chat exports often
#: keep only the minute: pieces sent within it share their time).
BURST_GAP = timedelta(minutes=1)
#: The most messages a burst holds. A longer run from one speaker is many thoughts (a
#: monologue, notes an app stored one by one), not one split up: each stands alone.
MAX_BURST = 6
#: A burst is looked for this many stored turns either side of a hit: enough to see a run
#: of more than :data:`MAX_BURST`.
BURST_REACH = MAX_BURST
#: The most characters of earlier pieces embedded with a message: the embedder reads a few
#: hundred tokens, and the message itself must not be cut off.
BURST_CONTEXT_CHARS = 1000


def burst_texts(turns: Sequence[Turn], before: Sequence[Turn] = ()) -> list[str | None]:
    """Each of ``turns``' burst so far, from its first piece to it, as one text; ``None`` for a turn that stands alone.

    ``turns`` are new messages in the order said; ``before`` are the user's messages stored
    just before them, oldest first. A first piece, and every piece of a run longer than
    :data:`MAX_BURST`, stands alone.
    """
    run: list[Turn] = []
    texts: list[str | None] = []
    for position, turn in enumerate([*before, *turns]):
        run = [*run[-MAX_BURST:], turn] if run and continues(run[-1], turn) else [turn]
        if position >= len(before):
            texts.append(_joined(run) if 1 < len(run) <= MAX_BURST else None)
    return texts


def _joined(run: Sequence[Turn]) -> str | None:
    """The burst ``run`` as one text for the embedder: the speaker once, then each piece, the last one whole.

    ``None`` when no earlier piece fits in :data:`BURST_CONTEXT_CHARS` (the text would be the piece alone).
    """
    last = run[-1]
    earlier: list[str] = []
    room = BURST_CONTEXT_CHARS
    for turn in reversed(run[:-1]):
        room -= len(turn.content) + 1
        if room < 0:
            break
        earlier.insert(0, turn.content)
    if not earlier:
        return None
    return indexed_text(replace(last, content="\n".join([*earlier, last.content])))


def burst_of(seq: int, turns: Mapping[int, Turn], own: Turn | None = None) -> list[int]:
    """The seqs of the burst the turn ``seq`` belongs to, in the order said (just ``[seq]`` when alone).

    ``turns`` holds the user's turns around ``seq`` by seq (``own`` is that turn, if it is
    not among them); a seq missing from it (another user's row, a deleted turn) ends the
    burst. A run longer than :data:`MAX_BURST` is no burst.
    """

    def at(position: int) -> Turn | None:
        return own if position == seq and own is not None else turns.get(position)

    first = last = seq
    while seq - first <= MAX_BURST and _follows(at(first - 1), at(first)):
        first -= 1
    while last - seq <= MAX_BURST and _follows(at(last), at(last + 1)):
        last += 1
    return list(range(first, last + 1)) if last - first < MAX_BURST else [seq]


def _follows(before: Turn | None, after: Turn | None) -> bool:
    return before is not None and after is not None and continues(before, after)


def continues(before: Turn, after: Turn) -> bool:
    """Whether ``after`` goes on with the message ``before`` in one burst."""
    return (
        before.session_id is not None
        and before.session_id == after.session_id
        and before.role == after.role
        and before.name == after.name
        and before.agent_id == after.agent_id
        and timedelta(0) <= after.created_at - before.created_at < BURST_GAP
    )


def unread(hits: Sequence[Hit], turns: Mapping[int, Turn], tried: set[int]) -> list[int]:
    """The seqs to read next so :func:`joined_bursts` sees each turn hit's whole burst.

    A burst is followed through ``turns`` (the turns read so far); where it reaches a seq not
    read yet (and not in ``tried``), that seq is wanted, up to :data:`BURST_REACH` from the
    hit. Read them, add them to ``turns`` and ``tried``, and ask again until none are left:
    turns that stand alone cost one read of their two neighbours.
    """
    wanted: set[int] = set()
    for hit in hits:
        if hit.turn is None or hit.seq is None:
            continue
        own, start = hit.turn, hit.seq
        for step in (-1, 1):
            seq, turn = start, own
            while (nearby := turns.get(seq + step)) is not None and continues(
                *((turn, nearby) if step > 0 else (nearby, turn))
            ):
                seq, turn = seq + step, nearby
            edge = seq + step
            if edge >= 1 and edge not in turns and edge not in tried and abs(edge - start) <= BURST_REACH:
                wanted.add(edge)
    return sorted(wanted)


def joined_bursts(hits: Sequence[Hit], turns: Mapping[int, Turn]) -> list[Hit]:
    """``hits`` with each burst found once, at its best hit's rank, standing for the whole burst.

    The hit keeps its id, turn, score and ranks; its ``content`` is the burst's messages in
    the order said, one a line, and its ``source_turn_ids`` are theirs. A later hit on the
    same burst is left out. A turn alone is returned as it was.
    """
    result: list[Hit] = []
    taken: set[int] = set()
    for hit in hits:
        if hit.turn is None or hit.seq is None:
            result.append(hit)
            continue
        if hit.seq in taken:
            continue
        burst = burst_of(hit.seq, turns, hit.turn)
        taken.update(burst)
        if len(burst) == 1:
            result.append(hit)
            continue
        members = [turns.get(seq, hit.turn) if seq != hit.seq else hit.turn for seq in burst]
        result.append(
            replace(
                hit,
                content="\n".join(turn.content for turn in members),
                source_turn_ids=tuple(turn.id for turn in members),
            )
        )
    return result


def one_per_burst(hits: Sequence[Hit], turns: Mapping[int, Turn]) -> list[Hit]:
    """``hits`` with the first of each burst in its place and the burst's later hits after all the others."""
    first: list[Hit] = []
    later: list[Hit] = []
    taken: set[int] = set()
    for hit in hits:
        if hit.turn is None or hit.seq is None:
            first.append(hit)
        elif hit.seq in taken:
            later.append(hit)
        else:
            taken.update(burst_of(hit.seq, turns, hit.turn))
            first.append(hit)
    return first + later
