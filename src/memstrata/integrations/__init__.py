"""Adapters that plug memstrata into agent frameworks, each behind its own extra.

Import the submodule of the framework you use (``memstrata.integrations.langgraph`` …); each
imports its framework only when imported itself, so the base install needs none of them.
"""
