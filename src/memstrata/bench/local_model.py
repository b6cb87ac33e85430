"""How fast the local provider's model reads a prompt and writes a reply, per thread count.

Each run sends a chat prompt shaped like memstrata's (instructions, a memory block, a question)
twice with a fresh first line, so llama.cpp's prompt cache never answers: once for one token
(reading the prompt dominates) and once for up to ``max_tokens`` tokens. Prompt speed is the
prompt's tokens over the first call's time; generation speed is the reply's tokens past the
first over what the second call took beyond reading.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstrata import LLM, ChatMessage, InvalidInput, Memory
from memstrata.bench.ingest_search import machine

SYSTEM = "You are a helpful assistant with a memory of earlier conversations. Answer from the memory when it helps."
FACTS = (
    "My sister Clara lives in Porto and works as a nurse at the children's hospital.",
    "I switched from tea to coffee last winter, but only one cup before noon.",
    "Our team moved the product launch from March to the second week of May.",
    "The dog, Pepper, is allergic to chicken, so we buy the salmon food now.",
    "I'm training for a half marathon in October; long runs are on Sundays.",
    "The landlord promised to fix the bathroom window before the end of the month.",
    "My manager asked for the quarterly report in a slide deck rather than a document.",
    "We booked the cabin near the lake for the first weekend of August.",
)
QUESTION = "What do you remember about my family and my plans this year? Tell me in detail."


@dataclass(frozen=True, kw_only=True, slots=True)
class LocalModelOptions:
    """What ``bench local-model`` runs."""

    threads: tuple[int, ...] = (1, 2)
    runs: int = 5
    memory_lines: int = 24
    max_tokens: int = 128
    model: str | None = None
    """A GGUF file (``llm_model``); None for the bundled one."""


def run_local_model(options: LocalModelOptions) -> dict[str, Any]:
    """Prompt and generation tokens/s of the local model for each thread count, JSON-ready."""
    if options.runs < 1 or options.memory_lines < 1 or options.max_tokens < 2 or not options.threads:
        raise InvalidInput("runs and memory lines must be at least 1, max tokens at least 2, and threads given")
    if any(count < 1 for count in options.threads):
        raise InvalidInput(f"thread counts must be at least 1, not {list(options.threads)}")
    measured = [_measure(count, options) for count in options.threads]
    return {
        "benchmark": "local-model",
        "llm": measured[0][0],
        "runs": options.runs,
        "memory_lines": options.memory_lines,
        "max_tokens": options.max_tokens,
        "machine": machine(),
        "results": [row for _, row in measured],
    }


def _measure(threads: int, options: LocalModelOptions) -> tuple[str, dict[str, Any]]:
    # The provider is built as users build it: a Memory with llm_provider=local (its store is a throwaway).
    with (
        tempfile.TemporaryDirectory(prefix="memstrata-bench-") as home,
        Memory(
            Path(home),
            embedder="hash",
            background=False,
            llm_provider="local",
            llm_model=options.model,
            llm_threads=threads,
            chat_max_tokens=options.max_tokens,
        ) as memory,
    ):
        llm = memory.llm
        started = time.monotonic()
        llm.generate([ChatMessage("user", "Hello.")], max_tokens=1)  # loads the model
        load_seconds = time.monotonic() - started
        prompt_rates, generation_rates, prompt_tokens, reply_tokens = [], [], [], []
        for run in range(options.runs):
            read_tokens, _, read_seconds = _call(llm, f"reading {threads}/{run}", options.memory_lines, 1)
            rate = read_tokens / read_seconds
            prompt_rates.append(rate)
            tokens, written, seconds = _call(llm, f"writing {threads}/{run}", options.memory_lines, options.max_tokens)
            writing = seconds - tokens / rate
            if written > 1 and writing > 0:
                generation_rates.append((written - 1) / writing)
            prompt_tokens.append(tokens)
            reply_tokens.append(written)
    return llm.name, {
        "threads": threads,
        "load_seconds": round(load_seconds, 2),
        "prompt_tokens": statistics.median(prompt_tokens),
        "reply_tokens": statistics.median(reply_tokens),
        "prompt_tokens_per_s": round(statistics.median(prompt_rates), 1),
        "generated_tokens_per_s": round(statistics.median(generation_rates), 1) if generation_rates else None,
    }


def _call(llm: LLM, label: str, lines: int, max_tokens: int) -> tuple[int, int, float]:
    """Send a fresh prompt (its first line is new, so little is cached): prompt tokens read, reply tokens, seconds."""
    block = "\n".join(f"- {FACTS[index % len(FACTS)]}" for index in range(lines))
    memory = f"Run {label}.\n## Memory\n{block}"
    started = time.monotonic()
    completion = llm.generate([ChatMessage("user", QUESTION)], system=SYSTEM, memory=memory, max_tokens=max_tokens)
    seconds = time.monotonic() - started
    usage = completion.usage
    return usage.input_tokens - usage.cached_tokens, usage.output_tokens, seconds
