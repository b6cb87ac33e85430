"""The cost log's former home, kept so scripts that import it from here still work (see ``memstrata.remote.costs``)."""

from __future__ import annotations

from memstrata.remote.costs import (
    COST_LOG_FILE_NAME,
    CostLog,
    CostRecord,
    CostSummary,
    CostTotals,
    parse_since,
    read_costs,
    summarize_costs,
)

__all__ = [
    "COST_LOG_FILE_NAME",
    "CostLog",
    "CostRecord",
    "CostSummary",
    "CostTotals",
    "parse_since",
    "read_costs",
    "summarize_costs",
]
