"""Mid-term segmentation on LoCoMo: do segments follow topics?

Streams of blocks of known topic (Choi, 2000) are added turn by turn and their segments
scored by B-cubed precision, recall, F1 and conversation purity; whole conversations report
their segments' number and sizes. See docs/benchmark-history.md#mid-term-segmentation.
"""

from __future__ import annotations

import hashlib
import random
import statistics
import time
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memstrata import InvalidInput, Memory
from memstrata.bench.datasets import DialogTurn, find_locomo, load_locomo
from memstrata.bench.ingest_search import machine
from memstrata.bench.qa import answering_memory
from memstrata.bench.replay import TUNING_CONVERSATIONS
from memstrata.tiers.midterm import topic_thresholds

BLOCK_TURNS = (4, 12)
STREAM_START = datetime(2024, 1, 1, 9, 0, tzinfo=UTC)


@dataclass(kw_only=True, frozen=True, slots=True)
class SegmentBenchOptions:
    """What to run; ``None`` means the Memory's own setting."""

    data: Path | None = None
    streams: int = 4
    blocks: int = 30
    seed: int = 0
    whole_conversations: bool = True
    embedder: str | None = None
    home: Path | None = None

    def __post_init__(self) -> None:
        if self.streams < 1 or self.blocks < 2:
            raise InvalidInput(f"need at least 1 stream of 2 blocks; got {self.streams} of {self.blocks}")


@dataclass(frozen=True, slots=True)
class Block:
    """Consecutive turns of one session, and where they come from."""

    conversation: str
    session: str
    turns: tuple[DialogTurn, ...]


def bcubed(segments: Sequence[Hashable], labels: Sequence[Hashable]) -> tuple[float, float, float]:
    """B-cubed precision, recall and F1 of a clustering (``segments[i]``: item ``i``'s cluster) against ``labels``."""
    if len(segments) != len(labels) or not labels:
        raise ValueError(f"{len(segments)} segments for {len(labels)} labels; need as many, and at least one")
    in_segment, in_label, in_both = Counter(segments), Counter(labels), Counter(zip(segments, labels, strict=True))
    precision = statistics.fmean(in_both[pair] / in_segment[pair[0]] for pair in zip(segments, labels, strict=True))
    recall = statistics.fmean(in_both[pair] / in_label[pair[1]] for pair in zip(segments, labels, strict=True))
    return precision, recall, 2 * precision * recall / (precision + recall)


def draw_streams(
    turns: Sequence[DialogTurn], conversations: Sequence[str], streams: int, blocks: int, seed: int
) -> list[list[Block]]:
    """``streams`` lists of ``blocks`` blocks, each from another conversation than the one before.

    A stream uses each session at most once, so no two of its blocks share a turn or a
    session (which would make a correct return to an earlier topic count as an error).
    """
    if len(conversations) < 2:
        raise InvalidInput("streams need at least two conversations to alternate between")
    sessions: dict[str, dict[str, list[DialogTurn]]] = {name: {} for name in conversations}
    for turn in turns:
        if turn.conversation in sessions:
            sessions[turn.conversation].setdefault(turn.session, []).append(turn)
    if blocks > sum(len(by_session) for by_session in sessions.values()) - max(map(len, sessions.values())):
        raise InvalidInput(f"{blocks} blocks need more sessions than these conversations have")
    rng = random.Random(seed)
    drawn: list[list[Block]] = []
    for _ in range(streams):
        stream: list[Block] = []
        used: set[tuple[str, str]] = set()
        while len(stream) < blocks:
            others = [name for name in conversations if not stream or name != stream[-1].conversation]
            conversation = rng.choice(others)
            unused = [session for session in sorted(sessions[conversation]) if (conversation, session) not in used]
            if not unused:
                continue
            session = rng.choice(unused)
            used.add((conversation, session))
            said = sessions[conversation][session]
            length = rng.randint(*BLOCK_TURNS)
            start = rng.randrange(max(1, len(said) - length + 1))
            stream.append(Block(conversation, session, tuple(said[start : start + length])))
        drawn.append(stream)
    return drawn


def run_segments(options: SegmentBenchOptions) -> dict[str, Any]:
    """Add the streams (and the whole conversations), read their segments back, and score them."""
    turns, _ = load_locomo(find_locomo(options.data))
    order = list(dict.fromkeys(turn.conversation for turn in turns))
    halves = {
        "1-5": order[:TUNING_CONVERSATIONS],
        "6-10": order[TUNING_CONVERSATIONS:],
    }
    overrides: dict[str, Any] = {"working_capacity": 1, **({"embedder": options.embedder} if options.embedder else {})}
    started = time.perf_counter()
    with answering_memory(options.home, overrides, needs_llm_for=None) as (memory, ingesting):
        settings = ingesting.settings
        thresholds = topic_thresholds(
            ingesting.embedder, settings.segment_similarity, settings.segment_continue_similarity
        )
        # Users named after everything that shapes their segments: a run on a home used before
        # with other options files afresh, and the same run again adds nothing.
        run = (ingesting.embedder.model_id, thresholds.join, thresholds.stay, options.streams, options.blocks)
        run_key = hashlib.sha256(repr((*run, options.seed)).encode()).hexdigest()[:10]
        streams: dict[str, Any] = {}
        for half, names in halves.items():
            scored = [
                _score_stream(ingesting, f"segments-{run_key}-{half}-{number}", stream)
                for number, stream in enumerate(
                    draw_streams(turns, names, options.streams, options.blocks, options.seed)
                )
            ]
            streams[f"conversations {half}"] = {
                key: statistics.fmean(score[key] for score in scored)
                for key in ("precision", "recall", "f1", "conversation_purity", "segments", "turns")
            } | {"per_stream": scored}
        whole = _whole_conversations(ingesting, turns, order, run_key) if options.whole_conversations else None
        return {
            "benchmark": "segments",
            "measured_at": datetime.now(UTC).isoformat(),
            "machine": machine(),
            "embedder": memory.embedder.model_id,
            "thresholds": {"join": thresholds.join, "stay": thresholds.stay},
            "settings": settings.model_dump(mode="json", exclude={"home", "storage_url", "llm_api_key"}),
            "streams_per_half": options.streams,
            "blocks_per_stream": options.blocks,
            "block_turns": list(BLOCK_TURNS),
            "seed": options.seed,
            "streams": streams,
            "whole_conversations": whole,
            "seconds": time.perf_counter() - started,
        }


def _score_stream(memory: Memory, user_id: str, stream: Sequence[Block]) -> dict[str, Any]:
    """Add a stream for ``user_id`` and score its segments.

    The turns go in without their speakers' names: one user's chat has the same two
    speakers throughout, and names that change at every block would tell the blocks apart
    by themselves. Each turn has an id, so a second run on the same home adds nothing.
    """
    label: dict[str, tuple[int, str]] = {}
    for number, block in enumerate(stream):
        for turn in block.turns:
            moment = STREAM_START + timedelta(minutes=len(label))
            turn_id = f"{user_id}-{len(label)}"
            memory.add([{"role": "user", "content": turn.text, "id": turn_id}], user_id=user_id, timestamp=moment)
            label[turn_id] = (number, block.conversation)
    segment_of = _segments_of(memory, user_id)
    filed = [turn_id for turn_id in label if turn_id in segment_of]
    segments = [segment_of[turn_id] for turn_id in filed]
    precision, recall, f1 = bcubed(segments, [label[turn_id][0] for turn_id in filed])
    purity, _, _ = bcubed(segments, [label[turn_id][1] for turn_id in filed])
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "conversation_purity": purity,
        "segments": len(set(segments)),
        "turns": len(filed),
    }


def _whole_conversations(memory: Memory, turns: Sequence[DialogTurn], order: Sequence[str], key: str) -> dict[str, Any]:
    sizes: dict[str, list[int]] = {}
    for conversation in order:
        user_id = f"segments-{key}-whole-{conversation}"
        for turn in (turn for turn in turns if turn.conversation == conversation):
            memory.add(
                [{"role": "user", "content": turn.text, "name": turn.speaker, "id": f"{user_id}-{turn.dia_id}"}],
                user_id=user_id,
                session_id=turn.session,
                timestamp=turn.timestamp,
            )
        sizes[conversation] = sorted(Counter(_segments_of(memory, user_id).values()).values(), reverse=True)
    every = [size for counts in sizes.values() for size in counts]
    return {
        "segments": len(every),
        "turns_filed": sum(every),
        "turns_per_segment": {
            "mean": statistics.fmean(every),
            "median": statistics.median(every),
            "largest": max(every),
        },
        "single_turn_segments": sum(size == 1 for size in every),
        "per_conversation": {name: {"segments": len(counts), "largest": counts[0]} for name, counts in sizes.items()},
    }


def _segments_of(memory: Memory, user_id: str) -> dict[str, str]:
    """Each filed turn's segment id, once the tier work is done (the last exchange stays in working memory)."""
    memory.flush(timeout=None)
    report = memory.inspect(user_id=user_id, limit=1000)
    return {
        turn.id: segment.id for segment in report.segments for turn in memory.segment_turns(segment.id, user_id=user_id)
    }
