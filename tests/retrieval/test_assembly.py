"""Context assembly: budgets, section order, shares, and time-ordered excerpts."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.retrieval import assembly
from memstrata.retrieval.assembly import SECTION_TITLES, AssemblyPolicy, Candidate, assemble
from memstrata.retrieval.tokens import count_joined, count_tokens

START = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def _episodes(count: int, words: int = 12) -> list[Candidate]:
    return [
        Candidate(
            section="episode",
            kind="episode",
            tier="episodic",
            id=f"t{i}",
            text=f"Ana: message {i} " + "word " * words,
            score=1.0 / (i + 1),
            source_turn_ids=(f"t{i}",),
            when=START + timedelta(days=count - i),
        )
        for i in range(count)
    ]


def test_stable_sections_come_first_and_episodes_read_in_time_order() -> None:
    candidates = {
        "episode": _episodes(5),
        "profile": [Candidate(section="profile", kind="profile", tier="longterm", id="p:city", text="city: Lisbon")],
        "cell": [
            Candidate(
                section="cell",
                kind="cell",
                tier="longterm",
                id="c1",
                text="Ana likes tea",
                score=1.0,
                source_turn_ids=("t9",),
            )
        ],
    }
    context = assemble("what does Ana like?", "ana", candidates, 1000)
    text = context.text
    assert text.index(SECTION_TITLES["profile"]) < text.index(SECTION_TITLES["cell"]) < text.index("message")
    positions = [text.index(f"message {i} ") for i in range(5)]
    assert positions == sorted(positions, reverse=True)  # older (higher i) first
    assert "[Tuesday 9 May 2023]" in text
    assert context.tokens == count_tokens(text) <= 1000
    assert [item.kind for item in context.items][:2] == ["profile", "cell"]
    assert context.turn_ids[0] == "t9"


def test_budget_keeps_the_best_episodes_and_reports_what_it_left_out() -> None:
    context = assemble("q", "ana", {"episode": _episodes(40)}, 200)
    assert context.tokens <= 200
    kept = {item.id for item in context.items}
    assert "t0" in kept and "t39" not in kept
    assert context.omitted == 40 - len(kept)


def test_a_block_whose_joined_lines_cost_more_than_their_parts_drops_its_weakest_episodes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    candidates = {"episode": _episodes(40)}
    fitted = assemble("q", "ana", candidates, 200)
    # A tokenizer that merges across line breaks the other way: the joined block costs 30 tokens more.
    monkeypatch.setattr(assembly, "count_joined", lambda lines: count_joined(lines) + 30)
    trimmed = assemble("q", "ana", candidates, 200)
    assert trimmed.tokens == count_joined(trimmed.text.split("\n")) + 30 <= 200
    kept = [item.id for item in trimmed.items if item.kind == "episode"]
    before = [item.id for item in fitted.items if item.kind == "episode"]
    assert kept and len(kept) < len(before)
    ranked = [f"t{i}" for i in range(40)]
    assert sorted(kept, key=ranked.index) == ranked[: len(kept)]  # the best ones stay
    assert trimmed.omitted == fitted.omitted + len(before) - len(kept)


def test_one_section_cannot_crowd_out_the_episodes() -> None:
    cells = [
        Candidate(section="cell", kind="cell", tier="longterm", id=f"c{i}", text=f"fact number {i} " * 5, score=1.0)
        for i in range(100)
    ]
    context = assemble("q", "ana", {"cell": cells, "episode": _episodes(30)}, 500)
    episode_tokens = sum(item.tokens for item in context.items if item.kind == "episode")
    assert episode_tokens > 250


def test_unused_share_flows_back_to_other_sections() -> None:
    cells = [
        Candidate(section="cell", kind="cell", tier="longterm", id=f"c{i}", text=f"fact number {i}", score=1.0)
        for i in range(60)
    ]
    context = assemble("q", "ana", {"cell": cells}, 500)
    assert len(context.items) > 30 and context.tokens <= 500


def test_an_item_offered_twice_appears_once() -> None:
    episode = _episodes(1)[0]
    recent = Candidate(section="recent", kind="episode", tier="working", id="t0", text=episode.text, when=episode.when)
    context = assemble("q", "ana", {"episode": [episode], "recent": [recent]}, 500)
    assert [item.id for item in context.items] == ["t0"]


def test_a_fact_restating_a_shown_excerpt_gives_its_tokens_to_another_excerpt() -> None:
    episodes = _episodes(40)
    said = Candidate(
        section="cell",
        kind="cell",
        tier="longterm",
        id="c0",
        text="Ana · fact: message 0",
        score=1.0,
        source_turn_ids=("t0",),
        restates_sources=True,
    )
    unseen = Candidate(
        section="cell",
        kind="cell",
        tier="longterm",
        id="c1",
        text="Ana · fact: tea",
        score=0.9,
        source_turn_ids=("t39",),
        restates_sources=True,
    )
    history = Candidate(
        section="cell",
        kind="cell",
        tier="longterm",
        id="c2",
        text="Ana · city: Porto (until 2023-05-01, then replaced)",
        score=0.8,
        source_turn_ids=("t0",),
    )
    # 500 tokens: the facts' share holds both lines that stay.
    without = assemble("q", "ana", {"episode": episodes, "cell": [unseen, history]}, 500)
    context = assemble("q", "ana", {"episode": episodes, "cell": [said, unseen, history]}, 500)
    kept = [item.id for item in context.items]
    assert "t0" in kept and "c0" not in kept  # said once, as the dated excerpt
    assert "c1" in kept and "c2" in kept  # its turn is not shown; a history line says more than its turn
    assert kept == [item.id for item in without.items]  # the tokens went back to the excerpts
    assert context.omitted == 43 - len(kept) - 1  # c0 was not left out for want of room
    assert context.tokens == count_tokens(context.text) <= 500


def test_with_budget_to_spare_no_fact_restates_a_shown_excerpt() -> None:
    episodes = _episodes(3)
    cells = [
        Candidate(
            section="cell",
            kind="cell",
            tier="longterm",
            id=f"c{i}",
            text=f"Ana · fact {i}: word",
            score=1.0,
            source_turn_ids=(f"t{i % 3}",),
            restates_sources=True,
        )
        for i in range(12)
    ]
    context = assemble("q", "ana", {"episode": episodes, "cell": cells}, 1000)
    assert [item.id for item in context.items] == ["t2", "t1", "t0"]
    assert context.omitted == 0, "left out on purpose, not for want of room"


def test_nothing_to_say_is_an_empty_block() -> None:
    context = assemble("q", "ana", {}, 500)
    assert context.text == "" and context.tokens == 0 and context.items == ()


@settings(max_examples=60, deadline=None)
@given(
    budget=st.integers(min_value=50, max_value=3000),
    sizes=st.lists(st.integers(min_value=1, max_value=120), min_size=1, max_size=40),
)
def test_never_over_budget(budget: int, sizes: list[int]) -> None:
    episodes = [
        Candidate(
            section="episode",
            kind="episode",
            tier="episodic",
            id=f"t{i}",
            text="Bo: " + "x y, " * size,
            score=1.0,
            source_turn_ids=(f"t{i}",),
            when=START,
        )
        for i, size in enumerate(sizes)
    ]
    cells = [
        Candidate(
            section="cell",
            kind="cell",
            tier="longterm",
            id=f"c{i}",
            text="z " * size,
            score=1.0,
            source_turn_ids=(f"t{i}",),
            restates_sources=i % 2 == 0,
        )
        for i, size in enumerate(sizes)
    ]
    context = assemble("q", "u", {"episode": episodes, "cell": cells}, budget)
    assert context.tokens == count_tokens(context.text) <= budget


def test_date_lines_follow_each_excerpts_own_zone() -> None:
    # One instant, late on 8 May in UTC and early on 9 May in Tokyo: each block dates it as its reader's day.
    late = datetime(2023, 5, 8, 23, 30, tzinfo=UTC)
    for zone, line in [(UTC, "[Monday 8 May 2023]"), (ZoneInfo("Asia/Tokyo"), "[Tuesday 9 May 2023]")]:
        episode = Candidate(
            section="episode",
            kind="episode",
            tier="episodic",
            id="t1",
            text="Ana: hello",
            score=1.0,
            source_turn_ids=("t1",),
            when=late.astimezone(zone),
        )
        assert line in assemble("hello", "ana", {"episode": [episode]}, 200).text


def _shortened(count: int) -> list[Candidate]:
    return [replace(item, shorter=f"Ana: msg {i} " + "word " * 4) for i, item in enumerate(_episodes(count, words=12))]


def _tightest(candidates: dict[str, list[Candidate]], policy: AssemblyPolicy | None = None) -> int:
    """The smallest budget whose block holds every candidate: any less and one is left out."""
    wanted = len({item.id for items in candidates.values() for item in items})
    return next(b for b in range(50, 5000) if len(assemble("q", "ana", candidates, b, policy).items) == wanted)


def test_excerpts_after_the_best_one_are_shown_shorter_and_say_so() -> None:
    budget = _tightest({"episode": _shortened(6)})
    context = assemble("q", "ana", {"episode": _shortened(6)}, budget)
    by_id = {item.id: item for item in context.items}
    assert [by_id[f"t{i}"].is_abridged for i in range(6)] == [False] + [True] * 5
    assert "Ana: message 0 " in context.text and "Ana: msg 4 word" in context.text
    policy = AssemblyPolicy(verbatim_excerpts=3)
    three = assemble("q", "ana", {"episode": _shortened(6)}, _tightest({"episode": _shortened(6)}, policy), policy)
    assert [item.is_abridged for item in sorted(three.items, key=lambda item: item.id)] == [False] * 3 + [True] * 3
    assert by_id["t4"].text == "Ana: msg 4 " + "word " * 4
    assert context.tokens == count_tokens(context.text) <= budget


def test_nothing_is_abridged_when_the_budget_holds_every_excerpt_whole() -> None:
    context = assemble("q", "ana", {"episode": _shortened(6)}, 1000)
    assert len(context.items) == 6 and not any(item.is_abridged for item in context.items)
    assert (
        context.text
        == assemble("q", "ana", {"episode": _shortened(6)}, 1000, AssemblyPolicy(verbatim_excerpts=None)).text
    )


def test_tokens_left_quote_the_best_ranked_abridged_excerpts_whole_first() -> None:
    tightest = _tightest({"episode": _shortened(6)})
    counts = []
    for budget in range(tightest, tightest + 120):
        context = assemble("q", "ana", {"episode": _shortened(6)}, budget)
        assert len(context.items) == 6 and context.tokens <= budget
        ranked = sorted(context.items, key=lambda item: item.id)  # t0 is the best-ranked
        abridged = [item.is_abridged for item in ranked]
        assert abridged == sorted(abridged)  # whole ones first: a prefix of the ranking
        counts.append(abridged.count(False))
    assert counts == sorted(counts) and counts[0] == 1 and counts[-1] == 6


def test_shorter_excerpts_let_more_of_them_fit() -> None:
    whole = assemble("q", "ana", {"episode": _shortened(40)}, 300, AssemblyPolicy(verbatim_excerpts=None))
    shorter = assemble("q", "ana", {"episode": _shortened(40)}, 300)
    assert not any(item.is_abridged for item in whole.items)
    assert len(shorter.items) > len(whole.items)
    assert shorter.tokens <= 300 and whole.tokens <= 300


def test_a_shorter_form_that_is_not_shorter_is_not_used() -> None:
    longer = [replace(item, shorter=item.text + " more") for item in _episodes(6)]
    context = assemble("q", "ana", {"episode": longer}, 1000, AssemblyPolicy(verbatim_excerpts=0))
    assert not any(item.is_abridged for item in context.items)


def test_the_whole_quoted_excerpt_is_the_best_one_that_fits() -> None:
    episodes = _shortened(6)
    too_long = replace(episodes[0], text="Ana: " + "word " * 400, shorter="Ana: word word")
    offered = {"episode": [too_long, *episodes[1:]]}
    context = assemble("q", "ana", offered, _tightest(offered))
    by_id = {item.id: item for item in context.items}
    assert by_id["t0"].is_abridged  # whole, it did not fit; abridged, it does
    assert not by_id["t1"].is_abridged  # so the next best is the one quoted whole
    assert sum(not item.is_abridged for item in context.items) == 1


def test_an_excerpt_taken_by_another_section_leaves_the_whole_quote_to_the_next() -> None:
    episodes = _shortened(4)
    recent = replace(episodes[0], section="recent")
    offered = {"episode": episodes, "recent": [recent]}
    policy = AssemblyPolicy(shares={"recent": 0.5})  # the session's turn comes first, even in a small block
    budget = next(
        b
        for b in range(50, 5000)
        if len((block := assemble("q", "ana", offered, b, policy)).items) == 4
        and "Earlier in this session" in block.text
    )
    context = assemble("q", "ana", offered, budget, policy)
    shown = {(item.id, item.is_abridged) for item in context.items}
    assert ("t0", False) in shown and ("t1", False) in shown and ("t2", True) in shown


def test_an_excerpt_abridging_would_not_shorten_leaves_the_whole_quote_to_the_next() -> None:
    episodes = _shortened(4)
    thanks = replace(episodes[0], text="Ana: Thanks!", shorter=None)  # nothing to leave out
    offered = {"episode": [thanks, *episodes[1:]]}
    context = assemble("q", "ana", offered, _tightest(offered))
    shown = {item.id: item.is_abridged for item in context.items}
    assert shown == {"t0": False, "t1": False, "t2": True, "t3": True}


def test_a_fact_with_a_shorter_form_is_shown_in_it_when_its_turn_is() -> None:
    episodes = _episodes(3)
    found = Candidate(
        section="cell",
        kind="cell",
        tier="longterm",
        id="c0",
        text="Ana · allergy: peanuts — message 0 word word",
        score=1.0,
        source_turn_ids=("t0",),
        restates_sources=True,
        shorter="Ana · allergy: peanuts",
    )
    context = assemble("q", "ana", {"episode": episodes, "cell": [found]}, 1000)
    assert "- Ana · allergy: peanuts\n" in context.text and "peanuts — message" not in context.text
    assert [item.text for item in context.items if item.id == "c0"] == ["Ana · allergy: peanuts"]
    assert context.tokens == count_tokens(context.text) <= 1000
