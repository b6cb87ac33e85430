"""Numbered schema migrations; each runs in one transaction with its record. Never edit a released one."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from memstrata.errors import StorageError
from memstrata.storage import migrating
from memstrata.storage.migrating import Migration

# AUTOINCREMENT: seqs and vector ids are never reused after a delete, so an index that
# catches up by "ids above the last one seen" can neither miss a row nor mislabel one.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "turns, full-text index, vectors, events",
        """
        CREATE TABLE turns (
            seq         INTEGER PRIMARY KEY AUTOINCREMENT,
            id          TEXT NOT NULL UNIQUE,
            user_id     TEXT NOT NULL,
            agent_id    TEXT,
            session_id  TEXT,
            role        TEXT NOT NULL,
            name        TEXT,
            content     TEXT NOT NULL,
            created_at  TEXT NOT NULL,
            metadata    TEXT NOT NULL DEFAULT '{}',
            importance  REAL
        );
        CREATE INDEX turns_by_user_time ON turns (user_id, created_at, seq);
        CREATE INDEX turns_by_session ON turns (user_id, session_id, created_at, seq);

        CREATE VIRTUAL TABLE turns_fts USING fts5 (
            content, name, content='turns', content_rowid='seq',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER turns_fts_insert AFTER INSERT ON turns BEGIN
            INSERT INTO turns_fts (rowid, content, name) VALUES (new.seq, new.content, new.name);
        END;
        CREATE TRIGGER turns_fts_delete AFTER DELETE ON turns BEGIN
            INSERT INTO turns_fts (turns_fts, rowid, content, name) VALUES ('delete', old.seq, old.content, old.name);
        END;
        CREATE TRIGGER turns_fts_update AFTER UPDATE OF content, name ON turns BEGIN
            INSERT INTO turns_fts (turns_fts, rowid, content, name) VALUES ('delete', old.seq, old.content, old.name);
            INSERT INTO turns_fts (rowid, content, name) VALUES (new.seq, new.content, new.name);
        END;

        CREATE TABLE turn_vectors (
            id          INTEGER PRIMARY KEY AUTOINCREMENT,
            turn_seq    INTEGER NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            model_id    TEXT NOT NULL,
            user_id     TEXT NOT NULL,
            dimension   INTEGER NOT NULL,
            vector      BLOB NOT NULL,
            UNIQUE (model_id, turn_seq)
        );
        CREATE INDEX turn_vectors_by_user ON turn_vectors (model_id, user_id, id);
        CREATE INDEX turn_vectors_by_turn ON turn_vectors (turn_seq);

        CREATE TABLE events (
            id          INTEGER PRIMARY KEY,
            at          TEXT NOT NULL,
            kind        TEXT NOT NULL,
            user_id     TEXT,
            detail      TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX events_by_user ON events (user_id, id);
        """,
    ),
    Migration(
        2,
        "memory hierarchy: working set, job queue, segments, cells, scenes, profile, patterns, entities",
        """
        CREATE TABLE turn_scores (
            turn_seq   INTEGER PRIMARY KEY REFERENCES turns (seq) ON DELETE CASCADE,
            importance REAL NOT NULL
        );

        CREATE TABLE working_items (
            turn_seq    INTEGER PRIMARY KEY REFERENCES turns (seq) ON DELETE CASCADE,
            user_id     TEXT NOT NULL,
            session_key TEXT NOT NULL,
            exchange    INTEGER NOT NULL
        );
        CREATE INDEX working_by_session ON working_items (user_id, session_key, exchange);

        CREATE TABLE jobs (
            id          INTEGER PRIMARY KEY AUTOINCREMENT,
            kind        TEXT NOT NULL,
            user_id     TEXT NOT NULL,
            payload     TEXT NOT NULL DEFAULT '{}',
            state       TEXT NOT NULL DEFAULT 'pending',
            attempts    INTEGER NOT NULL DEFAULT 0,
            lease_until TEXT,
            created_at  TEXT NOT NULL,
            finished_at TEXT,
            error       TEXT
        );
        CREATE INDEX jobs_by_state ON jobs (state, id);

        CREATE TABLE segments (
            id            TEXT PRIMARY KEY,
            user_id       TEXT NOT NULL,
            session_id    TEXT,
            summary       TEXT NOT NULL,
            keywords      TEXT NOT NULL DEFAULT '[]',
            visits        INTEGER NOT NULL DEFAULT 0,
            turn_count    INTEGER NOT NULL DEFAULT 0,
            heat          REAL NOT NULL DEFAULT 0,
            state         TEXT NOT NULL DEFAULT 'active',
            promoted_at   TEXT,
            created_at    TEXT NOT NULL,
            last_activity TEXT NOT NULL,
            centroid      BLOB
        );
        CREATE INDEX segments_by_user ON segments (user_id, state);
        CREATE TABLE segment_turns (
            segment_id TEXT NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
            turn_seq   INTEGER NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            PRIMARY KEY (segment_id, turn_seq)
        );
        CREATE INDEX segment_turns_by_turn ON segment_turns (turn_seq);

        CREATE TABLE scenes (
            id         TEXT PRIMARY KEY,
            user_id    TEXT NOT NULL,
            title      TEXT NOT NULL,
            summary    TEXT NOT NULL,
            segment_id TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX scenes_by_user ON scenes (user_id);

        CREATE TABLE cells (
            id              TEXT PRIMARY KEY,
            user_id         TEXT NOT NULL,
            kind            TEXT NOT NULL,
            subject         TEXT NOT NULL,
            attribute       TEXT NOT NULL,
            value           TEXT NOT NULL,
            content         TEXT NOT NULL,
            salience        REAL NOT NULL,
            single_valued   INTEGER NOT NULL,
            scene_id        TEXT REFERENCES scenes (id) ON DELETE SET NULL,
            source_turn_seq INTEGER NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            valid_from      TEXT NOT NULL,
            valid_to        TEXT,
            superseded_by   TEXT,
            created_at      TEXT NOT NULL
        );
        CREATE INDEX cells_by_attribute ON cells (user_id, subject, attribute, valid_to);
        CREATE INDEX cells_by_turn ON cells (source_turn_seq);

        CREATE TABLE profile (
            user_id         TEXT NOT NULL,
            key             TEXT NOT NULL,
            value           TEXT NOT NULL,
            source_turn_seq INTEGER REFERENCES turns (seq) ON DELETE CASCADE,
            updated_at      TEXT NOT NULL,
            PRIMARY KEY (user_id, key)
        );

        CREATE TABLE patterns (
            user_id     TEXT NOT NULL,
            key         TEXT NOT NULL,
            description TEXT NOT NULL,
            count       INTEGER NOT NULL,
            first_seen  TEXT NOT NULL,
            last_seen   TEXT NOT NULL,
            evidence    TEXT NOT NULL,
            PRIMARY KEY (user_id, key)
        );

        CREATE TABLE entities (
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id    TEXT NOT NULL,
            name       TEXT NOT NULL,
            kind       TEXT NOT NULL,
            mentions   INTEGER NOT NULL DEFAULT 0,
            first_seen TEXT NOT NULL,
            last_seen  TEXT NOT NULL,
            UNIQUE (user_id, name)
        );
        CREATE TABLE entity_mentions (
            entity_id INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
            turn_seq  INTEGER NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            PRIMARY KEY (entity_id, turn_seq)
        );
        CREATE INDEX entity_mentions_by_turn ON entity_mentions (turn_seq);
        CREATE TABLE entity_edges (
            user_id   TEXT NOT NULL,
            source    INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
            target    INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
            weight    INTEGER NOT NULL DEFAULT 0,
            last_seen TEXT NOT NULL,
            PRIMARY KEY (source, target)
        );
        CREATE INDEX entity_edges_by_user ON entity_edges (user_id);

        CREATE TABLE consolidations (
            id                   TEXT PRIMARY KEY,
            user_id              TEXT NOT NULL,
            summary              TEXT NOT NULL,
            compression_ratio    REAL NOT NULL,
            entity_preservation  REAL NOT NULL,
            tes                  REAL NOT NULL,
            created_at           TEXT NOT NULL
        );
        CREATE TABLE consolidation_turns (
            consolidation_id TEXT NOT NULL REFERENCES consolidations (id) ON DELETE CASCADE,
            turn_seq         INTEGER NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            PRIMARY KEY (consolidation_id, turn_seq)
        );
        CREATE INDEX consolidation_turns_by_turn ON consolidation_turns (turn_seq);

        CREATE TABLE derived (
            seq        INTEGER PRIMARY KEY AUTOINCREMENT,
            id         TEXT NOT NULL UNIQUE,
            user_id    TEXT NOT NULL,
            tier       TEXT NOT NULL,
            content    TEXT NOT NULL,
            is_current INTEGER NOT NULL DEFAULT 1,
            created_at TEXT NOT NULL
        );
        CREATE INDEX derived_by_user ON derived (user_id, tier);
        CREATE TABLE derived_sources (
            derived_seq INTEGER NOT NULL REFERENCES derived (seq) ON DELETE CASCADE,
            turn_seq    INTEGER NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            PRIMARY KEY (derived_seq, turn_seq)
        );
        CREATE INDEX derived_sources_by_turn ON derived_sources (turn_seq);
        CREATE VIRTUAL TABLE derived_fts USING fts5 (
            content, content='derived', content_rowid='seq',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER derived_fts_insert AFTER INSERT ON derived BEGIN
            INSERT INTO derived_fts (rowid, content) VALUES (new.seq, new.content);
        END;
        CREATE TRIGGER derived_fts_delete AFTER DELETE ON derived BEGIN
            INSERT INTO derived_fts (derived_fts, rowid, content) VALUES ('delete', old.seq, old.content);
        END;
        CREATE TRIGGER derived_fts_update AFTER UPDATE OF content ON derived BEGIN
            INSERT INTO derived_fts (derived_fts, rowid, content) VALUES ('delete', old.seq, old.content);
            INSERT INTO derived_fts (rowid, content) VALUES (new.seq, new.content);
        END;
        """,
    ),
    Migration(
        3,
        "api keys of the REST server",
        """
        CREATE TABLE api_keys (
            id          TEXT PRIMARY KEY,
            tenant      TEXT NOT NULL,
            name        TEXT NOT NULL,
            secret_hash TEXT NOT NULL UNIQUE,
            created_at  TEXT NOT NULL,
            revoked_at  TEXT
        );
        CREATE INDEX api_keys_by_tenant ON api_keys (tenant, created_at);
        """,
    ),
    Migration(
        4,
        "full-text index with each turn's neighbours",
        # Each turn is also indexed with the two turns before and after it in its session
        # (columns ``near``: ±1 and ``far``: ±2, weighted low): an answer is then found by the
        # words of the question before it. The index keeps its own copy of the text,
        # maintained by triggers in the writing transaction, and stays rebuildable from
        # ``turns`` (the view ``turn_index_text``).
        """
        DROP TRIGGER turns_fts_insert;
        DROP TRIGGER turns_fts_delete;
        DROP TRIGGER turns_fts_update;
        DROP TABLE turns_fts;
        CREATE INDEX turns_by_session_seq ON turns (user_id, session_id, seq);
        CREATE VIEW turn_neighbours AS
            SELECT t.seq AS seq,
                (SELECT p.seq FROM turns p WHERE p.user_id = t.user_id AND p.session_id IS t.session_id
                    AND p.seq < t.seq ORDER BY p.seq DESC LIMIT 1) AS before1,
                (SELECT p.seq FROM turns p WHERE p.user_id = t.user_id AND p.session_id IS t.session_id
                    AND p.seq < t.seq ORDER BY p.seq DESC LIMIT 1 OFFSET 1) AS before2,
                (SELECT n.seq FROM turns n WHERE n.user_id = t.user_id AND n.session_id IS t.session_id
                    AND n.seq > t.seq ORDER BY n.seq LIMIT 1) AS after1,
                (SELECT n.seq FROM turns n WHERE n.user_id = t.user_id AND n.session_id IS t.session_id
                    AND n.seq > t.seq ORDER BY n.seq LIMIT 1 OFFSET 1) AS after2
            FROM turns t;
        CREATE VIEW turn_index_text AS
            SELECT b.seq AS seq, t.content AS content, t.name AS name,
                COALESCE((SELECT content FROM turns WHERE seq = b.before1), '') || ' '
                || COALESCE((SELECT content FROM turns WHERE seq = b.after1), '') AS near,
                COALESCE((SELECT content FROM turns WHERE seq = b.before2), '') || ' '
                || COALESCE((SELECT content FROM turns WHERE seq = b.after2), '') AS far
            FROM turn_neighbours b JOIN turns t ON t.seq = b.seq;
        CREATE VIRTUAL TABLE turns_fts USING fts5 (
            content, name, near, far, tokenize='porter unicode61 remove_diacritics 2'
        );
        INSERT INTO turns_fts (rowid, content, name, near, far)
            SELECT seq, content, name, near, far FROM turn_index_text;
        CREATE TABLE turns_fts_dirty (seq INTEGER PRIMARY KEY);
        CREATE TRIGGER turns_fts_insert AFTER INSERT ON turns BEGIN
            INSERT OR IGNORE INTO turns_fts_dirty (seq)
                SELECT new.seq UNION SELECT before1 FROM turn_neighbours WHERE seq = new.seq AND before1 IS NOT NULL
                UNION SELECT before2 FROM turn_neighbours WHERE seq = new.seq AND before2 IS NOT NULL
                UNION SELECT after1 FROM turn_neighbours WHERE seq = new.seq AND after1 IS NOT NULL
                UNION SELECT after2 FROM turn_neighbours WHERE seq = new.seq AND after2 IS NOT NULL;
            DELETE FROM turns_fts WHERE rowid IN (SELECT seq FROM turns_fts_dirty);
            INSERT INTO turns_fts (rowid, content, name, near, far)
                SELECT seq, content, name, near, far FROM turn_index_text
                WHERE seq IN (SELECT seq FROM turns_fts_dirty);
            DELETE FROM turns_fts_dirty;
        END;
        CREATE TRIGGER turns_fts_delete AFTER DELETE ON turns BEGIN
            DELETE FROM turns_fts WHERE rowid = old.seq;
            INSERT OR IGNORE INTO turns_fts_dirty (seq)
                SELECT seq FROM (SELECT seq FROM turns WHERE user_id = old.user_id AND session_id IS old.session_id
                    AND seq < old.seq ORDER BY seq DESC LIMIT 2)
                UNION SELECT seq FROM (SELECT seq FROM turns WHERE user_id = old.user_id
                    AND session_id IS old.session_id AND seq > old.seq ORDER BY seq LIMIT 2);
            DELETE FROM turns_fts WHERE rowid IN (SELECT seq FROM turns_fts_dirty);
            INSERT INTO turns_fts (rowid, content, name, near, far)
                SELECT seq, content, name, near, far FROM turn_index_text
                WHERE seq IN (SELECT seq FROM turns_fts_dirty);
            DELETE FROM turns_fts_dirty;
        END;
        CREATE TRIGGER turns_fts_update AFTER UPDATE OF content, name ON turns BEGIN
            INSERT OR IGNORE INTO turns_fts_dirty (seq)
                SELECT new.seq UNION SELECT before1 FROM turn_neighbours WHERE seq = new.seq AND before1 IS NOT NULL
                UNION SELECT before2 FROM turn_neighbours WHERE seq = new.seq AND before2 IS NOT NULL
                UNION SELECT after1 FROM turn_neighbours WHERE seq = new.seq AND after1 IS NOT NULL
                UNION SELECT after2 FROM turn_neighbours WHERE seq = new.seq AND after2 IS NOT NULL;
            DELETE FROM turns_fts WHERE rowid IN (SELECT seq FROM turns_fts_dirty);
            INSERT INTO turns_fts (rowid, content, name, near, far)
                SELECT seq, content, name, near, far FROM turn_index_text
                WHERE seq IN (SELECT seq FROM turns_fts_dirty);
            DELETE FROM turns_fts_dirty;
        END;
        """,
    ),
    # The dense retriever reads a query without the names of the user's speakers (tool turns'
    # names are function names, not people); they are found by seeking through this index,
    # one seek per distinct name, not by a scan.
    Migration(
        5,
        "index of each user's speaker names",
        """
        CREATE INDEX turns_by_speaker ON turns (user_id, name) WHERE name IS NOT NULL AND role <> 'tool';
        """,
    ),
    # A pattern counts each turn once: a tier job retried after a failure part-way observes
    # its turns again, and a deleted turn takes its occurrence (and its evidence) along.
    # Patterns counted before this step have no rows here and keep their counts.
    Migration(
        6,
        "pattern occurrences, one per turn; sleep marks",
        """
        CREATE TABLE pattern_observations (
            user_id   TEXT NOT NULL,
            key       TEXT NOT NULL,
            turn_seq  INTEGER NOT NULL,
            seen_at   TEXT NOT NULL,
            evidence  TEXT NOT NULL,
            PRIMARY KEY (user_id, key, turn_seq)
        );
        CREATE INDEX pattern_observations_by_turn ON pattern_observations (turn_seq);
        -- The newest turn each user's last sleep looked at: only turns after it make the next one due.
        CREATE TABLE sleep_marks (
            user_id       TEXT PRIMARY KEY,
            through_seq   INTEGER NOT NULL
        );
        """,
    ),
    # A flush of one user's work claims that user's jobs first; without this index the claim and
    # the count of what is left walked every open job of every user. A finished job is deleted
    # from now on (before, one row per write stayed forever); the ones finished before go here.
    Migration(
        7,
        "open jobs by user; finished jobs deleted",
        """
        DELETE FROM jobs WHERE state = 'done';
        CREATE INDEX jobs_open_by_user ON jobs (user_id, id) WHERE state IN ('pending', 'running');
        """,
    ),
    # A visit job marks itself counted in the transaction that adds its visits, so a retry
    # (after a crash between the two) does not count them again.
    Migration(
        8,
        "visit jobs counted once",
        """
        ALTER TABLE jobs ADD COLUMN counted INTEGER NOT NULL DEFAULT 0;
        """,
    ),
    # The audit log holds ids and counts, never content: a fact's subject and attribute
    # ("pet:dog:max") are what the user said, and stayed after the user was forgotten.
    Migration(
        9,
        "supersession events keep ids only",
        """
        UPDATE events SET detail = json_remove(detail, '$.subject', '$.attribute') WHERE kind = 'supersession';
        """,
    ),
    # Deleting a fact's turn hands the value it replaced its place: found by its successor.
    Migration(
        10,
        "cells by successor",
        """
        CREATE INDEX IF NOT EXISTS cells_by_successor ON cells (superseded_by) WHERE superseded_by IS NOT NULL;
        """,
    ),
    # Retention used to delete archived segments promoted to scenes: the scene, which quotes the
    # segment's turns, lost the link that deleting those turns finds it by. Such scenes go.
    Migration(
        11,
        "scenes without their segment",
        """
        DELETE FROM scenes WHERE segment_id IS NOT NULL AND segment_id NOT IN (SELECT id FROM segments);
        """,
    ),
    # A fact said again ("I live in Porto", twice) is stored once, from the turn that said it
    # first; deleting that turn deleted the fact although a kept turn still said it. The turns
    # that restate a current fact are noted here, with the sentence each said it in: when the
    # fact's own turn is deleted, the earliest of them becomes its source.
    Migration(
        12,
        "turns that restate a fact",
        """
        CREATE TABLE IF NOT EXISTS cell_restatements (
            cell_id  TEXT NOT NULL REFERENCES cells (id) ON DELETE CASCADE,
            turn_seq INTEGER NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            value    TEXT NOT NULL,
            content  TEXT NOT NULL,
            PRIMARY KEY (cell_id, turn_seq)
        );
        CREATE INDEX IF NOT EXISTS cell_restatements_by_turn ON cell_restatements (turn_seq);
        """,
    ),
    # A segment's direction is compared with new exchanges' vectors, which must come from the
    # same embedder: the model that made each direction is recorded beside it (NULL: before).
    Migration(
        13,
        "the model of each segment's direction",
        """
        ALTER TABLE segments ADD COLUMN centroid_model TEXT;
        """,
    ),
    # Each entity's name embedded once (per model), so a question asking for a kind of thing
    # ("What European countries …?") can find the entities that are of that kind ("Spain").
    Migration(
        14,
        "entity name vectors",
        """
        CREATE TABLE IF NOT EXISTS entity_vectors (
            entity_id INTEGER NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
            model_id  TEXT NOT NULL,
            vector    BLOB NOT NULL,
            PRIMARY KEY (entity_id, model_id)
        );
        """,
    ),
    # Each current fact embedded once (per model), so a question that shares no word with a
    # fact ("What should I cook for dinner?") still finds it by meaning ("allergy: peanuts").
    Migration(
        15,
        "fact vectors",
        """
        CREATE TABLE IF NOT EXISTS cell_vectors (
            cell_id  TEXT NOT NULL REFERENCES cells (id) ON DELETE CASCADE,
            model_id TEXT NOT NULL,
            vector   BLOB NOT NULL,
            PRIMARY KEY (cell_id, model_id)
        );
        """,
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version


def refuse_if_too_new(version: int, location: str) -> None:
    """Raise ``SchemaTooNew`` for a schema ``version`` past what this memstrata knows."""
    migrating.refuse_if_too_new(version, LATEST_VERSION, location, "memstrata")


def stored_version(connection: sqlite3.Connection) -> int:
    """The schema version a database holds (0: none yet), read without writing anything."""
    known = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'")
    if known.fetchone() is None:
        return 0
    return int(connection.execute(migrating.RECORDED_VERSION).fetchone()[0])


def migrate(connection: sqlite3.Connection, location: str) -> int:
    """Bring the schema to ``LATEST_VERSION``; refuse a database from a newer memstrata."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        current = int(connection.execute(migrating.RECORDED_VERSION).fetchone()[0])
        refuse_if_too_new(current, location)
        for migration in migrating.pending(MIGRATIONS, current):
            for statement in _statements(migration.sql):
                connection.execute(statement)
            connection.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, datetime.now(UTC).isoformat()),
            )
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    return LATEST_VERSION


def _statements(script: str) -> list[str]:
    """Split a script into statements, keeping trigger bodies whole."""
    statements: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                statements.append(current.strip())
            current = ""
    if current.strip():
        raise StorageError(f"incomplete SQL in a migration: {current.strip()[:80]}")
    return statements
