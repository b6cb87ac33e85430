"""``/v1/users`` and ``/v1/sessions``: whose memories exist, for browsing them (the inspector's first screen)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from memstrata.memory import Memory
from memstrata.models import Turn
from memstrata.server.acting import Whose
from memstrata.server.auth import ActorDep
from memstrata.server.bodies import StrictJSONRoute
from memstrata.server.dependencies import MemoryDep
from memstrata.server.roles import READ
from memstrata.server.routes import ERRORS, SPACE_NOT_FOUND, SpaceQuery, UserQuery
from memstrata.server.user_schemas import SessionOut, SessionsResponse, UsersResponse
from memstrata.validation import MAX_IDENTIFIER_LENGTH

router = APIRouter(prefix="/v1", tags=["users"], route_class=StrictJSONRoute)

SCAN_PAGE = 1000
MAX_SCANNED = 20_000
"""Most turns one session listing reads: the store keeps no session index, so sessions are counted from history."""


@router.get("/users", responses=ERRORS, dependencies=[READ])
def list_users(
    memory: MemoryDep,
    actor: ActorDep,
    prefix: Annotated[str, Query(max_length=MAX_IDENTIFIER_LENGTH, description="Only ids starting with it.")] = "",
) -> UsersResponse:
    """Your tenant's users that have stored memories (``Memory.users``), in code point order."""
    tenant = actor.tenant
    # Only the tenant's own users are listed: the prefix is sought inside its namespace.
    return UsersResponse(users=[tenant.outside(user) for user in memory.users(tenant.prefix + prefix)])


@router.get("/sessions", responses={**ERRORS, **SPACE_NOT_FOUND}, dependencies=[READ])
def list_sessions(
    memory: MemoryDep, actor: ActorDep, user_id: UserQuery = None, space: SpaceQuery = None
) -> SessionsResponse:
    """A user's (or space's) sessions with their turn counts, most recently active first."""
    whose = actor.whose(user_id, space)
    tally, is_complete = _sessions(memory, whose)
    ordered = sorted(tally.values(), key=lambda one: one.last_at, reverse=True)
    return SessionsResponse(
        user_id=user_id,
        space=space,
        sessions=[
            SessionOut(session_id=one.session_id, turns=one.turns, first_at=one.first_at, last_at=one.last_at)
            for one in ordered
        ],
        is_complete=is_complete,
    )


@dataclass(slots=True)
class _Tally:
    session_id: str | None
    turns: int
    first_at: datetime
    last_at: datetime

    def count(self, turn: Turn) -> None:
        self.turns += 1
        self.first_at = min(self.first_at, turn.created_at)
        self.last_at = max(self.last_at, turn.created_at)


def _sessions(memory: Memory, whose: Whose) -> tuple[dict[str | None, _Tally], bool]:
    """Sessions counted over the newest ``MAX_SCANNED`` turns; whether that was every turn."""
    tally: dict[str | None, _Tally] = {}
    for offset in range(0, MAX_SCANNED, SCAN_PAGE):
        page = memory.history(
            user_id=whose.user_id,
            space=whose.space,
            agent_id=whose.agent_id,
            limit=SCAN_PAGE,
            offset=offset,
            newest_first=True,
        )
        for turn in page:
            found = tally.get(turn.session_id)
            if found is None:
                tally[turn.session_id] = _Tally(turn.session_id, 1, turn.created_at, turn.created_at)
            else:
                found.count(turn)
        if len(page) < SCAN_PAGE:
            return tally, True
    return tally, False
