"""What remote providers share: token usage, the cost log, the retrying HTTP client, and the options and client
every provider builds on (``provider.py``).

Both the LLM providers (``llms/``) and the remote embedder (``embeddings/``) build on it, so
neither adapter imports the other.
"""
