"""Benchmarks: they use only the public API and write JSON results."""
