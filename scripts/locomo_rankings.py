"""Compare two LoCoMo runs question by question: the guard that a refactor changed no ranking.

    memstrata bench locomo --details before.jsonl            # on the code before the change
    python scripts/locomo_rankings.py keep before.jsonl before-rankings.jsonl
    memstrata bench locomo --details after.jsonl             # on the code after it
    python scripts/locomo_rankings.py diff before-rankings.jsonl after.jsonl

``docs/benchmarks/locomo-rankings.jsonl.gz`` holds the rankings of the default run of all
ten conversations (the run in docs/benchmarks.md): diff a new full run against it. Runs of
fewer conversations rank differently (full-text statistics span the whole store), so
compare them only with a run of the same conversations. Consolidation follows the
background worker's timing, so a context's ``tokens`` and ``items`` may differ between two
runs of the same code; ``ranked`` and ``answer_in_context`` should not.

``keep`` reduces a details file to what a refactor must not change and nothing of the
dataset's text: per question its conversation, category, ranked turn ids per search mode,
and per budget whether the answer and evidence were in ``context()`` and its tokens.
``diff`` reads either form and prints every question whose rankings or context results
differ, then a count; it exits 1 when any differ.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

MODES = ("hybrid", "fulltext", "vector")
CONTEXT_FIELDS = ("tokens", "answer_in_context", "evidence_shown", "items")


def reduced(record: dict[str, Any]) -> dict[str, Any]:
    """The parts of one details line a behaviour-preserving change keeps exactly (no question or answer text)."""
    return {
        "conversation": record["conversation"],
        "category": record["category"],
        "ranked": {mode: record[mode]["ranked"] for mode in MODES if mode in record},
        "context": {
            budget: {name: entry[name] for name in CONTEXT_FIELDS if name in entry}
            for budget, entry in record.get("context", {}).items()
        },
    }


def read(path: Path) -> list[dict[str, Any]]:
    """A details or rankings file (``.gz`` too), reduced, one entry per question in the order asked."""
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [line if "ranked" in line else reduced(line) for line in lines]


def main() -> None:
    """``keep`` or ``diff``, as the module says."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    keep = commands.add_parser("keep", help="reduce a details file to its rankings")
    keep.add_argument("details", type=Path)
    keep.add_argument("out", type=Path)
    diff = commands.add_parser("diff", help="list the questions whose results differ")
    diff.add_argument("before", type=Path)
    diff.add_argument("after", type=Path)
    arguments = parser.parse_args()
    if arguments.command == "keep":
        entries = read(arguments.details)
        arguments.out.write_text("".join(json.dumps(entry, sort_keys=True) + "\n" for entry in entries))
        print(f"{len(entries)} questions kept in {arguments.out}")
        return
    before, after = read(arguments.before), read(arguments.after)
    if len(before) != len(after):
        sys.exit(f"{len(before)} questions before, {len(after)} after: not the same run")
    changed = [number for number, (old, new) in enumerate(zip(before, after, strict=True)) if old != new]
    for number in changed:
        old, new = before[number], after[number]
        parts = [key for key in ("ranked", "context") if old[key] != new[key]]
        print(f"question {number} ({old['conversation']}, category {old['category']}): {', '.join(parts)} differ")
    print(f"{len(changed)} of {len(before)} questions differ")
    sys.exit(1 if changed else 0)


if __name__ == "__main__":
    main()
