"""Tolerant JSON parsing of model replies: a table of what models actually send."""

from __future__ import annotations

from typing import Any

import pytest

from memstrata.llms.json_output import json_instruction, parse_json_object, strip_thinking

PARSED: list[tuple[str, str, dict[str, Any]]] = [
    ("bare", '{"a": 1}', {"a": 1}),
    ("whitespace", '  \n {"a": 1} \n', {"a": 1}),
    ("json fence", '```json\n{"a": 1}\n```', {"a": 1}),
    ("plain fence", '```\n{"a": 1}\n```', {"a": 1}),
    ("fence with prose", 'Sure! Here it is:\n```json\n{"a": [1, 2]}\n```\nAnything else?', {"a": [1, 2]}),
    ("leading prose", 'Here is the JSON: {"a": "b"}', {"a": "b"}),
    ("trailing prose", '{"a": "b"}\nI hope this helps.', {"a": "b"}),
    ("think block", '<think>the user wants {"x": 0}, so</think>\n{"a": 1}', {"a": 1}),
    ("thinking block", '<thinking>\nhmm\n</thinking>{"a": 1}', {"a": 1}),
    ("dangling think end", 'reasoning {"x": 0} goes here</think>{"a": 1}', {"a": 1}),
    ("think then fence", '<think>x</think>\n```json\n{"a": 1}\n```', {"a": 1}),
    ("nested", '{"a": {"b": {"c": [1, {"d": null}]}}}', {"a": {"b": {"c": [1, {"d": None}]}}}),
    ("braces in strings", '{"a": "a } and { b"}', {"a": "a } and { b"}),
    ("unicode", '{"city": "Lisboa ☀"}', {"city": "Lisboa ☀"}),
    ("first of two objects", 'one {"a": 1} two {"b": 2}', {"a": 1}),
    ("skips a broken object", 'try {"a": } then {"b": 2}', {"b": 2}),
    ("array before object", '[1, 2] and then {"a": 1}', {"a": 1}),
    ("empty object", "{}", {}),
]

UNPARSED: list[tuple[str, str]] = [
    ("empty", ""),
    ("prose", "I cannot help with that."),
    ("array only", "[1, 2, 3]"),
    ("number", "42"),
    ("truncated", '{"a": [1, 2'),
    ("think only", '<think>{"a": 1}</think>'),
    ("single quotes", "{'a': 1}"),
]


@pytest.mark.parametrize(
    ("text", "expected"), [(text, expected) for _, text, expected in PARSED], ids=[n for n, *_ in PARSED]
)
def test_parses_the_first_json_object(text: str, expected: dict[str, Any]) -> None:
    assert parse_json_object(text) == expected


@pytest.mark.parametrize("text", [text for _, text in UNPARSED], ids=[name for name, _ in UNPARSED])
def test_returns_none_without_an_object(text: str) -> None:
    assert parse_json_object(text) is None


def test_strip_thinking_keeps_the_answer() -> None:
    assert strip_thinking("<think>a\nb</think>\nanswer") == "answer"
    assert strip_thinking("no thinking here") == "no thinking here"


def test_json_instruction_carries_the_schema() -> None:
    text = json_instruction({"type": "object", "properties": {"name": {"type": "string"}}})
    assert "JSON" in text
    assert '"properties"' in text


@pytest.mark.parametrize("reply", ["[" * 3000, "{" * 100_000, '{"a": ' * 2000])
def test_a_degenerate_reply_is_no_object_rather_than_an_error(reply: str) -> None:
    assert parse_json_object(reply) is None
