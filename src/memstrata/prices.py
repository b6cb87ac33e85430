"""Model prices in USD per million tokens: a small built-in table of estimates, overridable in settings."""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field


class ModelPrice(BaseModel):
    """What one million tokens cost with one model, in USD (``cached_input`` defaults to ``input``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    input: float = Field(ge=0, description="USD per million uncached input tokens.")
    output: float = Field(ge=0, description="USD per million output tokens.")
    cached_input: float | None = Field(default=None, ge=0, description="USD per million input tokens read from cache.")


#: What a snapshot or alias adds to a model's name: a date (-2024-07-18, -20250514, @20240620), -0125, -latest.
_SNAPSHOT = re.compile(r"[-@](?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest)")


def _price(input: float, output: float, cached_input: float) -> ModelPrice:
    return ModelPrice(input=input, output=output, cached_input=cached_input)


def default_prices() -> dict[str, ModelPrice]:
    """List prices of a few common models when this table was written: estimates, not invoices."""
    return {
        "gpt-4o-mini": _price(0.15, 0.60, 0.075),
        "gpt-4o": _price(2.50, 10.00, 1.25),
        "gpt-4.1": _price(2.00, 8.00, 0.50),
        "gpt-4.1-mini": _price(0.40, 1.60, 0.10),
        "gpt-4.1-nano": _price(0.10, 0.40, 0.025),
        "gpt-5": _price(1.25, 10.00, 0.125),
        "gpt-5-mini": _price(0.25, 2.00, 0.025),
        "text-embedding-3-small": _price(0.02, 0.0, 0.02),
        "text-embedding-3-large": _price(0.13, 0.0, 0.13),
        "claude-3-5-haiku": _price(0.80, 4.00, 0.08),
        "claude-haiku-4-5": _price(1.00, 5.00, 0.10),
        "claude-3-7-sonnet": _price(3.00, 15.00, 0.30),
        "claude-sonnet-4": _price(3.00, 15.00, 0.30),
        "claude-opus-4": _price(15.00, 75.00, 1.50),
        "claude-opus-4-5": _price(5.00, 25.00, 0.50),
    }


def find_price(model: str, prices: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """The price of ``model``: an exact entry, else the entry it is a dated snapshot or ``-latest`` alias of.

    "gpt-4o-mini-2024-07-18" and "claude-sonnet-4-20250514" take their model's price; a
    different model whose name only starts the same ("gpt-5-nano", "claude-opus-4-1") has none.
    """
    if model in prices:
        return prices[model]
    # "openai/gpt-4o-mini" on OpenRouter.
    bare = model.rsplit("/", 1)[-1]
    if bare in prices:
        return prices[bare]
    matches = [name for name in prices if bare.startswith(name) and _SNAPSHOT.fullmatch(bare[len(name) :])]
    return prices[max(matches, key=len)] if matches else None


def estimate_cost(
    model: str, prices: Mapping[str, ModelPrice], *, input_tokens: int, output_tokens: int, cached_tokens: int
) -> float | None:
    """Estimated USD for one call, or None when the model has no price."""
    price = find_price(model, prices)
    if price is None:
        return None
    cached = min(cached_tokens, input_tokens)
    cached_rate = price.input if price.cached_input is None else price.cached_input
    dollars = (input_tokens - cached) * price.input + cached * cached_rate + output_tokens * price.output
    return round(dollars / 1_000_000, 8)
