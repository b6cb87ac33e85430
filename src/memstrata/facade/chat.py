"""The chat responder: answer one message from memory, then remember the exchange."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Protocol

from memstrata.config import Settings
from memstrata.errors import IdConflict, ProviderError
from memstrata.llms.base import LLM, ChatMessage
from memstrata.models import ChatReply, Context, ContextItem, ItemKind, Role, Scope, Turn, UsedMemory
from memstrata.prompts import render
from memstrata.retrieval.context import ContextRequest
from memstrata.storage.roles import ConsolidationStore, TurnStore

EXTRACTIVE_HEADER = "Here is what I remember:"
EXTRACTIVE_EMPTY = "I don't have anything stored about that yet."
EXTRACTIVE_ITEMS = 5
# Profile traits are in every context whatever the question, so they only fill spare places.
_EXTRACTIVE_KINDS = (ItemKind.CELL, ItemKind.CONSOLIDATION, ItemKind.SCENE, ItemKind.MIDTERM, ItemKind.EPISODE)
CONSOLIDATIONS_SCANNED = 100


class ChatStore(TurnStore, ConsolidationStore, Protocol):
    """What a chat reply reads: the session's turns and the consolidations stored since."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatRequest:
    """One checked ``chat()`` call."""

    text: str
    scope: Scope
    budget: int
    zone: tzinfo
    system: str | None = None
    message_id: str | None = None
    reply_id: str | None = None
    #: A shared space's chat: the agent writes as itself but reads every writer's memories.
    shared: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class ChatParts:
    """What a chat reply is made with: the store, the model, and how the facade builds context and stores turns."""

    store: ChatStore
    llm: LLM
    settings: Settings
    #: Builds the memory block as foreground work, noting the visits of its excerpts.
    context: Callable[[ContextRequest], Context]
    #: Stores messages (``add``'s dicts) in a scope as foreground work; every turn as stored.
    remember: Callable[[Sequence[dict[str, str]], Scope], list[Turn]]
    working_seqs: Callable[[str, str | None], list[int]]
    consolidation_due: Callable[[str], bool]


class ChatResponder:
    """Answers with the LLM over the memory block and the session's working memory, or extractively without one."""

    def __init__(self, parts: ChatParts) -> None:
        self._parts = parts

    def reply(self, request: ChatRequest) -> ChatReply:
        """Answer ``request``, then store the exchange (only the message when the reply is extractive).

        Raises IdConflict for an id already stored (before the model is called) and
        ProviderError for a failing model; nothing is stored then.
        """
        parts, scope, text = self._parts, request.scope, request.text
        wanted = [given for given in (request.message_id, request.reply_id) if given is not None]
        taken = sorted(parts.store.get_by_ids(wanted)) if wanted else []
        if taken:
            # Found before the model is called (and paid for): a reply differs every time, so a retry cannot match.
            raise IdConflict(
                f"id {taken[0]!r} is already stored: that exchange happened (read it with get()), or use new ids"
            )
        previous = parts.store.history(scope, limit=1, newest_first=True)
        since = previous[0].created_at if previous else datetime.now(UTC)
        llm = parts.llm
        # A model gets the session's working memory as messages, so the block leaves those
        # turns out; an extractive reply has only the block, so it keeps them.
        working = self._working_turns(scope, request.shared) if llm.is_available else []
        # An extractive reply quotes the block's items to a person: word for word, never abridged.
        context = parts.context(
            ContextRequest(
                text=text,
                scope=Scope(scope.user_id, None if request.shared else scope.agent_id, None),
                budget=request.budget,
                zone=request.zone,
                leave_out=frozenset(seq for seq, _ in working),
                verbatim=None if llm.is_available else True,
            )
        )
        message = {
            "role": "user",
            "content": text,
            **({"id": request.message_id} if request.message_id is not None else {}),
        }
        if llm.is_available:
            today = datetime.now(request.zone).strftime("%A %d %B %Y")
            completion = llm.generate(
                [*conversation([turn for _, turn in working]), ChatMessage("user", text)],
                system=request.system or render("agent_system", today=today),
                memory=context.text or None,
                max_tokens=parts.settings.chat_max_tokens,
                purpose="chat",
            )
            answer = _storable(completion.text)
            if not answer:
                raise ProviderError(f"{llm.name} replied with an empty message; nothing was stored, send it again")
            size, limit = len(answer.encode("utf-8")), parts.settings.max_text_bytes
            if size > limit:
                raise ProviderError(
                    f"{llm.name} replied with {size:,} bytes, more than max_text_bytes ({limit:,}) lets memstrata"
                    " store; nothing was stored: raise max_text_bytes or ask for a shorter reply"
                )
            said = {
                "role": "assistant",
                "content": answer,
                **({"id": request.reply_id} if request.reply_id is not None else {}),
            }
            stored = parts.remember([message, said], scope)
            usage, model = completion.usage, completion.model
        else:
            answer = extractive_answer(context)
            stored = parts.remember([message], scope)
            usage, model = None, "none"
        return ChatReply(
            answer=answer,
            memories=tuple(used_memory(item) for item in context.items),
            model=model,
            provider=llm.name,
            is_extractive=usage is None,
            context_tokens=context.tokens,
            tokens_in=usage.input_tokens if usage else 0,
            tokens_out=usage.output_tokens if usage else 0,
            tokens_cached=usage.cached_tokens if usage else 0,
            consolidations=tuple(
                item
                for item in reversed(parts.store.consolidations(scope.user_id, limit=CONSOLIDATIONS_SCANNED))
                if item.created_at > since
            ),
            consolidation_due=parts.consolidation_due(scope.user_id),
            turn_ids=tuple(turn.id for turn in stored),
        )

    def _working_turns(self, scope: Scope, shared: bool) -> list[tuple[int, Turn]]:
        """The session's working memory (its last exchanges; ``shared``: every agent's) as (seq, turn), in order."""
        if scope.session_id is None:
            return []
        store = self._parts.store
        turns = store.get_by_seqs(self._parts.working_seqs(scope.user_id, scope.session_id), scope.user_id)
        said = sorted(turns, key=lambda seq: (turns[seq].created_at, seq))  # a back-filled turn is not the latest
        return [(seq, turns[seq]) for seq in said if shared or turns[seq].agent_id == scope.agent_id]


def conversation(turns: Sequence[Turn]) -> list[ChatMessage]:
    """User and assistant turns as chat messages, starting with a user message (as providers require)."""
    messages = [
        ChatMessage("user" if turn.role is Role.USER else "assistant", turn.content)
        for turn in turns
        if turn.role in (Role.USER, Role.ASSISTANT)
    ]
    while messages and messages[0].role != "user":
        messages.pop(0)
    return messages


def used_memory(item: ContextItem) -> UsedMemory:
    """The part of a context item a chat reply reports."""
    return UsedMemory(
        id=item.id, kind=item.kind, tier=item.tier, score=item.score, text=item.text, is_abridged=item.is_abridged
    )


def extractive_answer(context: Context, limit: int = EXTRACTIVE_ITEMS) -> str:
    """The reply without an LLM: the most relevant memories, labelled as memories, or that there are none."""
    ranked = sorted((item for item in context.items if item.kind in _EXTRACTIVE_KINDS), key=lambda item: -item.score)
    # Earlier questions are stored too, but rarely hold what is asked for now: they go last.
    statements = [item for item in ranked if not item.text.rstrip().endswith("?")]
    questions = [item for item in ranked if item.text.rstrip().endswith("?")]
    spare = [item for item in context.items if item.kind == ItemKind.PROFILE]
    picked = (statements + spare + questions)[:limit]
    if not picked:
        return EXTRACTIVE_EMPTY
    return "\n".join([EXTRACTIVE_HEADER, *(f"- {item.text}" for item in picked)])


def _storable(text: str) -> str:
    """A model's reply as text memstrata stores: no NUL characters, lone surrogates replaced, trimmed.

    A model can emit either; refusing the reply after the paid call would lose the user's
    message with it.
    """
    return text.replace("\x00", "").encode("utf-8", "replace").decode("utf-8").strip()
