"""Shared spaces: who may use them, how far agents trust each other, and where shared memories came from."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

from memstrata.errors import AccessDenied, IdConflict, InvalidInput, NotFound
from memstrata.models import (
    Access,
    Cell,
    Deletion,
    Grant,
    Hit,
    Scope,
    Share,
    Space,
    Turn,
    space_of,
    space_scope,
)
from memstrata.storage.base import ProvenanceStore, SpaceStore
from memstrata.storage.roles import KnowledgeStore, TurnStore
from memstrata.tiers.episodic import Episodic
from memstrata.tiers.visits import VisitRecorder
from memstrata.validation import check_identifier, check_user_id


class SharingStore(SpaceStore, ProvenanceStore, TurnStore, KnowledgeStore, Protocol):
    """What spaces read and write: their records, grants, trust, share links and the turns shared."""


@dataclass(frozen=True, slots=True)
class Target:
    """Whose memory a call touches once checked: a user's (``space`` None) or a space's, and who calls."""

    scope: Scope
    space: str | None = None
    #: The agent acting on a space (checked against its grants); None: the application itself.
    caller: str | None = None

    @property
    def user_id(self) -> str:
        """The scope id the store keys the memory by."""
        return self.scope.user_id


def check_access(value: object) -> Access:
    """``"read"``, ``"write"`` or ``"admin"`` as an Access; InvalidInput otherwise."""
    if not isinstance(value, str) or value not in {level.value for level in Access}:
        raise InvalidInput(f"access must be one of read, write, admin, not {value!r}")
    return Access(value)


def check_weight(value: object) -> float:
    """A trust weight between 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
        raise InvalidInput(f"weight must be a number from 0 to 1, not {value!r}")
    return float(value)


@dataclass(kw_only=True, eq=False)
class Spaces:
    """Creates, grants and deletes spaces; checks each call to one; shares memories into them."""

    store: SharingStore
    episodic: Episodic
    visits: VisitRecorder

    # -- the spaces -------------------------------------------------------------------

    def create(self, name: str, description: str | None, creator: str | None) -> Space:
        """A new space; its creator (an agent) gets admin on it. IdConflict when the name is taken."""
        now = datetime.now(UTC)
        space = Space(name=name, description=description, created_at=now)
        self.store.create_space(space)
        if creator is not None:
            self.store.set_grant(Grant(space=name, agent_id=creator, access=Access.ADMIN, granted_at=now))
        return space

    def ensure(self, names: set[str]) -> None:
        """Create those of the spaces ``names`` that do not exist (an import brings their memories)."""
        for name in sorted(names):
            if self.store.space(name) is None:
                with contextlib.suppress(IdConflict):  # another process made it meanwhile
                    self.store.create_space(Space(name=name, created_at=datetime.now(UTC)))

    def listed(self, agent_id: str | None, prefix: str = "") -> list[Space]:
        """The spaces ``agent_id`` may read (all of them for the application), by name."""
        every = self.store.spaces(prefix)
        if agent_id is None:
            return every
        readable = {grant.space for grant in self.store.grants_of(agent_id)}
        return [space for space in every if space.name in readable]

    def readable(self, agent_id: str | None) -> list[str]:
        """The names of the spaces ``agent_id`` may read (every space for the application)."""
        if agent_id is None:
            return [space.name for space in self.store.spaces()]
        return [grant.space for grant in self.store.grants_of(agent_id)]

    def delete(self, name: str, caller: str | None) -> Deletion:
        """Delete a space, its grants and every memory in it; audited. Copies shared from it stay where they went.

        The space is marked first, and is from then on gone for every call (no one writes to
        it while its memories go); its record goes last. A deletion that stopped half-way is
        finished by the next ``delete``, and until then the name cannot be taken again.
        """
        if self.store.space(name) is not None:
            self.require(name, caller, Access.ADMIN)
        elif caller is not None and not (self.store.access(name, caller) or Access.READ).allows(Access.ADMIN):
            raise NotFound(f"no space called {name!r}")  # a deletion under way, finished by an admin
        if not self.store.begin_space_deletion(name, datetime.now(UTC)):
            raise NotFound(f"no space called {name!r}")
        scope = space_scope(name)
        self.visits.drop(scope)
        turns = self.episodic.forget(Scope(scope))
        self.store.delete_space(name, {"by": caller, "turns": turns})
        return Deletion(user_id=scope, turns=turns, space=name)

    # -- access -----------------------------------------------------------------------

    def require(self, name: str, caller: str | None, needed: Access) -> None:
        """NotFound for an unknown space; AccessDenied when ``caller`` (an agent) lacks ``needed``."""
        if self.store.space(name) is None:
            raise NotFound(f"no space called {name!r}")
        if caller is None:
            return
        access = self.store.access(name, caller)
        if access is None or not access.allows(needed):
            held = "no access" if access is None else f"only {access.value} access"
            raise AccessDenied(f"agent {caller!r} has {held} to space {name!r}; {needed.value} is needed")

    def target(
        self,
        user_id: object,
        space: object,
        agent_id: object,
        needed: Access,
        session_id: object = None,
    ) -> Target:
        """The checked memory a call names with ``user_id`` or ``space`` (exactly one)."""
        agent = check_identifier(agent_id, "agent_id", required=False)
        session = check_identifier(session_id, "session_id", required=False)
        if space is None:
            if user_id is None:
                raise InvalidInput("user_id or space is required")
            return Target(Scope(check_user_id(user_id), agent, session), caller=agent)
        if user_id is not None:
            raise InvalidInput("name either user_id or space, not both")
        name = str(check_identifier(space, "space"))
        self.require(name, agent, needed)
        # In a space the agent is who calls: it writes as itself, and reads (or forgets) everyone's memories.
        writer = agent if needed is Access.WRITE else None
        return Target(Scope(space_scope(name), writer, session), space=name, caller=agent)

    def grant(self, name: str, agent_id: str, access: Access, by: str | None) -> Grant:
        """Give ``agent_id`` its access to a space (``by`` needs admin)."""
        self.require(name, by, Access.ADMIN)
        grant = Grant(space=name, agent_id=agent_id, access=access, granted_at=datetime.now(UTC))
        self.store.set_grant(grant)
        return grant

    def revoke(self, name: str, agent_id: str, by: str | None) -> bool:
        """Take ``agent_id``'s access away (``by`` needs admin); whether it had any."""
        self.require(name, by, Access.ADMIN)
        return self.store.remove_grant(name, agent_id)

    # -- sharing ----------------------------------------------------------------------

    def share(self, ids: Sequence[str], source: Target, to: Target) -> list[Turn]:
        """Copy turns from ``source`` into the space ``to``, each linked to where it came from; the copies."""
        found = self.store.get_by_ids(list(ids), source.user_id)
        missing = [turn_id for turn_id in ids if turn_id not in found]
        if missing:
            raise NotFound(f"no memory with id {missing[0]!r} in {_whose(source)}")
        now = datetime.now(UTC)
        copies: list[Turn] = []
        links: list[Share] = []
        for turn_id in dict.fromkeys(ids):
            original = found[turn_id]
            # The same memory shared to the same space again is the same copy: sharing is idempotent.
            copy_id = "share-" + hashlib.sha256(f"{turn_id}\0{to.user_id}".encode()).hexdigest()[:32]
            copies.append(replace(original, id=copy_id, user_id=to.user_id, agent_id=to.caller or original.agent_id))
            links.append(
                Share(
                    turn_id=copy_id,
                    scope=to.user_id,
                    source_id=turn_id,
                    source_scope=source.user_id,
                    shared_by=to.caller,
                    shared_at=now,
                )
            )
        # Links first: a link whose copy was never written is never read.
        self.store.add_shares(links)
        stored, _ = self.episodic.store_turns(copies, {}, "is a copy already shared with other content")
        return stored

    # -- provenance and trust ---------------------------------------------------------

    def provenance(self, hits: Sequence[Hit], owners: Sequence[str]) -> list[Hit]:
        """``hits`` (of the memories ``owners``) with the space each comes from and the agent that wrote it."""
        sources = {hit.id: hit.source_turn_ids[0] for hit in hits if hit.turn is None and hit.source_turn_ids}
        found = self.turns(sources.values(), owners)
        marked: list[Hit] = []
        for hit in hits:
            turn = hit.turn if hit.turn is not None else found.get(sources.get(hit.id, ""))
            if turn is None:  # a derived item whose turn went meanwhile: its memory is the first one's
                marked.append(replace(hit, space=space_of(owners[0])))
            else:
                marked.append(replace(hit, space=space_of(turn.user_id), written_by=turn.agent_id))
        return marked

    def cells_for(self, cells: Sequence[Cell], scope_id: str, reader: str | None) -> list[Cell]:
        """``cells`` as ``reader`` sees them: supersession weighed by its trust in each writer (``trusted_current``)."""
        trust = self.trust_of(reader)
        if not trust:
            return list(cells)
        return trusted_current(cells, self._writers(cells, scope_id), trust)

    def facts_for(self, scope_id: str, reader: str | None) -> dict[str, tuple[Cell, Cell]]:
        """Each fact of a memory by id, with the one ``reader`` takes as current in its chain; {} without trust set."""
        trust = self.trust_of(reader)
        if not trust:
            return {}
        cells = self.store.cells(scope_id, include_superseded=True, limit=10_000)
        chosen = chosen_of(cells, self._writers(cells, scope_id), trust)
        return {cell.id: (cell, chosen[cell.id]) for cell in cells}

    def turns(self, turn_ids: Iterable[str], owners: Sequence[str]) -> dict[str, Turn]:
        """The turns of ``owners``' memories with these ids: whose memory each is, and who wrote it."""
        wanted = list(dict.fromkeys(turn_ids))
        found: dict[str, Turn] = {}
        for owner in owners if wanted else ():
            found.update(self.store.get_by_ids(wanted, owner))
        return found

    def _writers(self, cells: Sequence[Cell], scope_id: str) -> dict[str, str | None]:
        sources = self.turns((cell.source_turn_id for cell in cells), [scope_id])
        return {turn_id: turn.agent_id for turn_id, turn in sources.items()}

    def trust_of(self, agent_id: str | None) -> dict[str, float]:
        """How much ``agent_id`` trusts each agent it set a weight for (everyone else: 1)."""
        return {} if agent_id is None else self.store.trust_of(agent_id)


def _whose(target: Target) -> str:
    return f"space {target.space!r}" if target.space is not None else f"user {target.user_id!r}"


def chosen_of(cells: Sequence[Cell], writers: Mapping[str, str | None], trust: Mapping[str, float]) -> dict[str, Cell]:
    """For each cell id, the fact a reader with ``trust`` weights takes as current in its chain.

    Of a chain of facts that superseded one another, that is the most trusted writer's, the
    newest among equals: a newer fact by a less trusted agent does not replace an older one
    by a more trusted agent for this reader.
    """
    by_id = {cell.id: cell for cell in cells}
    chains: dict[str, list[Cell]] = {}
    for cell in cells:
        seen: set[str] = set()
        top = cell
        while top.superseded_by is not None and top.superseded_by in by_id and top.id not in seen:
            seen.add(top.id)
            top = by_id[top.superseded_by]
        chains.setdefault(top.id, []).append(cell)

    def weight(cell: Cell) -> float:
        writer = writers.get(cell.source_turn_id)
        return 1.0 if writer is None else trust.get(writer, 1.0)

    chosen: dict[str, Cell] = {}
    for chain in chains.values():
        best = max(chain, key=lambda cell: (weight(cell), cell.valid_from, cell.id))
        chosen.update((cell.id, best) for cell in chain)
    return chosen


def trusted_current(cells: Sequence[Cell], writers: Mapping[str, str | None], trust: Mapping[str, float]) -> list[Cell]:
    """``cells`` (current and superseded) as a reader with ``trust`` weights sees them, newest first.

    Each chain's current fact is ``chosen_of``'s; nothing is deleted, the others stay in the
    chain as superseded, by the reader's current one.
    """
    chosen = chosen_of(cells, writers, trust)
    seen: list[Cell] = []
    for cell in cells:
        best = chosen[cell.id]
        if best is cell:
            seen.append(replace(cell, valid_to=None, superseded_by=None))
        else:
            seen.append(replace(cell, superseded_by=cell.superseded_by or best.id))
    seen.sort(key=lambda cell: (cell.valid_from, cell.id), reverse=True)
    return seen
