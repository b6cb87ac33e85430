"""Whose memory an MCP server's tools reach: one user fixed when it starts, or whichever user each call names.

A call may name a shared space instead of a user. The server always acts as an agent there:
the agent fixed when it started (``--agent``), else the call's ``agent_id``; its grants decide.
"""

from __future__ import annotations

from dataclasses import dataclass

from memstrata.errors import InvalidInput
from memstrata.validation import check_identifier

#: Why a call that reaches a shared space without an acting agent is refused.
NO_AGENT = (
    "shared spaces are used as an agent, whose grants decide what it may do: pass agent_id (the agent acting),"
    " or start the server with --agent"
)


@dataclass(frozen=True, slots=True)
class Whose:
    """The memory a call reaches once checked: a user's (``user_id``) or a shared space's, and the agent acting."""

    user_id: str | None = None
    space: str | None = None
    agent_id: str | None = None


@dataclass(frozen=True, slots=True)
class ServerScope:
    """The user (and agent) a server is fixed to; ``None`` means each call names its own.

    Invariant: with a fixed user no call reaches another user's memory. The tools then
    publish no ``user_id`` parameter, and a call that passes a different one anyway is
    refused rather than silently redirected. A fixed agent works the same way for ``agent_id``.
    A shared space is no user's memory: a fixed-user server may name one, as an agent.
    """

    user_id: str | None = None
    agent_id: str | None = None

    @classmethod
    def create(cls, user_id: str | None = None, agent_id: str | None = None) -> ServerScope:
        """A scope with its fixed ids checked now, so a bad ``--user`` fails at start rather than on every call."""
        return cls(
            check_identifier(user_id, "user_id", required=False),
            check_identifier(agent_id, "agent_id", required=False),
        )

    def user(self, given: str | None) -> str:
        """The user a call acts for."""
        if self.user_id is None:
            if given is None:
                raise InvalidInput(
                    "user_id is required: this server serves several users, so each call names one"
                    " (or a shared space, with space)"
                )
            return given
        if given is not None and given != self.user_id:
            raise InvalidInput(
                f"this server serves only user {self.user_id!r} (fixed when it started); leave user_id out"
            )
        return self.user_id

    def agent(self, given: str | None) -> str | None:
        """The agent a call acts for, if any."""
        if self.agent_id is None:
            return given
        if given is not None and given != self.agent_id:
            raise InvalidInput(
                f"this server acts only as agent {self.agent_id!r} (fixed when it started); leave agent_id out"
            )
        return self.agent_id

    def acting(self, given: str | None) -> str:
        """The agent a call to a shared space acts as; InvalidInput when there is none."""
        agent = self.agent(given)
        if agent is None:
            raise InvalidInput(NO_AGENT)
        return agent

    def whose(self, user_id: str | None, space: str | None, agent_id: str | None, *, spaces: object = None) -> Whose:
        """The memory a call names with ``user_id`` or ``space``; ``spaces`` (shared ones to rank with it) too.

        Anything that reaches a space needs an acting agent: without one the core would act as
        the application, which may read every space.
        """
        if space is None:
            agent = self.agent(agent_id) if spaces is None else self.acting(agent_id)
            return Whose(user_id=self.user(user_id), agent_id=agent)
        if user_id is not None:
            raise InvalidInput("name either user_id or space, not both")
        return Whose(space=space, agent_id=self.acting(agent_id))
