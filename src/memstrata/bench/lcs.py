"""LCS, long-context recall: facts seeded many turns ago, recalled through memory or through a recent-turns window.

LCS is the share of facts recalled: through ``Memory.context`` under a token budget, or
through the last turns that fit the same budget. See docs/benchmarks.md#long-context-recall-lcs.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memstrata import ChatMessage, InvalidInput, Memory, ProviderError, count_tokens
from memstrata.bench.datasets import synthetic_texts
from memstrata.bench.ingest_search import latency_summary, machine
from memstrata.bench.qa import answering_memory, mentions, prompt_records
from memstrata.prompts import render
from memstrata.retrieval.abridge import abridge
from memstrata.validation import check_budget

USER = "lcs-user"
SESSION = "lcs"
START = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
WINDOW_HEADER = "# Memory\n## Earlier in this session"

_RELATIONS = ("sister", "brother", "mother", "father", "aunt", "uncle", "cousin", "neighbour", "manager", "best friend")
_THINGS = ("passport", "spare keys", "tax papers", "birth certificate", "winter gloves", "old photos", "bike pump")
_LOCKS = ("gym locker", "bike lock", "storage unit", "garage door", "office safe", "suitcase lock")
_NAMES = (
    "Ilse", "Tomasz", "Marguerite", "Oskar", "Priya", "Dagny", "Lorcan", "Esperanza", "Kofi", "Yuki", "Hamish",
    "Solveig", "Bartholomew", "Anouk", "Ravi", "Wilhelmina",
)  # fmt: skip
_CITIES = (
    "Trondheim", "Valparaiso", "Ljubljana", "Hobart", "Tbilisi", "Cork", "Bilbao", "Kraków", "Halifax", "Tampere",
    "Arequipa", "Dunedin", "Tartu", "Bergamo",
)  # fmt: skip
_JOBS = (
    "a lighthouse keeper", "a beekeeper", "a tram driver", "a violin maker", "a glassblower", "a court stenographer",
    "a cartographer", "a sommelier", "a locksmith", "a puppeteer", "a blacksmith", "an air traffic controller",
)  # fmt: skip
_DISHES = (
    "mushroom risotto", "lamb tagine", "pierogi", "shakshuka", "goulash", "bibimbap", "ceviche", "moussaka",
    "pad see ew", "fish pie", "jollof rice", "ratatouille",
)  # fmt: skip
_PLACES = (
    "blue drawer", "hall cupboard", "red box under the bed", "green suitcase", "metal tin in the attic",
    "shoebox in the study", "glovebox of the car", "basket by the front door", "top shelf of the wardrobe",
)  # fmt: skip
_MONTHS = ("January", "February", "April", "May", "June", "July", "August", "September", "October", "November")
_ACKS = ("Got it, I'll remember that.", "Noted.", "Thanks for telling me.", "Okay, I've got that.")
_FILLER_REPLIES = ("Sounds like a busy day.", "That's interesting.", "Thanks for sharing.", "I see.", "Fair enough.")

# (statement, question, slot names, value pool); {who} ranges over the slot names.
_TEMPLATES: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...] | None], ...] = (
    ("My {who}'s name is {value}.", "What is my {who}'s name?", _RELATIONS, _NAMES),
    ("My {who} lives in {value}.", "Where does my {who} live?", _RELATIONS, _CITIES),
    ("My {who} works as {value}.", "What does my {who} do for a living?", _RELATIONS, _JOBS),
    ("My {who}'s favourite dish is {value}.", "What is my {who}'s favourite dish?", _RELATIONS, _DISHES),
    ("My {who}'s birthday is on {value}.", "When is my {who}'s birthday?", _RELATIONS, None),
    ("I keep my {who} in the {value}.", "Where do I keep my {who}?", _THINGS, _PLACES),
    ("The code of my {who} is {value}.", "What is the code of my {who}?", _LOCKS, None),
)


@dataclass(frozen=True, slots=True)
class Fact:
    """One seeded fact: what the user says, what is asked later, and the value the answer must contain."""

    statement: str
    question: str
    value: str


@dataclass(kw_only=True, frozen=True, slots=True)
class LcsOptions:
    """What to run; ``None`` means the Memory's own setting."""

    facts: int = 20
    filler: int = 200
    token_budget: int = 1000
    seed: int = 11
    embedder: str | None = None
    home: Path | None = None


def max_facts() -> int:
    """How many distinct facts the generator can make."""
    return sum(len(slots) for _, _, slots, _ in _TEMPLATES)


def generate_facts(count: int, seed: int = 11) -> list[Fact]:
    """``count`` distinct facts with distinct values, the same for the same seed; each question has one answer."""
    if not 1 <= count <= max_facts():
        raise InvalidInput(f"facts must be between 1 and {max_facts()}, not {count}")
    rng = random.Random(seed)
    slots = [(number, who) for number, (_, _, names, _) in enumerate(_TEMPLATES) for who in names]
    rng.shuffle(slots)
    pools: dict[int, list[str]] = {}
    for number, (_, _, _, values) in enumerate(_TEMPLATES):
        pools[number] = rng.sample(values, len(values)) if values is not None else []
    # Five-digit codes are never a filler's number; one month per birthday keeps the dates distinct.
    codes = iter(rng.sample(range(10_000, 100_000), len(_LOCKS)))
    months = iter(rng.sample(_MONTHS, len(_MONTHS)))
    facts = []
    for number, who in slots[:count]:
        statement, question, _, values = _TEMPLATES[number]
        if values is not None:
            value = pools[number].pop()
        elif "code" in statement:
            value = str(next(codes))
        else:
            value = f"{rng.randint(1, 28)} {next(months)}"
        facts.append(Fact(statement.format(who=who, value=value), question.format(who=who), value))
    return facts


def conversation(facts: list[Fact], filler: int, seed: int = 11) -> list[tuple[str, str]]:
    """The scripted turns as (role, text): each fact with an acknowledgement, then ``filler`` unrelated turns."""
    if filler < 0:
        raise InvalidInput(f"filler must be ≥ 0, not {filler}")
    turns: list[tuple[str, str]] = []
    for number, fact in enumerate(facts):
        turns += [("user", fact.statement), ("assistant", _ACKS[number % len(_ACKS)])]
    for number, text in enumerate(synthetic_texts((filler + 1) // 2, seed=seed)):
        turns += [("user", text), ("assistant", _FILLER_REPLIES[number % len(_FILLER_REPLIES)])]
    return turns[: 2 * len(facts) + filler]


def recent_window(turns: list[tuple[str, str]], token_budget: int) -> tuple[str, int]:
    """The last turns that fit ``token_budget`` tokens, rendered like a context block; (text, turn count)."""
    used = count_tokens(WINDOW_HEADER) + 1
    kept: list[str] = []
    for role, text in reversed(turns):
        line = f"{role}: {text}"
        cost = count_tokens(line) + 1
        if used + cost > token_budget:
            break
        kept.append(line)
        used += cost
    return "\n".join([WINDOW_HEADER, *reversed(kept)]) if kept else "", len(kept)


def in_text(statement: str, text: str) -> bool:
    """Whether ``statement`` appears in ``text``, ignoring case and runs of whitespace."""
    return " ".join(statement.split()).casefold() in " ".join(text.split()).casefold()


def run_lcs(options: LcsOptions) -> dict[str, Any]:
    """Seed, bury and probe the facts; report LCS for memstrata and the recent-turns baseline."""
    check_budget(options.token_budget)
    facts = generate_facts(options.facts, options.seed)
    turns = conversation(facts, options.filler, options.seed)
    window, window_turns = recent_window(turns, options.token_budget)
    # Seeded dates are UTC: read them so, whatever the machine's `timezone` setting.
    overrides: dict[str, Any] = {"timezone": "UTC", **({"embedder": options.embedder} if options.embedder else {})}
    with answering_memory(options.home, overrides, needs_llm_for=None) as (memory, ingesting):
        started = time.perf_counter()
        for number in range(0, len(turns), 2):
            exchange = [
                {"role": role, "content": text, "id": f"lcs-{options.seed}-{number + offset}"}
                for offset, (role, text) in enumerate(turns[number : number + 2])
            ]
            moment = START + timedelta(minutes=number)
            ingesting.add(exchange, user_id=USER, session_id=SESSION, timestamp=moment)
        ingesting.flush(timeout=None)
        ingest_seconds = time.perf_counter() - started
        records = [_probe(memory, fact, window, options.token_budget) for fact in facts]
        llm = memory.llm.name if memory.llm.is_available else None
        report: dict[str, Any] = {
            "benchmark": "lcs",
            "measured_at": datetime.now(UTC).isoformat(),
            "machine": machine(),
            "embedder": memory.embedder.model_id,
            "settings": memory.settings.model_dump(mode="json", exclude={"home", "storage_url", "llm_api_key"}),
            "facts": len(facts),
            "filler_turns": options.filler,
            "turns": len(turns),
            "seed": options.seed,
            "token_budget": options.token_budget,
            "baseline_window_turns": window_turns,
            "baseline_tokens": count_tokens(window),
            "context_tokens_mean": statistics.fmean(r["context_tokens"] for r in records),
            "ingest_seconds": ingest_seconds,
            "latency_ms": {"context": latency_summary([r["context_ms"] for r in records])},
            "in_context": _compare(records, "in_context", "in_window"),
            "answers": None,
            "per_fact": records,
        }
        if llm is not None:
            report["answers"] = _compare(records, "answer_recalled", "baseline_answer_recalled") | {
                "llm": llm,
                "models": sorted({r["model"] for r in records if "model" in r}),
                "errors": sum("error" in r for r in records),
                "prompts": prompt_records(["agent_system"]),
            }
    return report


def _probe(memory: Memory, fact: Fact, window: str, budget: int) -> dict[str, Any]:
    started = time.perf_counter()
    context = memory.context(fact.question, user_id=USER, token_budget=budget)
    record: dict[str, Any] = {
        "statement": fact.statement,
        "question": fact.question,
        "value": fact.value,
        "context_tokens": context.tokens,
        "context_ms": (time.perf_counter() - started) * 1000,
        # An excerpt after the first is abridged ("cousin's birthday on 20 August."): still the fact, shown.
        "in_context": in_text(fact.statement, context.text) or in_text(abridge(fact.statement), context.text),
        "in_context_verbatim": in_text(fact.statement, context.text),
        "in_window": in_text(fact.statement, window),
    }
    llm = memory.llm
    if not llm.is_available:
        return record
    system = render("agent_system", today=START.strftime("%A %d %B %Y"))
    question = [ChatMessage("user", fact.question)]
    try:
        answer = llm.generate(question, system=system, memory=context.text or None, purpose="bench_lcs")
        baseline = llm.generate(question, system=system, memory=window or None, purpose="bench_lcs")
    except ProviderError as exc:
        return record | {"error": str(exc), "answer_recalled": False, "baseline_answer_recalled": False}
    return record | {
        "answer": answer.text,
        "baseline_answer": baseline.text,
        "model": answer.model,
        "answer_recalled": mentions(answer.text, fact.value),
        "baseline_answer_recalled": mentions(baseline.text, fact.value),
    }


def _compare(records: list[dict[str, Any]], ours: str, baseline: str) -> dict[str, Any]:
    recalled = sum(bool(r[ours]) for r in records)
    kept = sum(bool(r[baseline]) for r in records)
    total = len(records)
    return {
        "memstrata": {"recalled": recalled, "lcs": recalled / total},
        "baseline": {"recalled": kept, "lcs": kept / total},
        "ratio": (recalled / kept) if kept else None,
        "gain": (recalled - kept) / total,
    }
