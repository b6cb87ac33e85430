"""The OpenAI Agents SDK over a memstrata Memory: a ``Session`` and a run that answers with memory.

``MemstrataSession(session_id, memory, user_id=...)`` keeps a conversation's input items as turns
of the user's memory, in that memstrata session: each item's JSON is kept whole in the turn's
metadata, so it reads back exactly, while the text of user and assistant messages is what
memstrata indexes (tool calls, their outputs and other items get a short label). What one session
said is then found by ``search`` and ``context`` in every later one. ``run_with_memory`` runs an
agent with ``memory.context(...)`` for the input appended to its instructions. Details and an
example: docs/integrations.md.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Mapping, Sequence
from itertools import islice
from typing import Any, cast

from memstrata.errors import InvalidInput, MissingDependency
from memstrata.memory import Memory
from memstrata.models import Role, Turn
from memstrata.validation import check_identifier, check_metadata, check_user_id

try:
    from agents import Agent, RunContextWrapper, Runner, RunResult, TResponseInputItem
    from agents.memory import SessionSettings
    from agents.memory.session_settings import resolve_session_limit
except ImportError as exc:  # pragma: no cover - exercised in a test with the package hidden
    raise MissingDependency(
        f"memstrata.integrations.openai_agents needs the OpenAI Agents SDK ({exc.name} is missing): "
        "pip install 'memstrata[openai-agents]'"
    ) from exc

__all__ = ["MemstrataSession", "run_with_memory", "with_memory"]

#: The metadata key under which a turn holds its session item; turns without it are not the session's.
MARK = "openai_agents"
#: Turns read per page while walking a session.
PAGE = 1000
#: How the SDK's message roles are stored (``developer`` instructions are a system turn).
ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.SYSTEM, "developer": Role.SYSTEM}


class MemstrataSession:
    """An OpenAI Agents SDK ``Session`` whose items are turns of ``user_id``'s memory in session ``session_id``.

    ``agent_id``, when given, is recorded as the writer and narrows the session to that agent's
    turns. ``session_settings.limit`` is the default ``get_items`` limit, as in the SDK's sessions.
    """

    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        memory: Memory,
        *,
        user_id: str,
        agent_id: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = str(check_identifier(session_id, "session_id"))
        self.user_id = check_user_id(user_id)
        self.agent_id = check_identifier(agent_id, "agent_id", required=False)
        self.memory = memory
        self.session_settings = session_settings
        # Two pops at once must not both take the same latest item.
        self._popping = threading.Lock()

    def _scope(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "session_id": self.session_id, "agent_id": self.agent_id}

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items in the order they were added: all, or the latest ``limit``."""
        wanted = resolve_session_limit(limit, self.session_settings)
        if wanted is not None and (isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 0):
            raise InvalidInput("limit must be None or a whole number ≥ 0")
        return await asyncio.to_thread(self._get_items, wanted)

    def _get_items(self, limit: int | None) -> list[TResponseInputItem]:
        if limit is None:
            return [_item_of(turn) for turn in self._turns(newest_first=False)]
        latest = [_item_of(turn) for turn in islice(self._turns(newest_first=True), limit)]
        return latest[::-1]

    def _turns(self, *, newest_first: bool) -> Iterator[Turn]:
        """The session's item turns, read page by page as consumed; other turns of the session are skipped."""
        offset = 0
        while True:
            page = self.memory.history(limit=PAGE, offset=offset, newest_first=newest_first, **self._scope())
            yield from (turn for turn in page if isinstance(turn.metadata.get(MARK), Mapping))
            if len(page) < PAGE:
                return
            offset += PAGE

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Store the items, in order; InvalidInput (nothing stored) for one that is not JSON or is too large.

        Up to ``max_messages_per_add`` items go in one transaction; a longer list is stored that
        many at a time, so an item refused in a later batch leaves the earlier batches stored.
        """
        messages = [_message_of(item, index) for index, item in enumerate(items)]
        size = self.memory.settings.max_messages_per_add
        for start in range(0, len(messages), size):
            await asyncio.to_thread(self.memory.add, messages[start : start + size], **self._scope())

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the latest item, or None when the session is empty."""
        return await asyncio.to_thread(self._pop_item)

    def _pop_item(self) -> TResponseInputItem | None:
        with self._popping:
            latest = next(self._turns(newest_first=True), None)
            if latest is None:
                return None
            self.memory.delete(latest.id, user_id=self.user_id)
            return _item_of(latest)

    async def clear_session(self) -> None:
        """Forget the session: every turn memstrata holds for it in this user's memory (this agent's, if named)."""
        await asyncio.to_thread(self.memory.forget, **self._scope())


def with_memory(agent: Agent[Any], memory_block: str) -> Agent[Any]:
    """A copy of ``agent`` whose instructions end with ``memory_block`` (its own instructions, however given, first)."""
    if not memory_block.strip():
        return agent

    async def instructions(context: RunContextWrapper[Any], _current: Agent[Any]) -> str:
        own = await agent.get_system_prompt(context)
        return f"{own}\n\n{memory_block}" if own else memory_block

    return agent.clone(instructions=instructions)


async def run_with_memory(
    agent: Agent[Any],
    input: str | list[TResponseInputItem],
    *,
    memory: Memory,
    user_id: str,
    agent_id: str | None = None,
    token_budget: int = 1000,
    **run_options: Any,
) -> RunResult:
    """``Runner.run`` with what ``user_id``'s memory holds about the input added to the agent's instructions.

    The query is the input's latest user message; ``run_options`` go to ``Runner.run`` (pass
    ``session=MemstrataSession(...)`` to remember the exchange too). Raises InvalidInput for an
    input without a user message.
    """
    query = _latest_user_text(input)
    context = await asyncio.to_thread(
        memory.context, query, user_id=user_id, agent_id=agent_id, token_budget=token_budget
    )
    return await Runner.run(with_memory(agent, context.text), input, **run_options)


def _message_of(item: object, index: int) -> dict[str, Any]:
    """The memstrata message for one session item: its role, the text to index, the item whole in metadata."""
    if not isinstance(item, Mapping):
        raise InvalidInput(f"session item {index} must be a mapping (an input item dict), not {type(item).__name__}")
    kept = check_metadata({MARK: dict(item)}, f"session item {index}")
    role = ROLES.get(str(item.get("role"))) if _is_message(item) else None
    if role is None:
        return {"role": Role.TOOL.value, "content": _label(item), "metadata": kept}
    text = _message_text(item.get("content"))
    return {"role": role.value, "content": text if text.strip() else _parts_label(item), "metadata": kept}


def _item_of(turn: Turn) -> TResponseInputItem:
    return cast("TResponseInputItem", dict(turn.metadata[MARK]))


def _is_message(item: Mapping[str, Any]) -> bool:
    return item.get("type", "message") == "message" and "role" in item


def _message_text(content: object) -> str:
    """A message's text: the string itself, or its text parts (``input_text``, ``output_text``, refusals) joined."""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence):
        return ""
    texts = []
    for part in content:
        if isinstance(part, Mapping):
            text = part.get("text", part.get("refusal"))
            if isinstance(text, str) and text.strip():
                texts.append(text)
    return "\n".join(texts)


def _label(item: Mapping[str, Any]) -> str:
    """A short text for an item that is not a message (memstrata stores no empty turn): its type and tool name."""
    kind = str(item.get("type") or "item")
    name = item.get("name")
    return f"[{kind} {name}]" if isinstance(name, str) and name else f"[{kind}]"


def _parts_label(message: Mapping[str, Any]) -> str:
    """A short text for a message without text (an image, a file): the kinds of its parts."""
    content = message.get("content")
    parts = content if isinstance(content, Sequence) and not isinstance(content, str) else []
    kinds = [str(part.get("type")) for part in parts if isinstance(part, Mapping) and part.get("type")]
    return f"[{' '.join(kinds) or 'message'}]"


def _latest_user_text(input: object) -> str:
    if isinstance(input, str):
        return input
    if isinstance(input, list):
        for item in reversed(input):
            if isinstance(item, Mapping) and _is_message(item) and item.get("role") == "user":
                text = _message_text(item.get("content"))
                if text.strip():
                    return text
    raise InvalidInput("run_with_memory needs an input with a user message (a string or a list of input items)")
