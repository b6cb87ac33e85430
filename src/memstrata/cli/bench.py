"""``memstrata bench …``: benchmarks that print figures and write JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from memstrata.cli.common import console, print_json

app = typer.Typer(help="Benchmarks: measured figures, written as JSON.", no_args_is_help=True)


@app.command("ingest-search")
def ingest_search(
    turns: Annotated[int, typer.Option("--turns", "-n", help="How many turns to ingest for one user.")] = 2000,
    source: Annotated[str, typer.Option(help="synthetic or locomo (cycled when --turns exceeds it).")] = "locomo",
    data: Annotated[Path | None, typer.Option(help="Path to locomo10.json (default: found under ../shared).")] = None,
    embedder: Annotated[str | None, typer.Option(help="Embedder name (default: settings).")] = None,
    threads: Annotated[int | None, typer.Option(help="Embedding threads (default: settings).")] = None,
    batch: Annotated[int, typer.Option(help="Messages per add() call during bulk ingest.")] = 64,
    queries: Annotated[int, typer.Option(help="Search queries to time.")] = 100,
    singles: Annotated[int, typer.Option(help="Single-exchange adds to time.")] = 50,
    home: Annotated[Path | None, typer.Option(help="Data directory (default: a temporary one).")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the results here as JSON.")] = None,
) -> None:
    """Ingest N turns, then time single adds and searches beside the bare embedder.

    Example: memstrata bench ingest-search --turns 10000 --json results/ingest-10k.json
    """
    from memstrata.bench.ingest_search import IngestSearchOptions, run_ingest_search

    options = IngestSearchOptions(
        turns=turns,
        source=source,
        data=data,
        embedder=embedder,
        threads=threads,
        batch=batch,
        queries=queries,
        singles=singles,
        home=home,
    )
    result = run_ingest_search(options, console=console)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(__import__("json").dumps(result, indent=2) + "\n")
    table = Table("measure", "value", title=f"ingest-search, {turns:,} turns ({result['embedder']})")
    for key, value in result["summary"].items():
        table.add_row(key, f"{value:,.2f}" if isinstance(value, float) else str(value))
    console.print(table)
    if json_out is None:
        print_json(result)
