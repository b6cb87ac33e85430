"""AutoGen: ``MemstrataMemory``, an ``autogen_core.memory.Memory`` backed by a memstrata ``Memory``.

An agent calls ``update_context`` before each model call: the latest user message becomes a
``Memory.context()`` query and the block is added to the model context as a system message.
``add`` stores text, Markdown or JSON; ``query`` searches; ``clear`` forgets this memory's scope.
Needs ``pip install 'memstrata[autogen]'``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Self, TypedDict, TypeVar

from pydantic import BaseModel

from memstrata.config import sqlite_file
from memstrata.errors import InvalidInput, MissingDependency
from memstrata.integrations.query import query_from
from memstrata.memory import Memory
from memstrata.models import ContextItem, Hit
from memstrata.validation import check_budget, check_identifier, check_limit, check_user_id

try:
    from autogen_core import CancellationToken, Component
    from autogen_core.memory import Memory as AutogenMemory
    from autogen_core.memory import MemoryContent, MemoryMimeType, MemoryQueryResult, UpdateContextResult
    from autogen_core.model_context import ChatCompletionContext
    from autogen_core.models import LLMMessage, SystemMessage, UserMessage
except ImportError as exc:
    raise MissingDependency(
        f"the AutoGen integration needs autogen-core ({exc.name} is missing): pip install 'memstrata[autogen]'"
    ) from exc

__all__ = ["MemstrataMemory", "MemstrataMemoryConfig"]

Result = TypeVar("Result")

#: The metadata key a stored turn keeps its content's MIME type under, when it is not plain text,
#: so ``query`` gives Markdown back as Markdown and JSON as a dict.
MIME_KEY = "autogen_mime_type"
_TEXT_TYPES = frozenset({MemoryMimeType.TEXT.value, MemoryMimeType.MARKDOWN.value})
_JSON = MemoryMimeType.JSON.value
_SQLITE_FILE = "sqlite:///"


class _Scope(TypedDict):
    """The memory a MemstrataMemory reads and writes, as memstrata's calls name it."""

    user_id: str | None
    space: str | None
    agent_id: str | None
    session_id: str | None


class MemstrataMemoryConfig(BaseModel):
    """What ``dump_component`` saves of a MemstrataMemory: where its store is, the scope and the knobs."""

    path: str
    user_id: str | None = None
    space: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    token_budget: int = 1000
    search_limit: int = 5


class MemstrataMemory(AutogenMemory, Component[MemstrataMemoryConfig]):
    """AutoGen memory over one memstrata scope: ``user_id`` (or a shared ``space``), optionally agent and session.

    The ``agent_id`` and ``session_id`` narrow reads and writes as they do in memstrata's own calls (with an
    ``agent_id`` a user's memory shows only that agent's turns). ``clear()`` forgets everything this scope holds.
    The Memory stays the caller's: ``close()`` leaves it open, unless it was opened from a component config.
    """

    component_type = "memory"
    component_config_schema = MemstrataMemoryConfig
    component_provider_override = "memstrata.integrations.autogen.MemstrataMemory"

    def __init__(
        self,
        memory: Memory,
        *,
        user_id: str | None = None,
        space: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        token_budget: int = 1000,
        search_limit: int = 5,
    ) -> None:
        if not isinstance(memory, Memory):
            raise TypeError(f"memory must be a memstrata Memory, not {type(memory).__name__}")
        if (user_id is None) == (space is None):
            raise InvalidInput("name exactly one of user_id and space")
        self._memory = memory
        self._scope: _Scope = {
            "user_id": None if user_id is None else check_user_id(user_id),
            "space": check_identifier(space, "space", required=False),
            "agent_id": check_identifier(agent_id, "agent_id", required=False),
            "session_id": check_identifier(session_id, "session_id", required=False),
        }
        self._token_budget = check_budget(token_budget)
        self._search_limit = check_limit(search_limit)
        self._owns_memory = False

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        """Add memstrata's context for the last user message as a system message; the items it holds."""
        query = query_from(_text_of(message) for message in _last_user_message(await model_context.get_messages()))
        if query is None:
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        recall = partial(self._memory.context, query, token_budget=self._token_budget, **self._scope)
        context = await asyncio.to_thread(recall)
        if not context.text:
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        await model_context.add_message(SystemMessage(content=context.text))
        return UpdateContextResult(memories=MemoryQueryResult(results=[_item_content(item) for item in context.items]))

    async def query(
        self,
        query: str | MemoryContent,
        cancellation_token: CancellationToken | None = None,
        **kwargs: Any,
    ) -> MemoryQueryResult:
        """The stored memories most relevant to ``query``, best first; ``limit=`` overrides the search limit."""
        limit = kwargs.pop("limit", self._search_limit)
        if kwargs:
            raise TypeError(f"unexpected keyword arguments: {', '.join(sorted(kwargs))} (only limit is taken)")
        text = query if isinstance(query, str) else _stored_text(query)[0]
        search = partial(self._memory.search, text, limit=limit, **self._scope)
        hits = await _run(search, cancellation_token)
        return MemoryQueryResult(results=[_hit_content(hit) for hit in hits])

    async def add(self, content: MemoryContent, cancellation_token: CancellationToken | None = None) -> None:
        """Store text, Markdown or JSON content, with its metadata, as a user message; other types raise ValueError.

        Cancelling stops the wait, not a write already handed to memstrata.
        """
        text, mime_type = _stored_text(content)
        metadata = dict(content.metadata or {})
        if mime_type != MemoryMimeType.TEXT.value:
            metadata[MIME_KEY] = mime_type
        # A user message: memstrata learns facts, the profile and habits from what users say.
        await _run(partial(self._memory.add, text, metadata=metadata, **self._scope), cancellation_token)

    async def clear(self) -> None:
        """Forget everything this memory's scope holds: the whole user (or space) unless agent or session narrow it.

        Other users are never touched; in a space this needs admin access (AccessDenied otherwise).
        """
        await asyncio.to_thread(partial(self._memory.forget, **self._scope))

    async def close(self) -> None:
        """Close the Memory if this object opened it (from a component config); a Memory passed in stays open."""
        if self._owns_memory:
            await asyncio.to_thread(self._memory.close)

    def _to_config(self) -> MemstrataMemoryConfig:
        """The SQLite file (else the data directory), the scope and the knobs; other settings come from the env."""
        return MemstrataMemoryConfig(
            path=_location_of(self._memory),
            token_budget=self._token_budget,
            search_limit=self._search_limit,
            **self._scope,
        )

    @classmethod
    def _from_config(cls, config: MemstrataMemoryConfig) -> Self:
        """Open the Memory the config names; ``close()`` closes it."""
        memory = Memory(config.path)
        try:
            made = cls(
                memory,
                user_id=config.user_id,
                space=config.space,
                agent_id=config.agent_id,
                session_id=config.session_id,
                token_budget=config.token_budget,
                search_limit=config.search_limit,
            )
        except Exception:
            memory.close()
            raise
        made._owns_memory = True
        return made


def _location_of(memory: Memory) -> str:
    """Where a config finds ``memory`` again: its SQLite file, or its data directory for another store.

    Another store's URL is left out on purpose: it may hold a password, and the data directory's
    ``memstrata.toml`` or ``MEMSTRATA_STORAGE_URL`` names it for the process that loads the config.
    Both are absolute and decoded, so a config loaded from another directory opens the same store.
    """
    url = memory.settings.resolved_storage_url
    if url.startswith(_SQLITE_FILE) and "?" not in url:
        path = sqlite_file(url)
        if path is not None:
            return str(path)
    return str(Path(memory.settings.data_dir).absolute())


async def _run(call: Callable[[], Result], cancellation_token: CancellationToken | None) -> Result:
    """``call()`` in a worker thread (memstrata is synchronous), its wait cancellable by ``cancellation_token``."""
    if cancellation_token is not None and cancellation_token.is_cancelled():
        raise asyncio.CancelledError("the cancellation token was cancelled before the call")
    future = asyncio.ensure_future(asyncio.to_thread(call))
    if cancellation_token is not None:
        cancellation_token.link_future(future)
    return await future


def _last_user_message(messages: Sequence[LLMMessage]) -> list[UserMessage]:
    """The last user message of a model context, as a list of none or one."""
    users = [message for message in messages if isinstance(message, UserMessage)]
    return users[-1:]


def _text_of(message: UserMessage) -> str:
    """A user message's text; images are not text to search by."""
    if isinstance(message.content, str):
        return message.content
    return "\n".join(part for part in message.content if isinstance(part, str))


def _stored_text(content: MemoryContent) -> tuple[str, str]:
    """The text memstrata stores for ``content``, with its MIME type; ValueError (InvalidInput) for what is not text."""
    if not isinstance(content, MemoryContent):
        raise TypeError(f"content must be an autogen_core MemoryContent, not {type(content).__name__}")
    mime_type = content.mime_type.value if isinstance(content.mime_type, MemoryMimeType) else content.mime_type
    value = content.content
    if mime_type in _TEXT_TYPES and isinstance(value, str):
        return value, mime_type
    if mime_type == _JSON and isinstance(value, Mapping):
        try:
            return json.dumps(value, ensure_ascii=False, allow_nan=False), mime_type
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"JSON memory content must be JSON-serialisable: {exc}") from exc
    if mime_type == _JSON and isinstance(value, str):
        try:
            json.loads(value)
        except ValueError as exc:
            raise InvalidInput(f"JSON memory content is not valid JSON: {exc}") from exc
        return value, mime_type
    if mime_type in _TEXT_TYPES or mime_type == _JSON:
        raise InvalidInput(f"{mime_type} memory content must be a string, not {type(value).__name__}")
    raise InvalidInput(
        f"memstrata stores text: {mime_type} content is not supported; "
        "add text/plain, text/markdown or application/json content (describe an image in words)"
    )


def _hit_content(hit: Hit) -> MemoryContent:
    """A search hit as AutoGen memory content: its text (or JSON) back with its metadata, score and id."""
    stored: dict[str, Any] = dict(hit.turn.metadata) if hit.turn is not None else {}
    mime_type = str(stored.pop(MIME_KEY, MemoryMimeType.TEXT.value))
    content: str | dict[str, Any] = hit.content
    if mime_type == _JSON:
        try:
            parsed = json.loads(hit.content)
        except ValueError:
            parsed = None  # a derived item (a fact, a summary) quoting JSON is text, not the stored object
        if isinstance(parsed, dict):
            content = parsed
        else:
            mime_type = MemoryMimeType.TEXT.value
    about: dict[str, Any] = {"id": hit.id, "score": hit.score, "tier": str(hit.tier)}
    if hit.turn is not None:
        about["created_at"] = hit.turn.created_at.isoformat()
    if hit.space is not None:
        about["space"] = hit.space
    return MemoryContent(content=content, mime_type=_mime(mime_type), metadata={**stored, **about})


def _item_content(item: ContextItem) -> MemoryContent:
    """One item of a context block as AutoGen memory content (the text the block shows)."""
    about: dict[str, Any] = {
        "id": item.id,
        "kind": str(item.kind),
        "tier": str(item.tier),
        "score": item.score,
        "tokens": item.tokens,
        "source_turn_ids": list(item.source_turn_ids),
    }
    return MemoryContent(content=item.text, mime_type=MemoryMimeType.TEXT, metadata=about)


def _mime(value: str) -> MemoryMimeType | str:
    """The enum member for a MIME type AutoGen names, else the string."""
    try:
        return MemoryMimeType(value)
    except ValueError:
        return value
