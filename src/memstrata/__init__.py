"""memstrata: local-first persistent memory for LLM agents."""

from __future__ import annotations

from memstrata.config import Settings, load_settings
from memstrata.embeddings.base import Embedder
from memstrata.errors import (
    AccessDenied,
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
from memstrata.facade.costs import cost_summary
from memstrata.facade.keys import ClosableKeyStore, open_key_store
from memstrata.llms.base import LLM, ChatMessage, Completion
from memstrata.memory import Memory
from memstrata.models import (
    ApiKey,
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
    ItemKind,
    MemoryEvent,
    Pattern,
    Role,
    Scope,
    SearchFilters,
    Segment,
    Subgraph,
    Tier,
    TransferReport,
    Turn,
    UsedMemory,
)
from memstrata.remote.costs import CostSummary, CostTotals
from memstrata.retrieval.tokens import count_tokens
from memstrata.storage.base import KeyStore
from memstrata.version import __version__

__all__ = [
    "LLM",
    "AccessDenied",
    "ApiKey",
    "Cell",
    "ChatMessage",
    "ChatReply",
    "ClosableKeyStore",
    "Compaction",
    "Completion",
    "ConfigError",
    "Consolidation",
    "Context",
    "ContextItem",
    "CostSummary",
    "CostTotals",
    "Deletion",
    "Embedder",
    "EmbeddingError",
    "EntityEdge",
    "EntityNode",
    "Hit",
    "IdConflict",
    "Inspection",
    "InvalidInput",
    "ItemKind",
    "KeyStore",
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
    "Tier",
    "TransferReport",
    "Turn",
    "UsedMemory",
    "__version__",
    "cost_summary",
    "count_tokens",
    "load_settings",
    "open_key_store",
]
