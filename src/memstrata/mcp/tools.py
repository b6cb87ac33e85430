"""The MCP tools: each runs one Memory method in a worker thread and returns structured content plus text."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import tzinfo
from typing import Annotated, Any, Literal

from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BeforeValidator, Field, StrictBool

from memstrata.errors import InvalidInput
from memstrata.mcp import views
from memstrata.mcp.calls import MemoryContext, call
from memstrata.mcp.parameters import AgentId, SpaceName
from memstrata.mcp.schemas import AddOut, ChatOut, ContextOut, ForgetOut, InspectOut, SearchOut
from memstrata.mcp.scope import ServerScope
from memstrata.mcp.space_tools import (
    CREATE_SPACE_DESCRIPTION,
    GRANT_DESCRIPTION,
    LIST_SPACES_DESCRIPTION,
    REVOKE_DESCRIPTION,
    SHARE_DESCRIPTION,
    SpaceTools,
)
from memstrata.memory import Memory
from memstrata.validation import MAX_BUDGET, MIN_BUDGET, check_timezone

USER_DESCRIPTION = (
    "Whose memory to use: the id of the user the conversation is with. Required unless space names a shared space."
)
UserId = Annotated[str | None, Field(description=USER_DESCRIPTION)]
SharedSpaces = Annotated[
    list[str] | Literal["all"] | None,
    Field(
        description='Shared spaces to rank together with this memory: their names, or "all" (every space the agent'
        " may read). Each hit names its space and writer; writers the agent trusts less rank lower. Needs an"
        " acting agent."
    ),
]
SessionId = Annotated[str | None, Field(description="The conversation (session) id (optional).")]
TimeZone = Annotated[
    str | None,
    Field(
        max_length=64,
        description="The user's IANA time zone, e.g. Europe/Paris, for 'yesterday' and dates (optional; "
        "default the server's).",
    ),
]

ADD_DESCRIPTION = """Remember one message: store it verbatim in the user's long-term memory, indexed for search.
Call it with what the user says that is worth recalling later (facts about them, preferences,
plans, decisions) and, if useful, with your own replies (role "assistant"). Stored at once; no LLM
is called. Giving an id makes a retry safe: the same id with the same text is not stored twice.
With space, it goes into that shared space instead, for the other agents there to find."""

SEARCH_DESCRIPTION = """Search the user's memory for what relates to a query, best match first.
Hybrid search: full-text (BM25) and semantic vectors, fused. The query is plain words, never search
syntax; a date in it ("on 9 November 2022", "in July 2022", "last week") favours what was said then. Returns the
stored messages with their dates and ids. For a ready-made block to ground an
answer in, use get_context instead. With spaces, shared spaces are searched too and ranked together
with it; each hit names its space and the agent that wrote it."""

CONTEXT_DESCRIPTION = """Get what the memory holds about a query as one block of text, packed under a token budget.
The block lists the user's profile, habits, relevant facts (current ones; with include_superseded
also what they replaced), related entities, summaries and dated conversation excerpts, in that
order. The best excerpt is quoted word for word; when the budget is short, later ones are
abridged (articles, "I", "is" left out) so more fit; verbatim=true quotes all of them whole.
Call it before answering anything that may depend on what the user said earlier, and put the
text in your reasoning. With spaces, what shared spaces hold comes in a section of its own, each
line naming its space and the agent that wrote it."""

FORGET_DESCRIPTION = """Permanently delete the user's memories: all of them, or only one session's or one agent's.
Irreversible, indexes included. Call it only when the user asks to be forgotten, and set
confirm=true to show that they did; a call without it deletes nothing. With space, it deletes that
shared space's memories, every agent's (the agent acting needs admin access)."""

INSPECT_DESCRIPTION = """Show what the memory holds for the user, tier by tier: counts, profile, long-term facts,
mid-term topics, habits, entities, consolidated summaries and the latest exchanges. For looking
around or explaining what is remembered; to answer a question use get_context or search_memory."""

CHAT_DESCRIPTION = """Ask memstrata's own assistant (the LLM configured for memstrata) to answer a message from the
user's memory; the message and its reply are then stored in the session. Use it to delegate a
question about the user's past to a model that sees their whole memory. To ground your own answer
in memory, call get_context instead."""

#: The tool that exists only while an LLM is configured.
CHAT_TOOL = "chat"

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
ERASE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
# The configured LLM may be a remote provider.
ASK = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True)
# Setting a grant again gives the same access; a revoke takes access away (nothing is deleted).
GRANT = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
# Sharing the same memory again returns the same copy.
SHARE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


class MemoryTools:
    """The tools' bodies over the Memory the server's lifespan opened, within one ServerScope."""

    def __init__(self, scope: ServerScope) -> None:
        self.scope = scope

    async def add_memory(
        self,
        ctx: MemoryContext,
        content: Annotated[str, Field(description="The message text, verbatim.")],
        role: Annotated[Literal["user", "assistant", "system", "tool"], Field(description="Who said it.")] = "user",
        user_id: UserId = None,
        space: SpaceName = None,
        session_id: SessionId = None,
        agent_id: AgentId = None,
        id: Annotated[str | None, Field(description="Your id for the message (optional); makes retries safe.")] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="JSON object stored with the message (optional).")
        ] = None,
        timestamp: Annotated[
            str | None, Field(description="When it was said, ISO 8601 with an offset (default: now).")
        ] = None,
    ) -> Annotated[CallToolResult, AddOut]:
        """Store one message."""

        def add(memory: Memory) -> AddOut:
            whose = self.scope.whose(user_id, space, agent_id)
            turns = memory.add(
                [{"role": role, "content": content}],
                user_id=whose.user_id,
                space=whose.space,
                session_id=session_id,
                agent_id=whose.agent_id,
                metadata=metadata,
                timestamp=timestamp,
                id=id,
            )
            return views.add_out(whose, turns)

        return await call(ctx, add, views.add_text)

    async def search_memory(
        self,
        ctx: MemoryContext,
        query: Annotated[str, Field(description="What to look for, in plain words.")],
        user_id: UserId = None,
        space: SpaceName = None,
        spaces: SharedSpaces = None,
        limit: Annotated[
            int, BeforeValidator(json_number), Field(strict=True, ge=1, le=100, description="How many results.")
        ] = 10,
        session_id: Annotated[str | None, Field(description="Only this session's messages (optional).")] = None,
        agent_id: AgentId = None,
        tiers: Annotated[
            tuple[Literal["longterm", "scene", "midterm", "consolidation"], ...],
            Field(
                description="Derived tiers to search too: facts (longterm) and summaries. Default: messages only."
                " Ignored with session_id or agent_id: derived items belong to no session or agent."
            ),
        ] = (),
        diversity: Annotated[
            float,
            BeforeValidator(json_number),
            Field(
                strict=True,
                ge=0.0,
                le=1.0,
                description="0 ranks by relevance; up to 1 favours results unlike each other.",
            ),
        ] = 0.0,
        timezone: TimeZone = None,
    ) -> Annotated[CallToolResult, SearchOut]:
        """Search one user's memory, or a space's, and optionally shared spaces with it."""

        zones: list[tzinfo] = []  # the zone the hits' dates are shown in, once search has checked it

        def search(memory: Memory) -> SearchOut:
            whose = self.scope.whose(user_id, space, agent_id, spaces=spaces)
            zones.append(check_timezone(timezone) or memory.settings.zone)
            hits = memory.search(
                query,
                user_id=whose.user_id,
                space=whose.space,
                spaces=spaces,
                limit=limit,
                session_id=session_id,
                agent_id=whose.agent_id,
                tiers=tiers,
                diversity=diversity,
                timezone=timezone,
            )
            return views.search_out(whose, query, hits)

        return await call(ctx, search, lambda found: views.search_text(found, zones[-1]))

    async def get_context(
        self,
        ctx: MemoryContext,
        query: Annotated[str, Field(description="What the answer is about, e.g. the user's latest message.")],
        user_id: UserId = None,
        space: SpaceName = None,
        spaces: SharedSpaces = None,
        token_budget: Annotated[
            int,
            BeforeValidator(json_number),
            Field(strict=True, ge=MIN_BUDGET, le=MAX_BUDGET, description="The most tokens the block may take."),
        ] = 1000,
        session_id: Annotated[
            str | None, Field(description="The current session: its latest exchanges come last (optional).")
        ] = None,
        agent_id: AgentId = None,
        include_superseded: Annotated[
            bool,
            BeforeValidator(json_boolean),
            Field(strict=True, description="Also list facts that newer ones replaced, marked as such."),
        ] = False,
        timezone: TimeZone = None,
        verbatim: Annotated[
            StrictBool | None,
            BeforeValidator(json_boolean),
            Field(
                description="true quotes every excerpt whole; by default those after the best one are abridged"
                " when the budget cannot hold them whole."
            ),
        ] = None,
    ) -> Annotated[CallToolResult, ContextOut]:
        """Assemble a memory block for a prompt."""

        def assemble(memory: Memory) -> ContextOut:
            whose = self.scope.whose(user_id, space, agent_id, spaces=spaces)
            context = memory.context(
                query,
                user_id=whose.user_id,
                space=whose.space,
                spaces=spaces,
                token_budget=token_budget,
                agent_id=whose.agent_id,
                session_id=session_id,
                include_superseded=include_superseded,
                timezone=timezone,
                verbatim=verbatim,
            )
            return views.context_out(context)

        return await call(ctx, assemble, views.context_text)

    async def forget_memory(
        self,
        ctx: MemoryContext,
        confirm: Annotated[
            bool,
            BeforeValidator(json_boolean),
            Field(strict=True, description="Must be true: the user asked for these memories to be deleted for good."),
        ],
        user_id: UserId = None,
        space: SpaceName = None,
        session_id: Annotated[str | None, Field(description="Delete only this session's memories.")] = None,
        agent_id: AgentId = None,
    ) -> Annotated[CallToolResult, ForgetOut]:
        """Delete a user's (or a space's) memories for good."""

        def forget(memory: Memory) -> ForgetOut:
            whose = self.scope.whose(user_id, space, agent_id)
            if confirm is not True:
                whom = f"space {whose.space!r}" if whose.space is not None else repr(whose.user_id)
                what = f"session {session_id!r} of {whom}" if session_id else f"every memory of {whom}"
                raise InvalidInput(
                    f"nothing was deleted: forget_memory deletes {what} for good, so it needs confirm=true, "
                    "set only once the user has asked for it"
                )
            deletion = memory.forget(
                user_id=whose.user_id, space=whose.space, agent_id=whose.agent_id, session_id=session_id
            )
            return views.forget_out(deletion)

        return await call(ctx, forget, views.forget_text)

    async def inspect_memory(
        self,
        ctx: MemoryContext,
        user_id: UserId = None,
        space: SpaceName = None,
        limit: Annotated[
            int, BeforeValidator(json_number), Field(strict=True, ge=1, le=100, description="Items per tier.")
        ] = 10,
        agent_id: Annotated[
            str | None,
            Field(
                description="The agent acting on a space (required with space unless the server acts as one"
                " agent); a user's memory is shown whole."
            ),
        ] = None,
    ) -> Annotated[CallToolResult, InspectOut]:
        """Show each memory tier of a user or a space."""

        def inspect(memory: Memory) -> InspectOut:
            whose = self.scope.whose(user_id, space, agent_id)
            report = memory.inspect(user_id=whose.user_id, space=whose.space, agent_id=whose.agent_id, limit=limit)
            return views.inspect_out(report)

        return await call(ctx, inspect, views.inspect_text)

    async def chat(
        self,
        ctx: MemoryContext,
        message: Annotated[str, Field(description="The user's message to answer.")],
        user_id: UserId = None,
        space: SpaceName = None,
        session_id: Annotated[
            str | None, Field(description="The conversation: its latest exchanges are sent along (optional).")
        ] = None,
        agent_id: AgentId = None,
        timezone: TimeZone = None,
    ) -> Annotated[CallToolResult, ChatOut]:
        """Answer a message from memory with the configured LLM."""

        def answer(memory: Memory) -> ChatOut:
            whose = self.scope.whose(user_id, space, agent_id)
            reply = memory.chat(
                message,
                user_id=whose.user_id,
                space=whose.space,
                session_id=session_id,
                agent_id=whose.agent_id,
                timezone=timezone,
            )
            return views.chat_out(whose, reply)

        return await call(ctx, answer, views.chat_text)


def build_tools(scope: ServerScope) -> list[Tool]:
    """The tools of a server with this scope, their input schemas fitted to it (``chat`` included: see CHAT_TOOL)."""
    tools, spaces = MemoryTools(scope), SpaceTools(scope)
    table: list[tuple[Callable[..., Any], str, str, ToolAnnotations]] = [
        (tools.add_memory, "Remember a message", ADD_DESCRIPTION, WRITE),
        (tools.search_memory, "Search memory", SEARCH_DESCRIPTION, READ_ONLY),
        (tools.get_context, "Get memory context", CONTEXT_DESCRIPTION, READ_ONLY),
        (tools.forget_memory, "Forget memories", FORGET_DESCRIPTION, ERASE),
        (tools.inspect_memory, "Inspect memory", INSPECT_DESCRIPTION, READ_ONLY),
        (tools.chat, "Chat with memory", CHAT_DESCRIPTION, ASK),
        (spaces.create_space, "Create a shared space", CREATE_SPACE_DESCRIPTION, WRITE),
        (spaces.list_spaces, "List shared spaces", LIST_SPACES_DESCRIPTION, READ_ONLY),
        (spaces.grant, "Grant access to a space", GRANT_DESCRIPTION, GRANT),
        (spaces.revoke, "Revoke access to a space", REVOKE_DESCRIPTION, GRANT),
        (spaces.share, "Share memories into a space", SHARE_DESCRIPTION, SHARE),
    ]
    return [
        fit_schema(strict(Tool.from_function(function, title=title, description=description, annotations=hints)), scope)
        for function, title, description, hints in table
    ]


def json_number(value: object) -> object:
    """A number sent as JSON text (``"5"``, ``"0.5"``) as that number, a whole ``5.0`` as 5 (models write
    either); anything else as it is, for the strict check after it to refuse."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            number = json.loads(value)
        except ValueError:
            return value
        if isinstance(number, int | float) and not isinstance(number, bool):
            return json_number(number)
    return value


def json_boolean(value: object) -> object:
    """``"true"``/``"false"`` (clients that send every argument as JSON text) as booleans; nothing else."""
    return {"true": True, "false": False}.get(value, value) if isinstance(value, str) else value


def strict(tool: Tool) -> Tool:
    """``tool`` refusing arguments it does not know: an error the client sees, and nothing runs.

    By default the SDK drops them: ``forget_memory`` with a misspelled ``sessionId`` would
    forget the whole user. (``confirm`` itself is strict: ``"yes"`` or ``1`` is not true.)
    """
    lax = tool.fn_metadata.arg_model
    config = {**lax.model_config, "extra": "forbid"}
    model = type(lax.__name__, (lax,), {"__module__": lax.__module__, "model_config": config})
    return tool.model_copy(update={"fn_metadata": tool.fn_metadata.model_copy(update={"arg_model": model})})


def fit_schema(tool: Tool, scope: ServerScope) -> Tool:
    """``tool`` with ``user_id`` absent (fixed user) or listed first, required unless the tool may name a ``space``
    instead (per-call scope); ``agent_id`` absent when fixed.

    "user_id or space" is said in the descriptions, not as a top-level ``anyOf``, which some
    clients refuse in a tool's input schema; the call itself checks it.
    """
    schema = copy.deepcopy(tool.parameters)
    properties: dict[str, Any] = schema.get("properties", {})
    required: list[str] = schema.get("required", [])
    if scope.agent_id is not None:
        properties.pop("agent_id", None)
    if "user_id" in properties:
        del properties["user_id"]
        if scope.user_id is None:
            # The signature's default (None) lets a fixed-user server omit it; per call it is required.
            properties = {
                "user_id": {"type": "string", "title": "User Id", "description": USER_DESCRIPTION},
                **properties,
            }
            if "space" not in properties:
                required = ["user_id", *required]
    schema["properties"] = properties
    schema["additionalProperties"] = False  # as ``strict`` enforces
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    return tool.model_copy(update={"parameters": schema})
