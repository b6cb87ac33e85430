"""Token usage as providers report it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a call used, as the provider reported them (``cached`` ⊆ ``input``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
