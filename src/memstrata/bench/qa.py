"""LoCoMo question answering with a configured LLM: token F1, BLEU-1 and LLM-judge accuracy per category.

See docs/benchmark-history.md#locomo-qa-the-full-protocol.
"""

from __future__ import annotations

import hashlib
import math
import re
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from memstrata import LLM, ChatMessage, Completion, ConfigError, Memory, ProviderError
from memstrata.bench.context_metrics import normalize_answer
from memstrata.bench.ingest_search import latency_summary, machine
from memstrata.bench.replay import (
    CATEGORIES,
    ReplayOptions,
    ingest_dialogue,
    load_dialogue,
    question_records,
    replay_settings,
)
from memstrata.config import DATABASE_FILE_NAME, load_settings
from memstrata.errors import HOW_TO_CONFIGURE_LLM as HOW_TO_CONFIGURE
from memstrata.prompts import render

QA_PROMPTS = ("qa_system", "qa_question", "qa_judge")
JUDGE_SCHEMA: dict[str, Any] = {
    "title": "verdict",
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "verdict": {"type": "string", "enum": ["CORRECT", "WRONG"]},
    },
    "required": ["verdict"],
}
DEFAULT_BUDGET = 1000
_ORDINAL = re.compile(r"^(\d+)(?:st|nd|rd|th)$")


# -- metrics --------------------------------------------------------------------------


def answer_tokens(text: str) -> list[str]:
    """The SQuAD-normalised words of an answer (lowercase, no punctuation or articles)."""
    return normalize_answer(text).split()


def token_f1(prediction: str, gold: str) -> float:
    """Harmonic mean of word precision and recall between two answers (SQuAD's F1); 1.0 when both are empty."""
    predicted, expected = answer_tokens(prediction), answer_tokens(gold)
    if not predicted or not expected:
        return float(predicted == expected)
    overlap = sum((Counter(predicted) & Counter(expected)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(predicted), overlap / len(expected)
    return 2 * precision * recall / (precision + recall)


def bleu1(prediction: str, gold: str) -> float:
    """BLEU with unigrams only: clipped word precision times the brevity penalty; 0.0 when either is empty."""
    predicted, expected = answer_tokens(prediction), answer_tokens(gold)
    if not predicted or not expected:
        return 0.0
    precision = sum((Counter(predicted) & Counter(expected)).values()) / len(predicted)
    brevity = 1.0 if len(predicted) > len(expected) else math.exp(1 - len(expected) / len(predicted))
    return brevity * precision


def mentions(text: str, value: str) -> bool:
    """Whether every word of the normalised ``value`` occurs in the normalised ``text`` (12th counts as 12)."""
    wanted = _words(value)
    return bool(wanted) and wanted <= _words(text)


def _words(text: str) -> set[str]:
    return {_ORDINAL.sub(r"\1", word) for word in answer_tokens(text)}


def prompt_records(names: Sequence[str]) -> dict[str, dict[str, str]]:
    """Each prompt template's text and sha256, so a report pins exactly what the model was asked."""
    records = {}
    for name in names:
        text = (files("memstrata.prompts") / f"{name}.txt").read_text(encoding="utf-8")
        records[name] = {"sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(), "text": text}
    return records


@contextmanager
def answering_memory(
    home: Path | None, overrides: dict[str, Any], *, needs_llm_for: str | None
) -> Iterator[tuple[Memory, Memory]]:
    """A Memory that answers with the configured LLM, and one on the same store for ingesting offline.

    Tier work in the ingesting Memory never calls the model, so the memory under test is the
    same with any model and a benchmark's LLM calls are only its own. With ``needs_llm_for``
    (what needs it), raises ConfigError before anything is ingested when no LLM is configured.
    """
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-") as scratch:
        # Without a home: the user's own settings (the LLM in memstrata.toml) and cost log, over a scratch
        # store and no shared working set: a benchmark never writes into the user's memories.
        scratch_store = {} if home else {"storage_url": f"sqlite:///{Path(scratch) / DATABASE_FILE_NAME}"}
        settings = load_settings(home=home, background=False, **{**scratch_store, **overrides})
        if home is None:
            settings = settings.model_copy(update={"working_url": None})
        with Memory(settings=settings) as answering:
            if needs_llm_for is not None and not answering.llm.is_available:
                raise ConfigError(f"{needs_llm_for} needs an LLM and none is configured; {HOW_TO_CONFIGURE}")
            offline = settings.model_copy(update={"llm_provider": "none"})
            with Memory(settings=offline, embedder=answering.embedder) as ingesting:
                yield answering, ingesting


# -- the runner -----------------------------------------------------------------------


@dataclass(kw_only=True, frozen=True, slots=True)
class QaOptions(ReplayOptions):
    """What to run; ``None`` means the Memory's own setting."""

    token_budget: int = DEFAULT_BUDGET
    judge: bool = True


def run_qa(options: QaOptions, console: Console | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Ingest the chosen conversations, answer each question from its context, score and judge the answers."""
    console = console or Console(stderr=True)
    dialogue = load_dialogue(options.data, options.conversations, options.limit)
    usable = question_records(dialogue, options.limit)  # the same questions as the retrieval benchmark
    overrides = replay_settings(embedder=options.embedder, threads=options.threads)
    with answering_memory(options.home, overrides, needs_llm_for="the QA benchmark (--qa)") as (memory, ingesting):
        ingest_seconds = ingest_dialogue(ingesting, dialogue.turns, console)
        records = _answer_all(memory, usable, options, console)
        if not any("answer" in record for record in records):
            raise ProviderError(f"every answer call failed; the first error: {records[0]['error']}")
        report = _report(
            memory,
            options,
            records,
            conversations=[dialogue.number_of[c] for c in dialogue.chosen],
            turn_count=len(dialogue.turns),
            ingest_seconds=ingest_seconds,
        )
    return report, records


def _answer_all(
    memory: Memory, questions: Sequence[dict[str, Any]], options: QaOptions, console: Console
) -> list[dict[str, Any]]:
    llm = memory.llm
    system = render("qa_system")
    records = []
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("answering", total=len(questions))
        for question in questions:
            record: dict[str, Any] = {
                "conversation": question["conversation"],
                "category": question["category"],
                "question": question["question"],
                "gold": question["answer"],
            }
            started = time.perf_counter()
            context = memory.context(
                record["question"], user_id=record["conversation"], token_budget=options.token_budget
            )
            record["context_tokens"], record["context_ms"] = context.tokens, _since(started)
            message = ChatMessage("user", render("qa_question", question=record["question"]))
            started = time.perf_counter()
            try:
                completion = llm.generate([message], system=system, memory=context.text or None, purpose="bench_qa")
                record["answer_ms"] = _since(started)
            except ProviderError as exc:
                record["error"] = str(exc)
            else:
                _score(record, completion)
                if options.judge:
                    _judge(llm, record)
            records.append(record)
            progress.update(task, advance=1)
    return records


def _score(record: dict[str, Any], completion: Completion) -> None:
    answer = completion.text.strip()
    record |= {
        "answer": answer,
        "model": completion.model,
        "f1": token_f1(answer, record["gold"]),
        "bleu1": bleu1(answer, record["gold"]),
        "tokens_in": completion.usage.input_tokens,
        "tokens_out": completion.usage.output_tokens,
        "tokens_cached": completion.usage.cached_tokens,
    }


def _judge(llm: LLM, record: dict[str, Any]) -> None:
    prompt = render("qa_judge", question=record["question"], gold=record["gold"], answer=record["answer"])
    started = time.perf_counter()
    try:
        verdict = llm.generate([ChatMessage("user", prompt)], json_schema=JUDGE_SCHEMA, purpose="bench_judge")
        record["judge_ms"] = _since(started)
    except ProviderError as exc:
        record["judge_error"] = str(exc)
        return
    label = str((verdict.data or {}).get("verdict", "")).strip().upper()
    if label not in ("CORRECT", "WRONG"):
        record["judge_error"] = f"the judge answered {label or 'nothing'!r}, not CORRECT or WRONG"
        return
    record |= {
        "correct": label == "CORRECT",
        "judge_model": verdict.model,
        "judge_tokens_in": verdict.usage.input_tokens,
        "judge_tokens_out": verdict.usage.output_tokens,
    }


def _since(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()`` value)."""
    return (time.perf_counter() - started) * 1000


def _scores(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    answered = [r for r in records if "answer" in r]
    judged = [r for r in answered if "correct" in r]
    scores: dict[str, float] = {"questions": float(len(records)), "answered": float(len(answered))}
    if answered:
        scores["f1"] = statistics.fmean(r["f1"] for r in answered)
        scores["bleu1"] = statistics.fmean(r["bleu1"] for r in answered)
    if judged:
        scores["judged"] = float(len(judged))
        scores["judge_accuracy"] = statistics.fmean(float(r["correct"]) for r in judged)
    return scores


def _mean(records: Sequence[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in records if key in r]
    return statistics.fmean(values) if values else None


def _report(
    memory: Memory,
    options: QaOptions,
    records: list[dict[str, Any]],
    *,
    conversations: list[int],
    turn_count: int,
    ingest_seconds: float,
) -> dict[str, Any]:
    groups = {"overall": records} | {
        f"category {c} ({name})": [r for r in records if r["category"] == c] for c, name in CATEGORIES.items()
    }
    return {
        "benchmark": "locomo-qa",
        "measured_at": datetime.now(UTC).isoformat(),
        "machine": machine(),
        "embedder": memory.embedder.model_id,
        "llm": {
            "provider": memory.llm.name,
            "answer_models": sorted({r["model"] for r in records if "model" in r}),
            "judge_models": sorted({r["judge_model"] for r in records if "judge_model" in r}),
        },
        "prompts": prompt_records(QA_PROMPTS),
        "protocol": {
            "context": "Memory.context(question, user_id=conversation, token_budget=B) as the memory block",
            "f1": "SQuAD token F1 on normalised answers (lowercase, no punctuation or articles)",
            "bleu1": "unigram BLEU with brevity penalty on the same tokens",
            "judge": "same LLM, JSON verdict CORRECT or WRONG against the gold answer",
            "ingest": "tier work offline (no LLM), flushed before answering",
        },
        "settings": memory.settings.model_dump(mode="json", exclude={"home", "storage_url", "llm_api_key"}),
        "token_budget": options.token_budget,
        "conversations": conversations,
        "turns": turn_count,
        "questions": len(records),
        "answer_errors": sum("error" in r for r in records),
        "judge_errors": sum("judge_error" in r for r in records),
        "ingest_seconds": ingest_seconds,
        "scores": {group: _scores(subset) for group, subset in groups.items() if subset},
        "tokens_per_question": {
            key: _mean(records, key)
            for key in ("context_tokens", "tokens_in", "tokens_out", "tokens_cached", "judge_tokens_in")
        },
        "latency_ms": {
            step: latency_summary([r[f"{step}_ms"] for r in records if f"{step}_ms" in r])
            for step in ("context", "answer", "judge")
        },
    }
