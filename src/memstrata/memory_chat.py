"""The chat half of the Memory API: answer one message from memory, then remember the exchange."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from memstrata.errors import IdConflict, InvalidInput, ProviderError
from memstrata.llms.base import ChatMessage
from memstrata.models import ChatReply, Context, ContextItem, ItemKind, Role, Scope, Turn, UsedMemory
from memstrata.prompts import render
from memstrata.validation import check_budget, check_identifier, check_text, check_timezone

if TYPE_CHECKING:
    from memstrata.config import Settings
    from memstrata.memory import Memory

EXTRACTIVE_HEADER = "Here is what I remember:"
EXTRACTIVE_EMPTY = "I don't have anything stored about that yet."
EXTRACTIVE_ITEMS = 5
# Profile traits are in every context whatever the question, so they only fill spare places.
_EXTRACTIVE_KINDS = (ItemKind.CELL, ItemKind.CONSOLIDATION, ItemKind.SCENE, ItemKind.MIDTERM, ItemKind.EPISODE)
CONSOLIDATIONS_SCANNED = 100


class ChatViews:
    """Mixed into Memory: ``chat()``."""

    settings: Settings

    def chat(
        self,
        message: str,
        *,
        user_id: str,
        session_id: str | None = None,
        agent_id: str | None = None,
        token_budget: int = 1000,
        system: str | None = None,
        timezone: str | None = None,
        message_id: str | None = None,
        reply_id: str | None = None,
    ) -> ChatReply:
        """Answer ``message`` from ``user_id``'s memory, then store the exchange in the same session.

        Calls ``context()`` for the message, then the LLM with the system instructions
        (``system``, default the ``agent_system`` prompt), the memory block after them, and
        the session's working memory (its last exchanges) as the conversation before the
        message; the block leaves those turns out, so none is sent twice. Then ``add()``s
        the message and the reply in one transaction. Without an LLM the reply is
        extractive — it lists the most relevant memories and says so (``is_extractive``);
        only the message is stored then, since the reply adds nothing.

        Bad input raises InvalidInput before anything happens; a failing model raises
        ProviderError and stores nothing, so sending the message again does not duplicate it.
        ``message_id`` and ``reply_id`` are the ids the message and the reply (when there
        is one) are stored under (default: new ones); an id already stored raises IdConflict
        before the model is called.
        Tier work is never waited for: ``consolidations`` are the ones stored for the user
        since the session's previous exchange, and ``consolidation_due`` says the new turns
        passed the trigger, so the queued tier work will consolidate (in the background, or
        on ``flush()`` when ``background`` is off). Dates (the block's, and the agent's
        "today") are read in ``timezone``, an IANA name, default the ``timezone`` setting.
        """
        memory = self._chat_memory
        memory._require_open()
        scope = memory._scope(user_id, agent_id, session_id)
        text = check_text(message, "message", max_bytes=self.settings.max_text_bytes)
        budget = check_budget(token_budget)
        instructions = None if system is None else check_text(system, "system", max_bytes=self.settings.max_text_bytes)
        zone = check_timezone(timezone) or self.settings.zone
        message_id = check_identifier(message_id, "message_id", required=False)
        reply_id = check_identifier(reply_id, "reply_id", required=False)
        if message_id is not None and message_id == reply_id:
            raise InvalidInput("message_id and reply_id must differ")
        wanted = [given for given in (message_id, reply_id) if given is not None]
        taken = sorted(memory._store.get_by_ids(wanted)) if wanted else []
        if taken:
            # Found before the model is called (and paid for): a reply differs every time, so a retry cannot match.
            raise IdConflict(
                f"id {taken[0]!r} is already stored: that exchange happened (read it with get()), or use new ids"
            )
        previous = memory.history(
            user_id=scope.user_id, session_id=scope.session_id, agent_id=scope.agent_id, limit=1, newest_first=True
        )
        since = previous[0].created_at if previous else datetime.now(UTC)
        llm = memory.llm
        # A model gets the session's working memory as messages, so the block leaves those
        # turns out; an extractive reply has only the block, so it keeps them.
        working = self._working_turns(scope) if llm.is_available else []
        # An extractive reply quotes the block's items to a person: word for word, never abridged.
        context = memory._context(
            text,
            scope.user_id,
            budget,
            scope.agent_id,
            None,
            False,
            frozenset(seq for seq, _ in working),
            zone,
            verbatim=None if llm.is_available else True,
        )
        if llm.is_available:
            today = datetime.now(zone).strftime("%A %d %B %Y")
            completion = llm.generate(
                [*conversation([turn for _, turn in working]), ChatMessage("user", text)],
                system=instructions or render("agent_system", today=today),
                memory=context.text or None,
                purpose="chat",
            )
            answer = _storable(completion.text)
            if not answer:
                raise ProviderError(f"{llm.name} replied with an empty message; nothing was stored, send it again")
            size, limit = len(answer.encode("utf-8")), self.settings.max_text_bytes
            if size > limit:
                raise ProviderError(
                    f"{llm.name} replied with {size:,} bytes, more than max_text_bytes ({limit:,}) lets memstrata"
                    " store; nothing was stored: raise max_text_bytes or ask for a shorter reply"
                )
            stored = memory.add(
                [
                    {"role": "user", "content": text, **({"id": message_id} if message_id is not None else {})},
                    {"role": "assistant", "content": answer, **({"id": reply_id} if reply_id is not None else {})},
                ],
                user_id=scope.user_id,
                session_id=scope.session_id,
                agent_id=scope.agent_id,
            )
            usage, model = completion.usage, completion.model
        else:
            answer = extractive_answer(context)
            stored = memory.add(
                text, user_id=scope.user_id, session_id=scope.session_id, agent_id=scope.agent_id, id=message_id
            )
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
                for item in reversed(memory.consolidations(user_id=scope.user_id, limit=CONSOLIDATIONS_SCANNED))
                if item.created_at > since
            ),
            consolidation_due=self._consolidation_due(scope.user_id),
            turn_ids=tuple(turn.id for turn in stored),
        )

    # -- helpers ----------------------------------------------------------------------

    @property
    def _chat_memory(self) -> Memory:
        return self  # type: ignore[return-value]

    def _working_turns(self, scope: Scope) -> list[tuple[int, Turn]]:
        """The session's working memory (its last exchanges) as (seq, turn), in the order they were said."""
        if scope.session_id is None:
            return []
        store = self._chat_memory._tiers
        turns = store.get_by_seqs(self._chat_memory._working_seqs(scope.user_id, scope.session_id), scope.user_id)
        said = sorted(turns, key=lambda seq: (turns[seq].created_at, seq))  # a back-filled turn is not the latest
        return [(seq, turns[seq]) for seq in said if turns[seq].agent_id == scope.agent_id]

    def _consolidation_due(self, user_id: str) -> bool:
        return self._chat_memory._hierarchy.consolidation_due(user_id)


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
