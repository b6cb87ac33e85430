"""Prompt templates, kept as data files beside this module."""

from __future__ import annotations

from importlib.resources import files


def render(name: str, **values: str) -> str:
    """Fill the template ``<name>.txt`` with ``values``."""
    template = (files("memstrata.prompts") / f"{name}.txt").read_text(encoding="utf-8")
    return template.format(**values)
