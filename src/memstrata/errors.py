"""Every error memstrata raises, as one tree.

::

    MemstrataError
    ├── InvalidInput (also ValueError)   bad arguments: empty text, bad role, missing user_id ...
    │   └── IdConflict                   a caller-supplied id already names different content
    ├── NotFound (also KeyError)         no item with that id in that scope
    ├── AccessDenied (also PermissionError)  the calling agent lacks the access a call needs
    ├── ConfigError                      a setting or config file is wrong
    │   ├── MissingDependency            an optional package is not installed
    │   ├── LLMRequired                  the feature needs an LLM and none is configured
    │   └── EncryptionKeyError           the encryption key is missing or does not open the store
    ├── StorageError                     the store failed or cannot be opened
    │   ├── SchemaTooNew                 the database was written by a newer memstrata
    │   └── DeletedMeanwhile             a write referred to turns deleted since its work read them
    ├── EmbeddingError                   the embedding model failed to load or to run
    └── ProviderError                    an LLM provider failed or answered unusably

Front ends map these once: the CLI to a one-line message and an exit code, the
server to HTTP statuses. Messages say how to fix the problem.
"""

from __future__ import annotations


class MemstrataError(Exception):
    """Root of every error memstrata raises on purpose."""


class InvalidInput(MemstrataError, ValueError):
    """The caller passed something memstrata will not store or run; nothing was changed."""


class IdConflict(InvalidInput):
    """A caller-supplied id is already used by different content."""


class AccessDenied(MemstrataError, PermissionError):
    """The calling agent lacks the access (read, write or admin) the call needs; nothing was changed."""


class NotFound(MemstrataError, KeyError):
    """No item with that id exists in the caller's scope."""

    def __str__(self) -> str:
        # KeyError quotes its argument; a message should read as a sentence.
        return str(self.args[0]) if self.args else "not found"


class ConfigError(MemstrataError):
    """A setting, environment variable or config file is wrong."""


class MissingDependency(ConfigError):
    """An optional dependency is needed for the chosen feature but is not installed."""


class LLMRequired(ConfigError):
    """The feature needs an LLM and none is configured (the message says how to configure one)."""


#: How to configure an LLM, as the messages of :class:`LLMRequired` and the fronts say it.
HOW_TO_CONFIGURE_LLM = (
    "set MEMSTRATA_LLM_PROVIDER (openai or anthropic), MEMSTRATA_LLM_MODEL and MEMSTRATA_LLM_API_KEY "
    "(and MEMSTRATA_LLM_BASE_URL for Ollama, vLLM, llama.cpp or another OpenAI-compatible server)"
)


class EncryptionKeyError(ConfigError):
    """The encryption key does not open the store (wrong, missing, or the store is not encrypted); nothing changed."""


class StorageError(MemstrataError):
    """The store could not be opened, read or written."""


class SchemaTooNew(StorageError):
    """The database was written by a newer memstrata than this one."""


class DeletedMeanwhile(StorageError):
    """A write referred to turns (or items made from them) deleted since its work read them; nothing was written."""


class EmbeddingError(MemstrataError):
    """The embedding model could not be loaded or failed while embedding."""


class ProviderError(MemstrataError):
    """An LLM provider failed, timed out, or returned something unusable."""
