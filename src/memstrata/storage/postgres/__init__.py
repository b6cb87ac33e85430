"""The PostgreSQL backend (pgvector, tsvector full-text, SKIP LOCKED job queue); needs ``memstrata[postgres]``."""

from memstrata.errors import MissingDependency

try:
    import psycopg  # noqa: F401
    import psycopg_pool  # noqa: F401
except ImportError as exc:
    raise MissingDependency(
        "the PostgreSQL backend needs psycopg 3 and psycopg-pool: pip install 'memstrata[postgres]'"
    ) from exc
