"""Answer-in-context on LoCoMo for several numbers of excerpts quoted whole, on one stored memory.

    memstrata bench locomo --home results/locomo-home      # builds the store once (or reuse one)
    python scripts/context_sweep.py results/locomo-home --quoted whole 0 1 2 3 [--budget 1000]

For each setting it asks every question of categories 1-4 through ``Memory.context`` and
prints the share whose answer is in the block (the benchmark's test), on conversations
1-5 (where the setting was chosen), 6-10 (held out) and all ten, with the questions
answered and the median time of a call (query embedding included). ``whole`` quotes every
excerpt whole (``verbatim=True``); a number N quotes the first N chosen excerpts whole and
abridges the rest (``AssemblyPolicy.verbatim_excerpts``; the default is 1). The store is
read with ``record_visits`` off, so the runs do not change it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from pathlib import Path

from memstrata import Memory
from memstrata.bench.context_metrics import answer_in_context
from memstrata.bench.datasets import find_locomo, load_locomo
from memstrata.bench.replay import CATEGORIES, dia_ids, turn_id


def main() -> None:
    """Parse the arguments, ask every question once per setting and print the shares."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path, help="a data directory built by `memstrata bench locomo --home`")
    parser.add_argument("--quoted", nargs="+", default=["whole", "1"], help="'whole' or a number of excerpts")
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--data", type=Path, default=None, help="locomo10.json (default: found under ../shared)")
    args = parser.parse_args()
    if not (args.home / "memstrata.db").exists():
        parser.error(f"{args.home} holds no memstrata store; build one with `memstrata bench locomo --home`")
    settings = [None if value == "whole" else _count(parser, value) for value in args.quoted]
    turns, questions = load_locomo(find_locomo(args.data))
    known = {turn_id(turn) for turn in turns}

    def has_evidence(conversation: str, evidence: tuple[str, ...]) -> bool:
        return any(f"{conversation}:{dia}" in known for item in evidence for dia in dia_ids(item))

    order = list(dict.fromkeys(turn.conversation for turn in turns))
    asked = [
        (question, order.index(question.conversation) + 1)
        for question in questions
        if question.category in CATEGORIES and has_evidence(question.conversation, question.evidence)
    ]
    with Memory(args.home, timezone="UTC", record_visits=False) as memory:
        default = memory.assembly_policy
        for quoted in settings:
            memory.assembly_policy = default if quoted is None else replace(default, verbatim_excerpts=quoted)
            answered = {"1-5": 0, "6-10": 0}
            total = {"1-5": 0, "6-10": 0}
            times = []
            for question, number in asked:
                started = time.perf_counter()
                context = memory.context(
                    question.question,
                    user_id=question.conversation,
                    token_budget=args.budget,
                    verbatim=quoted is None,
                )
                times.append((time.perf_counter() - started) * 1000)
                half = "1-5" if number <= 5 else "6-10"
                total[half] += 1
                answered[half] += answer_in_context(str(question.answer), context.text)
            everything = sum(answered.values())
            print(
                f"quoted {'whole' if quoted is None else quoted}: "
                f"1-5 {answered['1-5'] / total['1-5']:.3f}, 6-10 {answered['6-10'] / total['6-10']:.3f}, "
                f"all {everything / len(asked):.3f} ({everything} of {len(asked)}); "
                f"context p50 {statistics.median(times):.1f} ms",
                flush=True,
            )


def _count(parser: argparse.ArgumentParser, value: str) -> int:
    if not value.isdigit():
        parser.error(f"--quoted takes 'whole' or a number ≥ 0, not {value!r}")
    return int(value)


if __name__ == "__main__":
    main()
