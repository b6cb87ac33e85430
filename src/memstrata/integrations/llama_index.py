"""LlamaIndex: ``MemstrataMemoryBlock``, a long-term memory block for ``llama_index.core.memory.Memory``.

LlamaIndex's ``Memory`` keeps a short-term queue of chat messages; when the queue outgrows its
token limit it flushes the oldest messages into its memory blocks (``aput``), and every ``aget``
asks each block for text to put in the system message. This block stores the flushed user and
assistant messages in memstrata and answers with ``Memory.context()`` for the latest user message.
Needs ``pip install 'memstrata[llamaindex]'``.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any, Self

from memstrata.errors import MissingDependency
from memstrata.integrations.query import query_from
from memstrata.memory import Memory
from memstrata.validation import check_budget, check_identifier, check_user_id

try:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
    from llama_index.core.bridge.pydantic import Field, ValidationInfo, field_validator, model_validator
    from llama_index.core.memory import BaseMemoryBlock
except ImportError as exc:
    raise MissingDependency(
        f"the LlamaIndex integration needs llama-index-core ({exc.name} is missing): "
        "pip install 'memstrata[llamaindex]'"
    ) from exc

__all__ = ["MemstrataMemoryBlock"]

#: LlamaIndex's speakers as memstrata stores them. System and developer messages are instructions,
#: and tool and function messages are tool output, not something the user or the assistant said:
#: they are not stored.
_STORED_ROLES: dict[MessageRole, str] = {
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.CHATBOT: "assistant",
    MessageRole.MODEL: "assistant",
}


class MemstrataMemoryBlock(BaseMemoryBlock[str]):
    """A LlamaIndex memory block backed by a memstrata ``Memory``: stores flushed messages, recalls ``context()``.

    Scope: ``user_id`` (or a shared ``space``), optionally ``agent_id`` and ``session_id``, as memstrata's own
    calls take them. Without a ``session_id`` the LlamaIndex ``Memory``'s session id is used, so one
    conversation is one memstrata session and the context also shows its exchanges already flushed.
    """

    name: str = Field(default="memstrata", description="The name of the memory block.")
    description: str | None = Field(
        default="What memstrata remembers about the user that is relevant to the latest message.",
        description="A description of the memory block.",
    )
    # Excluded from dumps: the Memory is a live object (a store, a worker), not configuration.
    memory: Memory = Field(exclude=True, description="The memstrata Memory to store in and recall from.")
    user_id: str | None = Field(default=None, description="Whose memory (exactly one of user_id and space).")
    space: str | None = Field(default=None, description="A shared space's name, instead of user_id.")
    agent_id: str | None = Field(default=None, description="The agent writing and reading, as memstrata scopes it.")
    session_id: str | None = Field(
        default=None, description="The memstrata session; the LlamaIndex Memory's session id when not set."
    )
    token_budget: int = Field(default=1000, description="The most tokens the recalled context may take.")
    query_messages: int = Field(
        default=1, ge=1, description="How many of the latest user messages the recall query is made from."
    )

    @field_validator("user_id")
    @classmethod
    def _check_user_id(cls, value: str | None) -> str | None:
        return None if value is None else check_user_id(value)

    @field_validator("space", "agent_id", "session_id")
    @classmethod
    def _check_identifier(cls, value: str | None, info: ValidationInfo) -> str | None:
        return check_identifier(value, info.field_name or "id", required=False)

    @field_validator("token_budget")
    @classmethod
    def _check_budget(cls, value: int) -> int:
        return check_budget(value)

    @model_validator(mode="after")
    def _check_scope(self) -> Self:
        if (self.user_id is None) == (self.space is None):
            raise ValueError("name exactly one of user_id and space")
        return self

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """memstrata's context for the latest user message(s), or "" when there is none or nothing is remembered."""
        users = [message for message in messages or () if message.role == MessageRole.USER]
        query = query_from(_text_of(message) for message in users[-self.query_messages :])
        if query is None:
            return ""
        recall = partial(
            self.memory.context,
            query,
            user_id=self.user_id,
            space=self.space,
            agent_id=self.agent_id,
            session_id=self._session(block_kwargs.get("session_id")),
            token_budget=self.token_budget,
        )
        return (await asyncio.to_thread(recall)).text

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Store the user and assistant messages that have text; the rest (instructions, tool traffic) is skipped."""
        stored: list[dict[str, Any]] = []
        session: object = None
        for message in messages:
            session = message.additional_kwargs.get("session_id", session)
            role = _STORED_ROLES.get(message.role)
            text = _text_of(message)
            if role is not None and text.strip():
                stored.append({"role": role, "content": text})
        if not stored:
            return
        add = partial(
            self.memory.add,
            stored,
            user_id=self.user_id,
            space=self.space,
            agent_id=self.agent_id,
            session_id=self._session(session),
        )
        await asyncio.to_thread(add)

    def _session(self, framework_session: object) -> str | None:
        """The block's session, else the LlamaIndex Memory's (a string it passes along), else none."""
        if self.session_id is not None:
            return self.session_id
        return framework_session if isinstance(framework_session, str) and framework_session.strip() else None


def _text_of(message: ChatMessage) -> str:
    """The text of a message's text blocks; images, tool calls and thinking are not text to remember."""
    return "\n".join(block.text for block in message.blocks if isinstance(block, TextBlock))
