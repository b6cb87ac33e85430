"""memstrata: local-first persistent memory for LLM agents."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("memstrata")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

from memstrata.config import Settings, load_settings
from memstrata.errors import (
    ConfigError,
    EmbeddingError,
    IdConflict,
    InvalidInput,
    LLMRequired,
    MemstrataError,
    MissingDependency,
    NotFound,
    ProviderError,
    SchemaTooNew,
    StorageError,
)
from memstrata.memory import Memory
from memstrata.models import (
    ChatReply,
    Deletion,
    Hit,
    Role,
    Scope,
    SearchFilters,
    TransferReport,
    Turn,
    UsedMemory,
)

__all__ = [
    "ChatReply",
    "ConfigError",
    "Deletion",
    "EmbeddingError",
    "Hit",
    "IdConflict",
    "InvalidInput",
    "LLMRequired",
    "Memory",
    "MemstrataError",
    "MissingDependency",
    "NotFound",
    "ProviderError",
    "Role",
    "SchemaTooNew",
    "Scope",
    "SearchFilters",
    "Settings",
    "StorageError",
    "TransferReport",
    "Turn",
    "UsedMemory",
    "__version__",
    "load_settings",
]
