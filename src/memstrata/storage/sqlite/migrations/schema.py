"""SQLite's steps 1 to 3: turns, vectors, events, the memory hierarchy and API keys. Never edit a released one."""

from __future__ import annotations

from memstrata.storage.migrating import Migration

# AUTOINCREMENT: seqs and vector ids are never reused after a delete, so an index that
# catches up by "ids above the last one seen" can neither miss a row nor mislabel one.
SCHEMA: tuple[Migration, ...] = (
    Migration(
        version=1,
        name="turns, full-text index, vectors, events",
        sql="""
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
        version=2,
        name="memory hierarchy: working set, job queue, segments, cells, scenes, profile, patterns, entities",
        sql="""
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
        version=3,
        name="api keys of the REST server",
        sql="""
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
)
