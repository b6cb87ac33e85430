"""What remote providers share: token usage, the cost log and the retrying HTTP client.

Both the LLM providers (``llms/``) and the remote embedder (``embeddings/``) build on it, so
neither adapter imports the other.
"""
