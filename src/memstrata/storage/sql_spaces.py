"""Spaces, grants, trust and share links: the statements both stores run alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from memstrata.errors import IdConflict, NotFound
from memstrata.models import Access, Grant, Share, Space
from memstrata.storage.dialect import C, Runner, record_event

_SPACE_COLUMNS = "name, description, created_at"
_GRANT_COLUMNS = "space, agent_id, access, granted_at"
_SHARE_COLUMNS = "turn_id, scope, source_id, source_scope, shared_by, shared_at"


class SpaceStatements(Runner[C]):
    """The ``SpaceStore`` and ``ProvenanceStore`` methods."""

    # -- spaces -----------------------------------------------------------------------

    def create_space(self, space: Space) -> None:
        """Store a new space; IdConflict when the name is taken (nothing changes)."""
        statement = self.dialect.sql(
            f"INSERT INTO spaces ({_SPACE_COLUMNS}) VALUES (%s, %s, %s) ON CONFLICT (name) DO NOTHING"
        )
        parameters = (space.name, space.description, self.dialect.time(space.created_at))

        def work(connection: C) -> None:
            if connection.execute(statement, parameters).rowcount != 1:
                raise IdConflict(
                    f"a space called {space.name!r} exists already (or is being deleted: delete_space finishes that)"
                )
            record_event(connection, self.dialect, "space_created", None, {"space": space.name})

        self._write(work)

    def spaces(self, prefix: str = "") -> list[Space]:
        """Spaces whose name starts with ``prefix``, in code point order."""
        statement = self.dialect.sql(
            f"SELECT {_SPACE_COLUMNS} FROM spaces WHERE substr(name, 1, %s) = %s AND deleting_since IS NULL"
            f" ORDER BY name{self.dialect.code_point}"
        )
        rows = self._read(lambda connection: connection.execute(statement, (len(prefix), prefix)).fetchall())
        return [self._space(row) for row in rows]

    def space(self, name: str) -> Space | None:
        """The space called ``name``, if any."""
        statement = self.dialect.sql(f"SELECT {_SPACE_COLUMNS} FROM spaces WHERE name = %s AND deleting_since IS NULL")
        row = self._read(lambda connection: connection.execute(statement, (name,)).fetchone())
        return None if row is None else self._space(row)

    def begin_space_deletion(self, name: str, when: datetime) -> bool:
        """Mark a space as being deleted (it is then gone for every call); False if there is no such record."""
        statement = self.dialect.sql("UPDATE spaces SET deleting_since = COALESCE(deleting_since, %s) WHERE name = %s")
        return bool(
            self._write(lambda connection: connection.execute(statement, (self.dialect.time(when), name)).rowcount)
        )

    def delete_space(self, name: str, detail: Mapping[str, object]) -> bool:
        """Remove a space's record and grants, audited with ``detail``; False if it was absent."""
        dialect = self.dialect

        def work(connection: C) -> bool:
            connection.execute(dialect.sql("DELETE FROM space_grants WHERE space = %s"), (name,))
            gone = connection.execute(dialect.sql("DELETE FROM spaces WHERE name = %s"), (name,)).rowcount
            if gone:
                record_event(connection, dialect, "space_deleted", None, {"space": name, **detail})
            return bool(gone)

        return bool(self._write(work))

    # -- grants -----------------------------------------------------------------------

    def set_grant(self, grant: Grant) -> None:
        """Give an agent its access (replacing what it had); NotFound when the space is gone."""
        dialect = self.dialect
        exists = dialect.sql("SELECT 1 FROM spaces WHERE name = %s AND deleting_since IS NULL")
        upsert = dialect.sql(
            f"INSERT INTO space_grants ({_GRANT_COLUMNS}) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (space, agent_id) DO UPDATE SET access = excluded.access, granted_at = excluded.granted_at"
        )

        def work(connection: C) -> None:
            # Checked in the writing transaction: a grant never outlives its space.
            if connection.execute(exists, (grant.space,)).fetchone() is None:
                raise NotFound(f"no space called {grant.space!r}")
            connection.execute(
                upsert, (grant.space, grant.agent_id, grant.access.value, dialect.time(grant.granted_at))
            )
            record_event(
                connection,
                dialect,
                "access_granted",
                None,
                {"space": grant.space, "agent_id": grant.agent_id, "access": grant.access.value},
            )

        self._write(work)

    def remove_grant(self, space: str, agent_id: str) -> bool:
        """Take an agent's access to a space away; False if it had none."""
        dialect = self.dialect
        statement = dialect.sql("DELETE FROM space_grants WHERE space = %s AND agent_id = %s")

        def work(connection: C) -> bool:
            gone = connection.execute(statement, (space, agent_id)).rowcount
            if gone:
                record_event(connection, dialect, "access_revoked", None, {"space": space, "agent_id": agent_id})
            return bool(gone)

        return bool(self._write(work))

    def grants(self, space: str) -> list[Grant]:
        """Who may use a space, by agent id."""
        return self._grants("space = %s", space, f"agent_id{self.dialect.code_point}")

    def grants_of(self, agent_id: str) -> list[Grant]:
        """Every space ``agent_id`` may use, by space name."""
        return self._grants("agent_id = %s", agent_id, f"space{self.dialect.code_point}")

    def access(self, space: str, agent_id: str) -> Access | None:
        """What ``agent_id`` may do in ``space`` (None: nothing)."""
        statement = self.dialect.sql("SELECT access FROM space_grants WHERE space = %s AND agent_id = %s")
        row = self._read(lambda connection: connection.execute(statement, (space, agent_id)).fetchone())
        return None if row is None else Access(str(row[0]))

    # -- trust and provenance ---------------------------------------------------------

    def set_trust(self, agent_id: str, of_agent: str, weight: float) -> None:
        """How much ``of_agent``'s memories count when ``agent_id`` reads them; 1 (the default) is stored as none."""
        dialect = self.dialect

        def work(connection: C) -> None:
            connection.execute(
                dialect.sql("DELETE FROM agent_trust WHERE agent_id = %s AND of_agent = %s"), (agent_id, of_agent)
            )
            if weight != 1.0:
                connection.execute(
                    dialect.sql("INSERT INTO agent_trust (agent_id, of_agent, weight) VALUES (%s, %s, %s)"),
                    (agent_id, of_agent, weight),
                )

        self._write(work)

    def trust_of(self, agent_id: str) -> dict[str, float]:
        """The weights ``agent_id`` set for other agents (those not named count 1)."""
        statement = self.dialect.sql("SELECT of_agent, weight FROM agent_trust WHERE agent_id = %s")
        rows = self._read(lambda connection: connection.execute(statement, (agent_id,)).fetchall())
        return {str(row[0]): float(row[1]) for row in rows}

    def add_shares(self, shares: Sequence[Share]) -> None:
        """Record the links of shared copies (before the copies: a link without its copy is never read)."""
        dialect = self.dialect
        statement = dialect.sql(
            f"INSERT INTO shares ({_SHARE_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (turn_id) DO NOTHING"
        )
        rows = [
            (s.turn_id, s.scope, s.source_id, s.source_scope, s.shared_by, dialect.time(s.shared_at)) for s in shares
        ]
        if rows:
            self._write(lambda connection: self._execute_many(connection, statement, rows))

    def shares(self, turn_ids: Sequence[str]) -> dict[str, Share]:
        """The links of those of ``turn_ids`` that are shared copies."""
        found: dict[str, Share] = {}
        for batch in self.dialect.batches(list(dict.fromkeys(turn_ids))):
            condition, parameters = self.dialect.members("turn_id", batch, "text")
            statement = self.dialect.sql(f"SELECT {_SHARE_COLUMNS} FROM shares WHERE {condition}")
            for row in self._rows(statement, parameters):
                found[str(row[0])] = Share(
                    turn_id=str(row[0]),
                    scope=str(row[1]),
                    source_id=str(row[2]),
                    source_scope=str(row[3]),
                    shared_by=None if row[4] is None else str(row[4]),
                    shared_at=self.dialect.read_time(row[5]),
                )
        return found

    # -- rows -------------------------------------------------------------------------

    def _rows(self, statement: str, parameters: Sequence[Any]) -> list[Any]:
        return self._read(lambda connection: connection.execute(statement, parameters).fetchall())

    def _space(self, row: Sequence[Any]) -> Space:
        return Space(
            name=str(row[0]),
            description=None if row[1] is None else str(row[1]),
            created_at=self.dialect.read_time(row[2]),
        )

    def _grants(self, condition: str, value: str, order: str) -> list[Grant]:
        statement = self.dialect.sql(f"SELECT {_GRANT_COLUMNS} FROM space_grants WHERE {condition} ORDER BY {order}")
        rows = self._read(lambda connection: connection.execute(statement, (value,)).fetchall())
        return [
            Grant(
                space=str(r[0]), agent_id=str(r[1]), access=Access(str(r[2])), granted_at=self.dialect.read_time(r[3])
            )
            for r in rows
        ]
