"""The MCP tools over shared spaces: create_space, list_spaces, grant, revoke, share.

Each acts as an agent (the server's ``--agent``, else the call's ``agent_id``), whose grants
decide what it may do; without one the call is refused (see ``ServerScope.acting``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.types import CallToolResult
from pydantic import Field

from memstrata.errors import IdConflict
from memstrata.mcp import views
from memstrata.mcp.calls import MemoryContext, call
from memstrata.mcp.parameters import AgentId
from memstrata.mcp.schemas import GrantOut, RevokeOut, ShareOut, SpaceOut, SpacesOut
from memstrata.mcp.scope import ServerScope
from memstrata.memory import Memory
from memstrata.models import Access

SpaceArgument = Annotated[str, Field(description="The shared space's name.")]
Grantee = Annotated[str, Field(description="The agent whose access changes.")]

CREATE_SPACE_DESCRIPTION = """Create a shared space: a memory several agents use, beside each user's own.
The agent acting becomes its admin (it may grant others read, write or admin access). Use it for
what a team of agents must all know (a project's decisions, deadlines, conventions); keep what
is about one user in that user's memory. A name already taken is refused."""

LIST_SPACES_DESCRIPTION = """List the shared spaces the agent acting may read, with its access to each
(read, write or admin). Name one as space= on the memory tools, or search several at once with
spaces= on search_memory and get_context."""

GRANT_DESCRIPTION = """Give an agent read, write or admin access to a shared space, replacing what it had.
The agent acting needs admin access to the space. read: search and context; write: also add;
admin: also forget, grant and revoke."""

REVOKE_DESCRIPTION = """Take an agent's access to a shared space away (the memories it wrote there stay).
The agent acting needs admin access to the space."""

SHARE_DESCRIPTION = """Copy memories (by id) of a user's memory or of a space into a shared space, each copy
linked to its source; nothing is moved, and sharing the same memory again returns the same copy.
The agent acting needs write access to to_space (and read access to a source space)."""


class SpaceTools:
    """The bodies of the space tools, within one ServerScope."""

    def __init__(self, scope: ServerScope) -> None:
        self.scope = scope

    async def create_space(
        self,
        ctx: MemoryContext,
        space: Annotated[str, Field(description="The new space's name.")],
        description: Annotated[str | None, Field(description="What the space is for (optional).")] = None,
        agent_id: AgentId = None,
    ) -> Annotated[CallToolResult, SpaceOut]:
        """Create a shared space, as its admin."""

        def create(memory: Memory) -> SpaceOut:
            agent = self.scope.acting(agent_id)
            # Checked before create_space, which erases what a space of that name holds before it
            # finds the name taken: a model "making sure the space exists" must not wipe it.
            if any(known.name == space for known in memory.spaces(prefix=space)):
                raise IdConflict(f"a space called {space!r} exists already; use it, or pick another name")
            return views.space_out(memory.create_space(space, description=description, agent_id=agent), Access.ADMIN)

        return await call(ctx, create, views.space_text)

    async def list_spaces(
        self,
        ctx: MemoryContext,
        prefix: Annotated[str, Field(description="Only names that start with this (optional).")] = "",
        agent_id: AgentId = None,
    ) -> Annotated[CallToolResult, SpacesOut]:
        """List the spaces the agent may read."""

        def listed(memory: Memory) -> SpacesOut:
            agent = self.scope.acting(agent_id)
            spaces = memory.spaces(agent_id=agent, prefix=prefix)
            # The agent's own grants, read through the space it may read.
            held = {
                space.name: next((g.access for g in memory.grants(space.name) if g.agent_id == agent), None)
                for space in spaces
            }
            return SpacesOut(agent_id=agent, spaces=[views.space_out(space, held[space.name]) for space in spaces])

        return await call(ctx, listed, views.spaces_text)

    async def grant(
        self,
        ctx: MemoryContext,
        space: SpaceArgument,
        grantee: Grantee,
        access: Annotated[Literal["read", "write", "admin"], Field(description="The access it gets.")],
        agent_id: AgentId = None,
    ) -> Annotated[CallToolResult, GrantOut]:
        """Give an agent access to a space."""

        def give(memory: Memory) -> GrantOut:
            agent = self.scope.acting(agent_id)
            return views.grant_out(memory.grant(space, grantee, access, by=agent), agent)

        return await call(ctx, give, views.grant_text)

    async def revoke(
        self, ctx: MemoryContext, space: SpaceArgument, grantee: Grantee, agent_id: AgentId = None
    ) -> Annotated[CallToolResult, RevokeOut]:
        """Take an agent's access to a space away."""

        def take(memory: Memory) -> RevokeOut:
            agent = self.scope.acting(agent_id)
            revoked = memory.revoke(space, grantee, by=agent)
            return RevokeOut(space=space, agent_id=grantee, revoked=revoked, by=agent)

        return await call(ctx, take, views.revoke_text)

    async def share(
        self,
        ctx: MemoryContext,
        ids: Annotated[list[str], Field(min_length=1, description="The ids of the memories to share.")],
        to_space: Annotated[str, Field(description="The shared space the copies go to.")],
        user_id: Annotated[str | None, Field(description="The user whose memories they are.")] = None,
        space: Annotated[str | None, Field(description="The space they are in instead (not with user_id).")] = None,
        agent_id: AgentId = None,
    ) -> Annotated[CallToolResult, ShareOut]:
        """Copy memories into a shared space."""

        def copy(memory: Memory) -> ShareOut:
            # The source: a space, or a user (the server's fixed one, or the call's); the agent acts either way.
            source = self.scope.whose(user_id, space, agent_id)
            agent = self.scope.acting(agent_id)
            copies = memory.share(ids, to_space=to_space, user_id=source.user_id, space=source.space, agent_id=agent)
            return views.share_out(source, to_space, copies)

        return await call(ctx, copy, views.share_text)
