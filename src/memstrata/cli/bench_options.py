"""What the ``memstrata bench`` commands share: their options and how they write JSON."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer

DataOption = Annotated[Path | None, typer.Option(help="Path to locomo10.json (default: found under ../shared).")]
EmbedderOption = Annotated[str | None, typer.Option(help="Embedder name (default: settings).")]
ThreadsOption = Annotated[int | None, typer.Option(help="Embedding threads (default: settings).")]
HomeOption = Annotated[Path | None, typer.Option(help="Data directory (default: a temporary one).")]
JsonOutOption = Annotated[Path | None, typer.Option("--json", help="Write the results here as JSON.")]
ConversationsOption = Annotated[str | None, typer.Option(help="Which conversations, e.g. 1-5 or 1,3,7 (default: all).")]
QuestionLimitOption = Annotated[int | None, typer.Option(help="Ask at most this many questions.")]
DetailsOption = Annotated[Path | None, typer.Option(help="Write one JSON line per question here.")]


def write_json(path: Path | None, value: object) -> None:
    """Write ``value`` to ``path`` as indented JSON (nothing when ``path`` is None)."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value, indent=2) + "\n")


def write_json_lines(path: Path | None, records: Iterable[object]) -> None:
    """Write each of ``records`` to ``path`` as one JSON line (nothing when ``path`` is None)."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(record) + "\n" for record in records))


def chosen_conversations(conversations: str | None, limit: int | None) -> tuple[int, ...]:
    """The LoCoMo conversations ``--conversations`` names (empty: all), ``--limit`` checked; InvalidInput else."""
    from memstrata.bench.replay import parse_conversations
    from memstrata.errors import InvalidInput

    if limit is not None and limit < 1:
        raise InvalidInput(f"--limit must be at least 1, not {limit}")
    try:
        return parse_conversations(conversations)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from exc
