"""Retrieval stages: candidates (full-text, vectors) → fusion → hits."""
