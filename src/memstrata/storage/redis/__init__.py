"""The Redis working set (atomic Lua scripts, shared by every process of a deployment); needs ``memstrata[redis]``."""

from memstrata.errors import MissingDependency

try:
    import redis  # noqa: F401
except ImportError as exc:
    raise MissingDependency("the Redis working set needs redis-py: pip install 'memstrata[redis]'") from exc
