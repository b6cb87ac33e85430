"""The agent a request acts as, and whose memory it names: a user's, or a shared space's.

The REST server always acts as an agent in a space, so every space call is checked against
that agent's grants. The agent is the API key's (``keys create --agent``), else the
``server_agent_id`` setting. On a user's memory ``agent_id`` stays what it always was: a
label on the turns and a filter on reads, never checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memstrata.errors import AccessDenied, InvalidInput
from memstrata.memory import Memory
from memstrata.models import Access
from memstrata.server.tenancy import Tenant

NO_AGENT = (
    "a call to a shared space must act as an agent, and this request acts as none: use an API key made"
    " with `memstrata keys create --tenant T --agent NAME`, or set server_agent_id (MEMSTRATA_SERVER_AGENT_ID)"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Whose:
    """The memory a request names, in Memory's keywords: a user's or a space's (stored forms), and the agent."""

    user_id: str | None = None
    space: str | None = None
    #: In a space the acting agent (the caller); in a user's memory the client's label or filter.
    agent_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Actor:
    """Who makes a request: its tenant, and the agent it acts as (plain, as configured; None: no agent)."""

    tenant: Tenant
    agent_id: str | None = None

    def agent(self) -> str:
        """The acting agent's stored id; AccessDenied, saying how to name one, when the request acts as none."""
        if self.agent_id is None:
            raise AccessDenied(NO_AGENT)
        return self.tenant.inside(self.agent_id, "agent_id")

    def as_agent(self, given: str | None) -> str:
        """The acting agent's stored id; AccessDenied when the request names another agent (``given``)."""
        agent = self.agent()
        if given is not None and given != self.agent_id:
            # A key acts as one agent: naming another would borrow its grants.
            raise AccessDenied(f"this request acts as agent {self.agent_id!r}, so agent_id may not name {given!r}")
        return agent

    def space(self, name: str, what: str = "space") -> str:
        """A space's stored name."""
        return self.tenant.inside(name, what)

    def whose(self, user_id: str | None, space: str | None, agent_id: str | None = None) -> Whose:
        """The memory ``user_id`` or ``space`` names (exactly one); in a space, as the acting agent."""
        if (user_id is None) == (space is None):
            raise InvalidInput("name either user_id (a user's memory) or space (a shared space), exactly one")
        if space is None:
            return Whose(user_id=self.tenant.inside(user_id, "user_id"), agent_id=agent_id)
        return Whose(space=self.space(space), agent_id=self.as_agent(agent_id))

    def require(self, memory: Memory, space: str, needed: Access) -> None:
        """NotFound or AccessDenied unless the acting agent has ``needed`` on ``space`` (a stored name).

        For the few Memory methods that take no agent for a space (prune, retry_failed_jobs)
        and would otherwise let the request through as the application.
        """
        agent = self.agent()
        held = {grant.agent_id: grant.access for grant in memory.grants(space, agent_id=agent)}[agent]
        if not held.allows(needed):
            raise AccessDenied(
                f"agent {agent!r} has only {held.value} access to space {space!r}; {needed.value} is needed"
            )

    def shared(self, spaces: Sequence[str] | str | None) -> list[str] | str | None:
        """The ``spaces`` to read with a memory (stored names, or ``"all"``), as Memory's ``spaces`` takes them."""
        if spaces is None or isinstance(spaces, str):
            return spaces
        return [self.space(name, "spaces") for name in spaces]

    def reader(self, whose: Whose, spaces: Sequence[str] | str | None) -> str | None:
        """The agent whose grants and trust apply to ``spaces`` read with a user's memory: the acting agent.

        (In a user's memory ``agent_id`` only filters the turns; in a space it is the acting agent already.)
        """
        return self.agent() if spaces is not None and whose.space is None else None
