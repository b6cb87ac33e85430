"""Whose memory an MCP server's tools reach: one user fixed when it starts, or whichever user each call names."""

from __future__ import annotations

from dataclasses import dataclass

from memstrata.errors import InvalidInput
from memstrata.validation import check_identifier


@dataclass(frozen=True, slots=True)
class ServerScope:
    """The user (and agent) a server is fixed to; ``None`` means each call names its own.

    Invariant: with a fixed user no call reaches another user's memory. The tools then
    publish no ``user_id`` parameter, and a call that passes a different one anyway is
    refused rather than silently redirected. A fixed agent works the same way for ``agent_id``.
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
                raise InvalidInput("user_id is required: this server serves several users, so each call names one")
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
