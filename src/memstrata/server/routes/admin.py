"""Whole-scope operations and the service itself: forget, export, import, health, version."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Annotated

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from memstrata import __version__
from memstrata.errors import InvalidInput
from memstrata.server.acting import Whose
from memstrata.server.auth import ActorDep, TenantDep
from memstrata.server.bodies import StrictJSONRoute
from memstrata.server.dependencies import MemoryDep
from memstrata.server.roles import ADMIN, READ, WRITE
from memstrata.server.routes import BODY_ERRORS, CONFLICT, ERRORS, SPACE_NOT_FOUND, SpaceQuery
from memstrata.server.schemas import DeletionOut, ErrorOut, HealthOut, ImportOut, ScopeRequest, VersionOut
from memstrata.server.transfer import exported_lines, imported_lines
from memstrata.server.views import deletion_out
from memstrata.transfer import header_line
from memstrata.validation import MAX_IDENTIFIER_LENGTH

router = APIRouter(prefix="/v1", tags=["admin"], route_class=StrictJSONRoute)

JSONL = "application/x-ndjson"


@router.post("/forget", responses={**BODY_ERRORS, **SPACE_NOT_FOUND}, dependencies=[ADMIN])
def forget(body: ScopeRequest, memory: MemoryDep, actor: ActorDep) -> DeletionOut:
    """Hard-delete everything of a user (or of one agent/session of it), indexes included.

    A ``space`` loses its memories (every agent's, or one session's) but keeps its grants;
    the acting agent needs admin access. ``DELETE /v1/spaces/{space}`` removes the space itself.
    """
    whose = actor.whose(body.user_id, body.space, body.agent_id)
    deletion = memory.forget(
        user_id=whose.user_id, space=whose.space, agent_id=whose.agent_id, session_id=body.session_id
    )
    return deletion_out(deletion, actor.tenant)


@router.get(
    "/export",
    response_class=StreamingResponse,
    responses={
        200: {"content": {JSONL: {"schema": {"type": "string"}}}, "description": "JSONL export"},
        **ERRORS,
        **SPACE_NOT_FOUND,
    },
    dependencies=[READ],
)
def export(
    memory: MemoryDep,
    actor: ActorDep,
    user_id: Annotated[
        str | None,
        Query(min_length=1, max_length=MAX_IDENTIFIER_LENGTH, description="Only this user (default: all of yours)."),
    ] = None,
    space: SpaceQuery = None,
    embeddings: bool = False,
) -> StreamingResponse:
    """Stream your tenant's memories as the JSONL that ``/v1/import`` and ``memstrata import`` read.

    With ``space``, a shared space's memories instead (the acting agent needs read access);
    its lines name the ``space`` in place of a ``user_id``.
    """
    tenant = actor.tenant
    # Only the tenant's own users are read: another tenant's data is never touched, however large.
    if user_id is None and space is None:
        whose = [Whose(user_id=user) for user in memory.users(tenant.prefix)]
    else:
        whose = [actor.whose(user_id, space)]
    directory = Path(tempfile.mkdtemp(prefix="memstrata-export-"))
    paths = [directory / f"user-{number}.jsonl" for number in range(len(whose))]
    try:
        # Written before the first byte goes out, so a failure is still an error status.
        for one, path in zip(whose, paths, strict=True):
            memory.export(path, user_id=one.user_id, space=one.space, agent_id=one.agent_id, embeddings=embeddings)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise

    def files() -> Iterator[IO[str]]:
        for path in paths:
            with path.open(encoding="utf-8") as handle:
                yield handle

    return StreamingResponse(
        exported_lines(header_line(memory.embedder.model_id), files(), tenant),
        media_type=JSONL,
        headers={"Content-Disposition": 'attachment; filename="memstrata-export.jsonl"'},
        # Runs after the last byte, or when the client goes away.
        background=BackgroundTask(shutil.rmtree, directory, ignore_errors=True),
    )


@router.post(
    "/import",
    responses={
        **BODY_ERRORS,
        **CONFLICT,
        415: {"model": ErrorOut, "description": "The body was not sent as application/x-ndjson"},
    },
    dependencies=[WRITE],
)
def import_(
    data: Annotated[bytes, Body(media_type=JSONL, description="A JSONL export; send it as application/x-ndjson.")],
    memory: MemoryDep,
    tenant: TenantDep,
) -> ImportOut:
    """Load an export into your tenant: all of it, or on any bad line nothing; user ids are yours."""
    directory = Path(tempfile.mkdtemp(prefix="memstrata-import-"))
    try:
        path = directory / "upload.jsonl"
        with path.open("w", encoding="utf-8") as handle:
            handle.writelines(imported_lines(data, tenant))
        report = memory.import_(path)
    except InvalidInput as exc:
        # The core names the file it read; the caller knows it as the upload.
        raise type(exc)(str(exc).replace(str(path), "the upload")) from exc
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return ImportOut(turns=report.turns, embeddings=report.embeddings, skipped=report.skipped)


@router.get("/health")
async def health() -> HealthOut:
    """Whether the server is up; needs no key."""
    return HealthOut(status="ok")


@router.get("/version", responses=ERRORS, dependencies=[READ])
def version(memory: MemoryDep, tenant: TenantDep, request: Request) -> VersionOut:
    """The memstrata version, API version, embedding model, and the tenant and role of your key."""
    return VersionOut(
        version=__version__,
        api="v1",
        embedder=memory.embedder.model_id,
        tenant=tenant.name,
        role=request.state.role.value,
    )
