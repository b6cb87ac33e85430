"""The LLM cost log as the fronts show it."""

from __future__ import annotations

from datetime import datetime

from memstrata.config import Settings
from memstrata.remote.costs import COST_LOG_FILE_NAME, CostSummary, parse_since, summarize_costs


def cost_summary(settings: Settings, since: str | datetime | None = None) -> CostSummary:
    """Sum the LLM calls logged in ``settings``' data directory, those since ``since`` if given.

    ``since`` is a time, or text: a duration back from now (``90m``, ``12h``, ``7d``, ``2w``)
    or an ISO date or time. Raises InvalidInput for text that is neither.

    >>> cost_summary(load_settings(), since="7d").total.calls    # doctest: +SKIP
    12
    """
    start = parse_since(since) if isinstance(since, str) else since
    return summarize_costs(settings.data_dir / COST_LOG_FILE_NAME, since=start)
