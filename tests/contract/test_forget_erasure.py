"""After forget and vacuum, nothing in the store names the forgotten user: the audit keeps a salted hash."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memstrata import Memory

#: A user id that is personal data by itself.
EMAIL = "ana.pereira@example.com"
OTHER = "bob"


def _fill(memory: Memory) -> None:
    """Every kind of row a user leaves: turns, facts, entities, segments, a summary, a share, a delete."""
    said = [
        "I live in Lisbon with Marta.",
        "Actually I moved to Porto last spring.",
        "The garden shed roof leaks near the window.",
        "The garden shed roof leaks again, repair attempt two failed.",
        "The garden shed roof leaks again, repair attempt three failed.",
    ]
    for text in said:
        memory.add(
            [{"role": "user", "content": text}, {"role": "assistant", "content": f"Noted: {text}"}],
            user_id=EMAIL,
            session_id="s1",
        )
        memory.add(f"{OTHER} says: {text}", user_id=OTHER, session_id="s1")
    memory.flush()
    memory.consolidate(user_id=EMAIL)
    turns = memory.history(user_id=EMAIL, limit=100)
    memory.delete(turns[-1].id, user_id=EMAIL)
    memory.create_space("team")
    memory.share([turns[0].id], user_id=EMAIL, to_space="team")
    memory.flush()
    assert memory.inspect(user_id=EMAIL).events, "the user left audit rows to erase"


def _postgres_rows_naming(url: str, text: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as connection:
        tables = [
            str(row[0])
            for row in connection.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
            )
        ]
        found = []
        for table in tables:
            statement = f'SELECT count(*) FROM "{table}" AS row WHERE row::text LIKE %s'
            row = connection.execute(statement, (f"%{text}%",)).fetchone()
            if row is not None and row[0]:
                found.append(table)
        return found


def test_forget_and_vacuum_leave_no_trace_of_the_user_id(open_memory: Callable[..., Memory], storage_url: str) -> None:
    memory = open_memory(working_capacity=2, consolidate_every=4)
    _fill(memory)
    assert _naming(storage_url), "the scan finds the id while the user is remembered"
    memory.forget(user_id=EMAIL)
    memory.vacuum()
    # A later request for the same id finds its audit through the salted hash: the forget itself.
    kinds = [event.kind for event in memory.inspect(user_id=EMAIL).events]
    assert kinds and kinds[0] == "forget" and "delete" in kinds
    assert not memory.inspect(user_id="someone-else").events
    assert memory.history(user_id=OTHER, limit=100), "the other user's memories stay"
    (copy,) = memory.history(space="team", limit=10)
    origin = memory.origin(copy.id, space="team")
    assert origin is not None and EMAIL not in origin.source_scope
    memory.close()
    assert _naming(storage_url) == []


def _naming(storage_url: str) -> list[str]:
    """The SQLite files whose bytes hold the id, or the PostgreSQL tables with a row whose text does."""
    if storage_url.startswith("sqlite:"):
        database = Path(storage_url.removeprefix("sqlite:///"))
        files = [path for path in database.parent.iterdir() if path.name.startswith(database.name)]
        return [path.name for path in files if EMAIL.encode() in path.read_bytes()]
    return _postgres_rows_naming(storage_url, EMAIL)


def test_a_user_forgotten_twice_finds_both_forgets(open_memory: Callable[..., Memory]) -> None:
    memory = open_memory()
    for _ in range(2):
        memory.add("I live in Lisbon.", user_id=EMAIL)
        memory.forget(user_id=EMAIL)
    events = memory.inspect(user_id=EMAIL).events
    assert [event.kind for event in events] == ["forget", "forget"]
