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
    Cell,
    ChatReply,
    Compaction,
    Consolidation,
    Context,
    ContextItem,
    Deletion,
    EntityEdge,
    EntityNode,
    Hit,
    Inspection,
    MemoryEvent,
    Pattern,
    Role,
    Scope,
    SearchFilters,
    Segment,
    Subgraph,
    TransferReport,
    Turn,
    UsedMemory,
)

__all__ = [
    "Cell",
    "ChatReply",
    "Compaction",
    "ConfigError",
    "Consolidation",
    "Context",
    "ContextItem",
    "Deletion",
    "EmbeddingError",
    "EntityEdge",
    "EntityNode",
    "Hit",
    "IdConflict",
    "Inspection",
    "InvalidInput",
    "LLMRequired",
    "Memory",
    "MemoryEvent",
    "MemstrataError",
    "MissingDependency",
    "NotFound",
    "Pattern",
    "ProviderError",
    "Role",
    "SchemaTooNew",
    "Scope",
    "SearchFilters",
    "Segment",
    "Settings",
    "StorageError",
    "Subgraph",
    "TransferReport",
    "Turn",
    "UsedMemory",
    "__version__",
    "load_settings",
]
