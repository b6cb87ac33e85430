"""Commands over the LLM cost log: costs."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from memstrata import CostSummary, CostTotals, cost_summary
from memstrata.cli.common import HomeOption, JsonOption, console, print_json, shown
from memstrata.config import load_settings


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the root app."""
    app.command()(costs)


def costs(
    since: Annotated[
        str | None, typer.Option("--since", help="Only calls since a duration ago (7d, 12h, 30m) or an ISO date.")
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Sum the logged LLM calls: tokens and estimated dollars per model and per purpose, and the cached share.

    Example: memstrata costs --since 7d
    """
    summary = cost_summary(load_settings(home=home), since)
    if as_json:
        print_json(summary)
    else:
        _print(summary)


def _print(summary: CostSummary) -> None:
    if summary.total.calls == 0:
        window = f" since {summary.since:%Y-%m-%d %H:%M} UTC" if summary.since else ""
        console.print(f"no LLM calls logged{window} in {summary.path}", highlight=False, markup=False)
        return
    for title, groups in (("per model", summary.by_model), ("per purpose", summary.by_purpose)):
        table = Table("", "calls", "input", "cached", "output", "est. USD", title=title)
        for name, totals in groups.items():
            table.add_row(shown(name), *_cells(totals))
        table.add_row("total", *_cells(summary.total), style="bold")
        console.print(table)
    total = summary.total
    console.print(
        f"{total.calls} calls from {summary.first:%Y-%m-%d %H:%M} to {summary.last:%Y-%m-%d %H:%M} UTC; "
        f"{total.cached_share:.1%} of input tokens came from a cached prefix; "
        "dollar amounts are estimates from the price table (llm_prices)",
        highlight=False,
    )
    if total.unpriced_calls:
        console.print(
            f"* leaves out {total.unpriced_calls} call(s) to models with no price; "
            "add them to llm_prices in memstrata.toml (? = no price at all)",
            highlight=False,
        )


def _cells(totals: CostTotals) -> tuple[str, str, str, str, str]:
    if totals.unpriced_calls == totals.calls:
        dollars = "?"
    else:
        dollars = f"{totals.cost_usd:.4f}" + ("*" if totals.unpriced_calls else "")
    return (
        str(totals.calls),
        f"{totals.input_tokens:,}",
        f"{totals.cached_tokens:,}",
        f"{totals.output_tokens:,}",
        dollars,
    )
