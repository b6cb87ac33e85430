"""What the ``memstrata bench`` commands share: their options and how they write JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

DataOption = Annotated[Path | None, typer.Option(help="Path to locomo10.json (default: found under ../shared).")]
EmbedderOption = Annotated[str | None, typer.Option(help="Embedder name (default: settings).")]
ThreadsOption = Annotated[int | None, typer.Option(help="Embedding threads (default: settings).")]
HomeOption = Annotated[Path | None, typer.Option(help="Data directory (default: a temporary one).")]
JsonOutOption = Annotated[Path | None, typer.Option("--json", help="Write the results here as JSON.")]


def write_json(path: Path | None, value: object) -> None:
    """Write ``value`` to ``path`` as indented JSON (nothing when ``path`` is None)."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value, indent=2) + "\n")
