"""The matching rules of LangGraph's stores, as MemstrataStore applies them: namespace conditions and value filters.

Pure functions over JSON values, so they are tested without a store. They follow LangGraph's own
in-memory store (equal fields, nested mappings, ``$eq $ne $gt $gte $lt $lte``; ``*`` matches any
namespace label) so a graph moved onto memstrata finds the same items.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memstrata.errors import InvalidInput

__all__ = ["OPERATORS", "check_filter", "namespace_matches", "value_matches"]

#: The comparisons a search filter may use, as LangGraph's own stores read them.
OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def check_filter(wanted: object) -> None:
    """A search filter: a mapping of value fields, whose ``$`` operators are ones LangGraph's stores know."""
    if wanted is None:
        return
    if not isinstance(wanted, Mapping):
        raise InvalidInput(f"filter must be a mapping of value fields, not {type(wanted).__name__}")
    operators = [name for name in wanted if str(name).startswith("$")]
    if operators and len(operators) != len(wanted):
        raise InvalidInput(f"a filter mapping holds either $ operators or fields, not both: {dict(wanted)!r}")
    for name, expected in wanted.items():
        if str(name).startswith("$") and name not in OPERATORS:
            raise InvalidInput(f"unknown filter operator {name!r}; use {', '.join(OPERATORS)}")
        if isinstance(expected, Mapping):
            check_filter(expected)


def namespace_matches(match_type: str, path: Sequence[str], namespace: tuple[str, ...]) -> bool:
    """LangGraph's namespace match: the path's labels at the start (prefix) or end (suffix), ``*`` any label."""
    path = tuple(path)
    if len(namespace) < len(path):
        return False
    ends = namespace[: len(path)] if match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(wanted in ("*", label) for wanted, label in zip(path, ends, strict=True))


def value_matches(value: Any, wanted: Mapping[str, Any]) -> bool:
    """Whether a value passes a search filter: equal fields, nested mappings, ``$eq $ne $gt $gte $lt $lte``."""
    if not isinstance(value, Mapping):
        return False
    return all(_compare(value.get(name), expected) for name, expected in wanted.items())


def _compare(actual: Any, expected: Any) -> bool:
    if isinstance(expected, Mapping):
        if any(str(name).startswith("$") for name in expected):
            return all(_operator(actual, name, operand) for name, operand in expected.items())
        return value_matches(actual, expected)
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(expected)
            and all(_compare(item, other) for item, other in zip(actual, expected, strict=True))
        )
    return bool(actual == expected)


def _operator(actual: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(actual == operand)
    if operator == "$ne":
        return bool(actual != operand)
    if not _is_number(actual) or not _is_number(operand):
        return False  # a missing or non-numeric field is outside every range
    number, bound = float(actual), float(operand)
    return {"$gt": number > bound, "$gte": number >= bound, "$lt": number < bound, "$lte": number <= bound}[operator]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
