"""Deterministic offline extractors: memory cells, named entities and interaction patterns, without an LLM."""
