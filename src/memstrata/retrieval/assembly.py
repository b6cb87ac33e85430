"""Context assembly: pack ranked memories from every tier into one block under a token budget.

Pure: candidates in, :class:`~memstrata.models.Context` out. Sections come most stable first
(prefix caches keep the head); each takes up to its share, the excerpts the rest, and what is
free goes back to the sections. The best-ranked excerpt is quoted whole, the others abridged
only while the budget is short; every item is one line. See docs/retrieval.md#4-assembly-context.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime

from memstrata.models import Context, ContextItem
from memstrata.retrieval.tokens import count_joined, count_tokens

SECTION_ORDER = ("profile", "pattern", "cell", "graph", "summary", "episode", "recent")
SECTION_TITLES = {
    "profile": "About the user",
    "pattern": "Habits",
    "cell": "Facts",
    "graph": "Related entities",
    "summary": "Summaries",
    "episode": "From past conversations",
    "recent": "Earlier in this session",
}
HEADER = "# Memory"
DATED_SECTIONS = ("episode", "recent")
LINE_BREAK = " ⏎ "
# Every line break Python's str.splitlines() knows, with the spaces around a run of them.
_LINE_BREAKS = re.compile(r"\s*[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029][\s\x1c\x1d\x1e]*")


@dataclass(kw_only=True, frozen=True, slots=True)
class Candidate:
    """Something that may go into the context, best-ranked first within its section."""

    section: str
    kind: str
    tier: str
    id: str
    text: str
    score: float = 0.0
    source_turn_ids: tuple[str, ...] = ()
    when: datetime | None = None
    #: The text says nothing its source turns do not: left out when the excerpts show all of them.
    restates_sources: bool = False
    #: Where a turn was stored (its seq): turns of one ``when`` (one ``add`` call) keep the order they were said.
    order: int | None = None
    #: The same in fewer words, shown when the policy abridges it (an excerpt, ``retrieval/abridge.py``) or,
    #: for a fact that restates its sources, when the block shows them (the fact without its sentence).
    shorter: str | None = None
    #: ``text`` is the shorter form.
    is_abridged: bool = False


@dataclass(frozen=True, slots=True)
class AssemblyPolicy:
    """How much of the budget each section may claim first, and how many excerpts are quoted whole.

    ``verbatim_excerpts``: how many of the best-ranked excerpts are quoted word for word (one
    that abridging would not shorten does not count); ``None`` quotes every excerpt whole.
    """

    # Chosen on LoCoMo conversations 1-5 at 1,000 tokens: halving the first five shares (from
    # 8/4/12/4/8 %) let more verbatim excerpts in and lifted answer-in-context there from 0.633 to 0.650.
    shares: Mapping[str, float] = field(
        default_factory=lambda: {
            "profile": 0.04,
            "pattern": 0.02,
            "cell": 0.06,
            "graph": 0.02,
            "summary": 0.04,
            "recent": 0.15,
        }
    )
    # Chosen on LoCoMo conversations 1-5 at 1,000 tokens (docs/retrieval.md#abridged-excerpts): with
    # the excerpts after the first 0, 1, 2 or 3 abridged, 0.684, 0.687, 0.683 and 0.684 of the questions
    # had their answer in the block, against 0.670 with every excerpt whole.
    verbatim_excerpts: int | None = 1


def assemble(
    query: str,
    user_id: str,
    candidates: Mapping[str, Sequence[Candidate]],
    budget: int,
    policy: AssemblyPolicy | None = None,
) -> Context:
    """Choose and order candidates so the rendered block fits in ``budget`` tokens."""
    rules = policy or AssemblyPolicy()
    # Each excerpt's abridged form, taken in its place once the first excerpts chosen are quoted whole.
    shorter = _shorter_forms(candidates.get("episode", ()), rules.verbatim_excerpts)
    # A fact with a shorter form is shown in it, rather than left out, when its turn is shown.
    brief = {
        id(item): replace(item, text=item.shorter, shorter=None, restates_sources=False)
        for item in candidates.get("cell", ())
        if item.restates_sources and item.shorter
    }
    forms = [*(item for items in candidates.values() for item in items), *shorter.values(), *brief.values()]
    costs = {id(item): count_tokens(render_line(item)) + 1 for item in forms}
    stamps = {id(item): _day(item) for item in forms if item.section in DATED_SECTIONS}
    chosen: dict[str, list[Candidate]] = {section: [] for section in SECTION_ORDER}
    used = count_tokens(HEADER) + 1
    section_cost = {section: count_tokens(f"## {SECTION_TITLES[section]}") + 2 for section in SECTION_ORDER}

    taken: set[str] = set()  # one item appears once, even if two sections offer it
    days: set[tuple[str, str]] = set()
    quoted = 0  # excerpts chosen whole: the first ``verbatim_excerpts`` of them are

    def take(section: str, limit: int) -> None:
        nonlocal used, quoted
        for offered in candidates.get(section, ()):
            if offered.id in taken:
                continue
            whole = section != "episode" or rules.verbatim_excerpts is None or quoted < rules.verbatim_excerpts
            item = offered if whole else shorter.get(id(offered), offered)
            day = (section, stamps[id(item)]) if section in DATED_SECTIONS else None
            cost = costs[id(item)] + (0 if chosen[section] else section_cost[section])
            cost += count_tokens(f"[{day[1]}]") + 1 if day is not None and day not in days else 0
            if used + cost > limit:
                continue
            chosen[section].append(item)
            taken.add(item.id)
            # An excerpt that abridging would not shorten does not use up a place quoted whole.
            quoted += section == "episode" and not item.is_abridged and id(offered) in shorter
            if day is not None:
                days.add(day)
            used += cost

    restated = 0

    def drop_restated() -> bool:
        """Leave out what only restates excerpts already chosen; whether anything was."""
        nonlocal used, restated
        # An excerpt of a message burst shows every message of it.
        shown = {
            turn
            for section in DATED_SECTIONS
            for item in chosen[section]
            for turn in item.source_turn_ids or (item.id,)
        }
        dropped = False
        for section in SECTION_ORDER:
            for item in [i for i in chosen[section] if i.restates_sources and i.source_turn_ids]:
                if set(item.source_turn_ids) <= shown:
                    dropped = True
                    if id(item) in brief:  # shown without the words the excerpt shows
                        chosen[section][chosen[section].index(item)] = brief[id(item)]
                        used -= costs[id(item)] - costs[id(brief[id(item)])]
                        continue
                    chosen[section].remove(item)  # it stays in ``taken``: not offered again
                    used -= costs[id(item)] + (0 if chosen[section] else section_cost[section])
                    restated += 1
        return dropped

    def fill() -> None:
        """The excerpts take what is left, then any budget still free goes back to the other sections."""
        take("episode", budget)
        for section in SECTION_ORDER:
            take(section, budget)

    for section in SECTION_ORDER:
        if section != "episode":
            take(section, min(budget, used + int(rules.shares.get(section, 0.0) * budget)))
    fill()
    while drop_restated():  # ends: an item dropped is not offered again
        fill()  # the freed tokens go to further excerpts first
    # Abridged only where the budget needs it: what is left quotes excerpts whole again, best first.
    whole_form = {id(short): item for item in candidates.get("episode", ()) if (short := shorter.get(id(item)))}
    quoted_again: list[tuple[int, Candidate]] = []
    for index, item in enumerate(chosen["episode"]):
        whole_item = whole_form.get(id(item))
        if whole_item is not None and used + costs[id(whole_item)] - costs[id(item)] <= budget:
            used += costs[id(whole_item)] - costs[id(item)]
            chosen["episode"][index] = whole_item
            quoted_again.append((index, item))
    lines, items = _render(chosen)
    tokens = count_joined(lines)
    # Joining lines can cost a token or two more than the parts: abridge again the last excerpts
    # quoted whole above, then drop the weakest episode, until it fits.
    while tokens > budget and quoted_again:
        index, item = quoted_again.pop()
        chosen["episode"][index] = item
        lines, items = _render(chosen)
        tokens = count_joined(lines)
    while tokens > budget and any(chosen.values()):
        section = next(s for s in ("episode", *reversed(SECTION_ORDER)) if chosen[s])
        chosen[section].pop()
        lines, items = _render(chosen)
        tokens = count_joined(lines)
    offered = len({item.id for items in candidates.values() for item in items})
    omitted = offered - len(items) - restated  # what did not fit; a restatement was left out on purpose
    return Context(
        query=query,
        user_id=user_id,
        text="\n".join(lines),
        tokens=tokens,
        token_budget=budget,
        items=tuple(items),
        omitted=omitted,
    )


def _shorter_forms(excerpts: Sequence[Candidate], verbatim: int | None) -> dict[int, Candidate]:
    """By ``id()`` of each excerpt with a shorter form: the excerpt showing it (none when all are quoted whole)."""
    if verbatim is None:
        return {}
    return {
        id(item): replace(item, text=item.shorter, shorter=None, is_abridged=True)
        for item in excerpts
        if item.shorter is not None and len(item.shorter) < len(item.text)
    }


def render_line(item: Candidate) -> str:
    """One candidate as a line of the block (episodes carry their speaker; dates are section-level)."""
    text = one_line(item.text)
    return text if item.section in DATED_SECTIONS else f"- {text}"


def one_line(text: str) -> str:
    """``text`` as one line of a block: its line breaks (a run of them counts once) shown as ``⏎``."""
    text = text.strip()
    return _LINE_BREAKS.sub(LINE_BREAK, text) if _LINE_BREAKS.search(text) else text


def _day(item: Candidate) -> str:
    return "undated" if item.when is None else _date_line(item.when.date())  # the local calendar day


def _said(item: Candidate) -> tuple[bool, float, int, str]:
    """Time order: by instant (wall times sharing a zone compare by the clock face, which repeats an
    hour when clocks go back), then in the order said within one ``add``."""
    return (item.when is not None, item.when.timestamp() if item.when else 0.0, item.order or 0, item.id)


@functools.lru_cache(maxsize=4096)
def _date_line(day: date) -> str:
    """ "Monday 8 May 2023": remembered, as every query dates its candidates again."""
    return f"{day:%A} {day.day} {day:%B %Y}"


def _render(chosen: Mapping[str, Sequence[Candidate]]) -> tuple[list[str], list[ContextItem]]:
    """The block's lines (none when nothing was chosen) and its items, in order."""
    lines = [HEADER]
    items: list[ContextItem] = []
    for section in SECTION_ORDER:
        picked = list(chosen.get(section, ()))
        if not picked:
            continue
        lines.append(f"## {SECTION_TITLES[section]}")
        if section in DATED_SECTIONS:
            # Conversation excerpts read in time order, under one date line per day.
            picked.sort(key=_said)
            day = None
            for item in picked:
                stamp = _day(item)
                if stamp != day:
                    lines.append(f"[{stamp}]")
                    day = stamp
                lines.append(render_line(item))
        else:
            lines.extend(render_line(item) for item in picked)
        items.extend(
            ContextItem(
                kind=item.kind,
                tier=item.tier,
                id=item.id,
                text=item.text,
                tokens=count_tokens(render_line(item)),
                score=item.score,
                source_turn_ids=item.source_turn_ids,
                is_abridged=item.is_abridged,
            )
            for item in picked
        )
    if len(lines) == 1:
        return [], []
    return lines, items
