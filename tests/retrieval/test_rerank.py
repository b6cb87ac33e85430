"""Reranking after fusion: the speaker a query names."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memstrata.retrieval.fusion import Fused
from memstrata.retrieval.rerank import SPEAKER_BONUS, focus_on_speaker, mentioned_speaker


def test_a_named_speaker_is_found_as_a_whole_word_in_any_case() -> None:
    assert mentioned_speaker("What did caroline research?", ["Caroline", "Melanie"]) == "Caroline"
    assert mentioned_speaker("Who is Carolineish?", ["Caroline"]) is None
    assert mentioned_speaker("Did Caroline meet Melanie?", ["Caroline", "Melanie"]) is None
    assert mentioned_speaker("what about O'Brien (again)?", ["O'Brien"]) == "O'Brien"
    assert mentioned_speaker("anything", []) is None
    assert mentioned_speaker("a + b", ["+", " "]) is None


def test_the_named_speakers_turns_rise_and_ranks_are_kept() -> None:
    fused = [Fused("a", 0.0164, {"fulltext": 1}), Fused("b", 0.0160, {"vector": 2}), Fused("c", 0.0150, {})]
    speakers = {"a": "Melanie", "b": "Caroline", "c": "Caroline"}
    focused = focus_on_speaker("What did Caroline paint?", fused, speakers)
    assert [item.key for item in focused] == ["b", "c", "a"]
    assert focused[0].score == 0.0160 + SPEAKER_BONUS and focused[0].ranks == {"vector": 2}
    assert focus_on_speaker("What did they paint?", fused, speakers) == fused


@given(st.lists(st.floats(min_value=0, max_value=1), max_size=20), st.sampled_from(["Ana?", "Bo and Ana", "x", ""]))
def test_focus_keeps_every_item(scores: list[float], query: str) -> None:
    fused = [Fused(index, score, {}) for index, score in enumerate(sorted(scores, reverse=True))]
    speakers = {index: ("Ana" if index % 2 else "Bo") for index in range(len(scores))}
    focused = focus_on_speaker(query, fused, speakers)
    assert sorted(item.key for item in focused) == list(range(len(scores)))
    assert [item.score for item in focused] == sorted((item.score for item in focused), reverse=True)
