"""The examples of docs/integrations.md, read so the tests can run them as written."""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"


def docs_example(heading: str) -> str:
    """The first Python block under ``## heading`` in docs/integrations.md."""
    section = DOCS.read_text(encoding="utf-8").split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]
