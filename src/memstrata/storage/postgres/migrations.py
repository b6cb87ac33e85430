"""Numbered schema migrations for PostgreSQL; each runs in one transaction with its record. Never edit a released one.

Every opener takes the same transaction-scoped advisory lock first, so several processes
opening one database at once apply each migration exactly once.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors

from memstrata.errors import StorageError
from memstrata.storage import migrating
from memstrata.storage.migrating import Migration

#: First key of every advisory lock memstrata takes ("mems" in ASCII), so they never clash with an application's.
LOCK_NAMESPACE = 0x6D656D73
MIGRATION_LOCK = 0
VECTOR_INDEX_LOCK = 1
USER_LOCK_NAMESPACE = LOCK_NAMESPACE + 1
#: Every ASCII punctuation mark, as a regular expression: read as a space before text is indexed.
_PUNCTUATION = r"[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]+"


# Identity columns come from sequences, which never hand out a value twice: an index that
# catches up by "ids above the last one seen" can neither miss a row nor mislabel one
# (writers of one user serialise on an advisory lock, so ids also grow in commit order).
# The text search configuration is English stemming without a stopword list, like the
# SQLite backend's porter tokenizer: a query made only of stopwords still finds something.
# ``near`` and ``far`` hold the text of the turn's neighbours in its session (see
# neighbours.py), like the SQLite index's columns of the same names: labels A (text),
# B (speaker), C (turns ±1 away), D (±2).
MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "turns, full-text search, vectors, events",
        """
        CREATE EXTENSION IF NOT EXISTS vector;

        CREATE TEXT SEARCH DICTIONARY memstrata_english_stem (TEMPLATE = snowball, LANGUAGE = english);
        CREATE TEXT SEARCH CONFIGURATION memstrata_english (COPY = english);
        ALTER TEXT SEARCH CONFIGURATION memstrata_english
            ALTER MAPPING REPLACE english_stem WITH memstrata_english_stem;

        CREATE TABLE turns (
            seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id          text NOT NULL UNIQUE,
            user_id     text NOT NULL,
            agent_id    text,
            session_id  text,
            role        text NOT NULL,
            name        text,
            content     text NOT NULL,
            created_at  timestamptz NOT NULL,
            metadata    jsonb NOT NULL DEFAULT '{}',
            importance  double precision,
            near        text NOT NULL DEFAULT '',
            far         text NOT NULL DEFAULT '',
            search      tsvector GENERATED ALWAYS AS (
                setweight(to_tsvector('memstrata_english', content), 'A')
                || setweight(to_tsvector('memstrata_english', coalesce(name, '')), 'B')
                || setweight(to_tsvector('memstrata_english', near), 'C')
                || setweight(to_tsvector('memstrata_english', far), 'D')
            ) STORED
        );
        CREATE INDEX turns_by_user_time ON turns (user_id, created_at, seq);
        CREATE INDEX turns_by_session ON turns (user_id, session_id, created_at, seq);
        CREATE INDEX turns_by_session_seq ON turns (user_id, (COALESCE(session_id, '')), seq);
        CREATE INDEX turns_search ON turns USING gin (search);

        CREATE TABLE turn_vectors (
            id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            turn_seq    bigint NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            model_id    text NOT NULL,
            user_id     text NOT NULL,
            dimension   integer NOT NULL,
            embedding   vector NOT NULL,
            UNIQUE (model_id, turn_seq)
        );
        CREATE INDEX turn_vectors_by_user ON turn_vectors (model_id, user_id, id);
        CREATE INDEX turn_vectors_by_turn ON turn_vectors (turn_seq);

        CREATE TABLE vector_indexes (
            model_id    text NOT NULL,
            dimension   integer NOT NULL,
            index_name  text NOT NULL UNIQUE,
            created_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (model_id, dimension)
        );

        CREATE TABLE events (
            id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            at          timestamptz NOT NULL,
            kind        text NOT NULL,
            user_id     text,
            detail      jsonb NOT NULL DEFAULT '{}'
        );
        CREATE INDEX events_by_user ON events (user_id, id);
        """,
    ),
    Migration(
        2,
        "memory hierarchy: working set, job queue, segments, cells, scenes, profile, patterns, entities",
        """
        CREATE TABLE turn_scores (
            turn_seq   bigint PRIMARY KEY REFERENCES turns (seq) ON DELETE CASCADE,
            importance double precision NOT NULL
        );

        CREATE TABLE working_items (
            turn_seq    bigint PRIMARY KEY REFERENCES turns (seq) ON DELETE CASCADE,
            user_id     text NOT NULL,
            session_key text NOT NULL,
            exchange    integer NOT NULL
        );
        CREATE INDEX working_by_session ON working_items (user_id, session_key, exchange);

        CREATE TABLE jobs (
            id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            kind        text NOT NULL,
            user_id     text NOT NULL,
            payload     jsonb NOT NULL DEFAULT '{}',
            state       text NOT NULL DEFAULT 'pending',
            attempts    integer NOT NULL DEFAULT 0,
            lease_until timestamptz,
            created_at  timestamptz NOT NULL,
            finished_at timestamptz,
            error       text
        );
        CREATE INDEX jobs_open ON jobs (id) WHERE state IN ('pending', 'running');
        CREATE INDEX jobs_by_user ON jobs (user_id) WHERE state IN ('pending', 'running');

        CREATE TABLE segments (
            id            text PRIMARY KEY,
            ordinal       bigint GENERATED ALWAYS AS IDENTITY,
            user_id       text NOT NULL,
            session_id    text,
            summary       text NOT NULL,
            keywords      jsonb NOT NULL DEFAULT '[]',
            visits        integer NOT NULL DEFAULT 0,
            turn_count    integer NOT NULL DEFAULT 0,
            heat          double precision NOT NULL DEFAULT 0,
            state         text NOT NULL DEFAULT 'active',
            promoted_at   timestamptz,
            created_at    timestamptz NOT NULL,
            last_activity timestamptz NOT NULL,
            centroid      bytea
        );
        CREATE INDEX segments_by_user ON segments (user_id, state);
        CREATE TABLE segment_turns (
            segment_id text NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
            turn_seq   bigint NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            PRIMARY KEY (segment_id, turn_seq)
        );
        CREATE INDEX segment_turns_by_turn ON segment_turns (turn_seq);

        CREATE TABLE scenes (
            id         text PRIMARY KEY,
            user_id    text NOT NULL,
            title      text NOT NULL,
            summary    text NOT NULL,
            segment_id text,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL
        );
        CREATE INDEX scenes_by_user ON scenes (user_id);

        CREATE TABLE cells (
            id              text PRIMARY KEY,
            ordinal         bigint GENERATED ALWAYS AS IDENTITY,
            user_id         text NOT NULL,
            kind            text NOT NULL,
            subject         text NOT NULL,
            attribute       text NOT NULL,
            value           text NOT NULL,
            content         text NOT NULL,
            salience        double precision NOT NULL,
            single_valued   boolean NOT NULL,
            scene_id        text REFERENCES scenes (id) ON DELETE SET NULL,
            source_turn_seq bigint NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            valid_from      timestamptz NOT NULL,
            valid_to        timestamptz,
            superseded_by   text,
            created_at      timestamptz NOT NULL
        );
        CREATE INDEX cells_by_attribute ON cells (user_id, subject, attribute, valid_to);
        CREATE INDEX cells_by_turn ON cells (source_turn_seq);
        CREATE INDEX cells_by_scene ON cells (scene_id);

        CREATE TABLE profile (
            user_id         text NOT NULL,
            key             text NOT NULL,
            value           text NOT NULL,
            source_turn_seq bigint REFERENCES turns (seq) ON DELETE CASCADE,
            updated_at      timestamptz NOT NULL,
            PRIMARY KEY (user_id, key)
        );
        CREATE INDEX profile_by_turn ON profile (source_turn_seq);

        CREATE TABLE patterns (
            user_id     text NOT NULL,
            key         text NOT NULL,
            description text NOT NULL,
            count       integer NOT NULL,
            first_seen  timestamptz NOT NULL,
            last_seen   timestamptz NOT NULL,
            evidence    text NOT NULL,
            PRIMARY KEY (user_id, key)
        );

        CREATE TABLE entities (
            id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            user_id    text NOT NULL,
            name       text NOT NULL,
            kind       text NOT NULL,
            mentions   integer NOT NULL DEFAULT 0,
            first_seen timestamptz NOT NULL,
            last_seen  timestamptz NOT NULL,
            UNIQUE (user_id, name)
        );
        CREATE TABLE entity_mentions (
            entity_id bigint NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
            turn_seq  bigint NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            PRIMARY KEY (entity_id, turn_seq)
        );
        CREATE INDEX entity_mentions_by_turn ON entity_mentions (turn_seq);
        CREATE TABLE entity_edges (
            user_id   text NOT NULL,
            source    bigint NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
            target    bigint NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
            weight    integer NOT NULL DEFAULT 0,
            last_seen timestamptz NOT NULL,
            PRIMARY KEY (source, target)
        );
        CREATE INDEX entity_edges_by_user ON entity_edges (user_id);
        CREATE INDEX entity_edges_by_target ON entity_edges (target);

        CREATE TABLE consolidations (
            id                   text PRIMARY KEY,
            user_id              text NOT NULL,
            summary              text NOT NULL,
            compression_ratio    double precision NOT NULL,
            entity_preservation  double precision NOT NULL,
            tes                  double precision NOT NULL,
            created_at           timestamptz NOT NULL
        );
        CREATE INDEX consolidations_by_user ON consolidations (user_id, created_at);
        CREATE TABLE consolidation_turns (
            consolidation_id text NOT NULL REFERENCES consolidations (id) ON DELETE CASCADE,
            turn_seq         bigint NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            PRIMARY KEY (consolidation_id, turn_seq)
        );
        CREATE INDEX consolidation_turns_by_turn ON consolidation_turns (turn_seq);

        CREATE TABLE derived (
            seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            id         text NOT NULL UNIQUE,
            user_id    text NOT NULL,
            tier       text NOT NULL,
            content    text NOT NULL,
            is_current boolean NOT NULL DEFAULT true,
            created_at timestamptz NOT NULL,
            search     tsvector GENERATED ALWAYS AS (to_tsvector('memstrata_english', content)) STORED
        );
        CREATE INDEX derived_by_user ON derived (user_id, tier);
        CREATE INDEX derived_search ON derived USING gin (search);
        CREATE TABLE derived_sources (
            derived_seq bigint NOT NULL REFERENCES derived (seq) ON DELETE CASCADE,
            turn_seq    bigint NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            PRIMARY KEY (derived_seq, turn_seq)
        );
        CREATE INDEX derived_sources_by_turn ON derived_sources (turn_seq);
        """,
    ),
    Migration(
        3,
        "API keys of the REST server",
        """
        CREATE TABLE api_keys (
            id          text PRIMARY KEY,
            tenant      text NOT NULL,
            name        text NOT NULL,
            secret_hash text NOT NULL UNIQUE,
            created_at  timestamptz NOT NULL,
            revoked_at  timestamptz
        );
        CREATE INDEX api_keys_by_tenant ON api_keys (tenant, created_at);
        """,
    ),
    # Full-text ranking needs each user's turn count (BM25's N) on every search; counting
    # the rows took tens of milliseconds at 100k turns. Statement triggers keep it in the
    # writing transaction, one row change per statement and user; a user whose turns are
    # all deleted leaves no row behind.
    Migration(
        4,
        "per-user turn counts for full-text ranking",
        """
        CREATE TABLE user_turn_counts (user_id text PRIMARY KEY, turns bigint NOT NULL);
        INSERT INTO user_turn_counts (user_id, turns) SELECT user_id, count(*) FROM turns GROUP BY user_id;

        CREATE FUNCTION memstrata_count_added_turns() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO user_turn_counts AS c (user_id, turns)
            SELECT user_id, count(*) FROM added GROUP BY user_id ORDER BY user_id
            ON CONFLICT (user_id) DO UPDATE SET turns = c.turns + excluded.turns;
            RETURN NULL;
        END $$;
        CREATE FUNCTION memstrata_count_deleted_turns() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE user_turn_counts AS c SET turns = c.turns - d.turns
            FROM (SELECT user_id, count(*) AS turns FROM deleted GROUP BY user_id) AS d
            WHERE c.user_id = d.user_id;
            DELETE FROM user_turn_counts WHERE turns <= 0;
            RETURN NULL;
        END $$;
        CREATE TRIGGER turns_counted_on_insert AFTER INSERT ON turns REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION memstrata_count_added_turns();
        CREATE TRIGGER turns_counted_on_delete AFTER DELETE ON turns REFERENCING OLD TABLE AS deleted
            FOR EACH STATEMENT EXECUTE FUNCTION memstrata_count_deleted_turns();
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
    # How many of a user's turns each lexeme of the full-text index is in (BM25's document
    # frequency), so a search of a large memory knows its common terms before reading their
    # rows (``storage/focus.py``). Statement triggers keep it in the writing transaction: a
    # turn's lexemes are added when it is inserted, moved when its neighbours' text changes,
    # and taken away when it is deleted; a count that reaches zero leaves no row behind, so a
    # forgotten user's words do not stay.
    Migration(
        6,
        "per-user lexeme counts for full-text ranking",
        """
        -- No turn is written between the backfill and the triggers (an older process may still write).
        LOCK TABLE turns IN SHARE ROW EXCLUSIVE MODE;
        CREATE TABLE user_term_counts (
            user_id text NOT NULL,
            lexeme  text NOT NULL,
            turns   bigint NOT NULL,
            PRIMARY KEY (user_id, lexeme)
        );
        INSERT INTO user_term_counts (user_id, lexeme, turns)
        SELECT t.user_id, l.lexeme, count(*) FROM turns t, unnest(tsvector_to_array(t.search)) AS l(lexeme)
        GROUP BY t.user_id, l.lexeme;

        CREATE FUNCTION memstrata_count_lexemes(changes_users text[], changes_lexemes text[], changes bigint[])
        RETURNS void LANGUAGE plpgsql AS $$
        DECLARE
            emptied_users text[];
            emptied_lexemes text[];
        BEGIN
            WITH changed AS (
                INSERT INTO user_term_counts AS c (user_id, lexeme, turns)
                SELECT u, l, n FROM unnest(changes_users, changes_lexemes, changes) AS d(u, l, n) ORDER BY u, l
                ON CONFLICT (user_id, lexeme) DO UPDATE SET turns = c.turns + excluded.turns
                RETURNING c.user_id, c.lexeme, c.turns
            )
            SELECT array_agg(user_id), array_agg(lexeme) INTO emptied_users, emptied_lexemes
            FROM changed WHERE turns <= 0;
            IF emptied_users IS NOT NULL THEN
                DELETE FROM user_term_counts c USING unnest(emptied_users, emptied_lexemes) AS z(u, l)
                WHERE c.user_id = z.u AND c.lexeme = z.l AND c.turns <= 0;
            END IF;
        END $$;

        CREATE FUNCTION memstrata_count_turn_lexemes() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            users text[];
            lexemes text[];
            changes bigint[];
        BEGIN
            IF TG_OP = 'INSERT' THEN
                SELECT array_agg(u), array_agg(l), array_agg(n) INTO users, lexemes, changes FROM (
                    SELECT a.user_id AS u, x.lexeme AS l, count(*) AS n
                    FROM added a, unnest(tsvector_to_array(a.search)) AS x(lexeme) GROUP BY 1, 2
                ) AS d;
            ELSIF TG_OP = 'DELETE' THEN
                SELECT array_agg(u), array_agg(l), array_agg(n) INTO users, lexemes, changes FROM (
                    SELECT r.user_id AS u, x.lexeme AS l, -count(*) AS n
                    FROM removed r, unnest(tsvector_to_array(r.search)) AS x(lexeme) GROUP BY 1, 2
                ) AS d;
            ELSE
                SELECT array_agg(u), array_agg(l), array_agg(n) INTO users, lexemes, changes FROM (
                    SELECT u, l, sum(n)::bigint AS n FROM (
                        SELECT a.user_id AS u, x.lexeme AS l, 1 AS n
                        FROM after_rows a, unnest(tsvector_to_array(a.search)) AS x(lexeme)
                        UNION ALL
                        SELECT b.user_id, x.lexeme, -1
                        FROM before_rows b, unnest(tsvector_to_array(b.search)) AS x(lexeme)
                    ) AS moved GROUP BY u, l HAVING sum(n) <> 0
                ) AS d;
            END IF;
            IF users IS NOT NULL THEN
                PERFORM memstrata_count_lexemes(users, lexemes, changes);
            END IF;
            RETURN NULL;
        END $$;
        CREATE TRIGGER turn_lexemes_on_insert AFTER INSERT ON turns REFERENCING NEW TABLE AS added
            FOR EACH STATEMENT EXECUTE FUNCTION memstrata_count_turn_lexemes();
        CREATE TRIGGER turn_lexemes_on_update AFTER UPDATE ON turns
            REFERENCING OLD TABLE AS before_rows NEW TABLE AS after_rows
            FOR EACH STATEMENT EXECUTE FUNCTION memstrata_count_turn_lexemes();
        CREATE TRIGGER turn_lexemes_on_delete AFTER DELETE ON turns REFERENCING OLD TABLE AS removed
            FOR EACH STATEMENT EXECUTE FUNCTION memstrata_count_turn_lexemes();
        """,
    ),
    # A turn's tsvector (its text, speaker and neighbours' text: about 1 KB) was stored out of
    # line in the TOAST table, so ranking read each candidate's vector with an index lookup and a
    # second fetch, most of a large memory's search time. STORAGE MAIN keeps it in the row (when
    # a row is too long, its text columns are moved out first); CLUSTER rewrites the existing
    # rows that way, in this transaction (about 5 s per 100,000 turns; writers and readers wait).
    Migration(
        7,
        "full-text vectors kept in the turn's row",
        """
        LOCK TABLE turns IN ACCESS EXCLUSIVE MODE;
        ALTER TABLE turns ALTER COLUMN search SET STORAGE MAIN;
        CLUSTER turns USING turns_pkey;
        ALTER TABLE turns SET WITHOUT CLUSTER;
        """,
        locks=("turns",),
    ),
    # As SQLite's step 6: a pattern counts each turn once (a retried tier job observes its
    # turns again), and a deleted turn takes its occurrence along. No foreign key to turns:
    # it would lock turns against writers while the table is made; purge_derived deletes the rows.
    Migration(
        8,
        "pattern occurrences, one per turn; failed jobs by user; sleep marks",
        """
        CREATE INDEX jobs_failed_by_user ON jobs (user_id) WHERE state = 'failed';
        CREATE TABLE pattern_observations (
            user_id   text NOT NULL,
            key       text NOT NULL,
            turn_seq  bigint NOT NULL,
            seen_at   timestamptz NOT NULL,
            evidence  text NOT NULL,
            PRIMARY KEY (user_id, key, turn_seq)
        );
        CREATE INDEX pattern_observations_by_turn ON pattern_observations (turn_seq);
        -- The newest turn each user's last sleep looked at: only turns after it make the next one due.
        CREATE TABLE sleep_marks (
            user_id       text PRIMARY KEY,
            through_seq   bigint NOT NULL
        );
        """,
    ),
    # As SQLite's step 7: a finished job is deleted from now on (before, one row per write
    # stayed forever); the ones finished before go here. No lock but the rows' own.
    Migration(
        9,
        "finished jobs deleted",
        """
        DELETE FROM jobs WHERE state = 'done';
        """,
    ),
    # As SQLite's step 8: a visit job is counted once. A constant default makes this a change
    # of the catalogue only (PostgreSQL 11+), with no rewrite of the table.
    Migration(
        10,
        "visit jobs counted once",
        """
        ALTER TABLE jobs ADD COLUMN counted boolean NOT NULL DEFAULT false;
        """,
    ),
    # As SQLite's step 9: the audit log keeps ids only.
    Migration(
        11,
        "supersession events keep ids only",
        """
        UPDATE events SET detail = detail - 'subject' - 'attribute' WHERE kind = 'supersession';
        """,
    ),
    # As SQLite's step 10: cells are found by their successor.
    Migration(
        12,
        "cells by successor",
        """
        CREATE INDEX IF NOT EXISTS cells_by_successor ON cells (superseded_by) WHERE superseded_by IS NOT NULL;
        """,
    ),
    # As SQLite's step 11: scenes whose segment retention deleted go.
    Migration(
        13,
        "scenes without their segment",
        """
        DELETE FROM scenes WHERE segment_id IS NOT NULL AND segment_id NOT IN (SELECT id FROM segments);
        """,
    ),
    # PostgreSQL's text parser keeps some tokens whole: an email address, a host name, a URL, a
    # path, "v2.4.1", "3.14", "-5", and it drops a "<tag>". Queries are split into words
    # (``retrieval/fulltext.py``), as SQLite's tokenizer splits both sides, so those turns were
    # never found, not even by their own text. The text is now indexed with every ASCII
    # punctuation mark read as a space (``memstrata_words``), so "ana@example.com" is "ana",
    # "example" and "com" on both sides. The columns are made again, and the per-user lexeme
    # counts of migration 6 recounted, under the exclusive lock on turns.
    Migration(
        14,
        "full-text words split at punctuation, as queries are",
        f"""
        CREATE OR REPLACE FUNCTION memstrata_words(text) RETURNS text
            LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
            AS $$ SELECT regexp_replace($1, '{_PUNCTUATION}', ' ', 'g') $$;

        -- One statement, one rewrite of the table, with the new vectors already kept in the row (migration 7).
        ALTER TABLE turns
            DROP COLUMN search,
            ADD COLUMN search tsvector GENERATED ALWAYS AS (
                setweight(to_tsvector('memstrata_english', memstrata_words(content)), 'A')
                || setweight(to_tsvector('memstrata_english', memstrata_words(coalesce(name, ''))), 'B')
                || setweight(to_tsvector('memstrata_english', memstrata_words(near)), 'C')
                || setweight(to_tsvector('memstrata_english', memstrata_words(far)), 'D')
            ) STORED,
            ALTER COLUMN search SET STORAGE MAIN;
        CREATE INDEX turns_search ON turns USING gin (search);
        DELETE FROM user_term_counts;
        INSERT INTO user_term_counts (user_id, lexeme, turns)
        SELECT t.user_id, l.lexeme, count(*) FROM turns t, unnest(tsvector_to_array(t.search)) AS l(lexeme)
        GROUP BY t.user_id, l.lexeme;

        ALTER TABLE derived
            DROP COLUMN search,
            ADD COLUMN search tsvector
                GENERATED ALWAYS AS (to_tsvector('memstrata_english', memstrata_words(content))) STORED;
        CREATE INDEX derived_search ON derived USING gin (search);
        -- The new columns have no statistics yet; the planner would guess every term rare.
        ANALYZE turns;
        ANALYZE derived;
        """,
        locks=("turns", "derived"),
    ),
    # As SQLite's step 12: the turns that restate a current fact, with the sentence each said it in.
    Migration(
        15,
        "turns that restate a fact",
        """
        CREATE TABLE IF NOT EXISTS cell_restatements (
            cell_id  text NOT NULL REFERENCES cells (id) ON DELETE CASCADE,
            turn_seq bigint NOT NULL REFERENCES turns (seq) ON DELETE CASCADE,
            value    text NOT NULL,
            content  text NOT NULL,
            PRIMARY KEY (cell_id, turn_seq)
        );
        CREATE INDEX IF NOT EXISTS cell_restatements_by_turn ON cell_restatements (turn_seq);
        """,
        locks=("turns", "cells"),
    ),
    # As SQLite's step 13: the model that made each segment's direction (NULL: before).
    Migration(
        16,
        "the model of each segment's direction",
        """
        ALTER TABLE segments ADD COLUMN IF NOT EXISTS centroid_model text;
        """,
        locks=("segments",),
    ),
    # As SQLite's step 14: each entity's name embedded once per model.
    Migration(
        17,
        "entity name vectors",
        """
        CREATE TABLE IF NOT EXISTS entity_vectors (
            entity_id bigint NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
            model_id  text NOT NULL,
            vector    bytea NOT NULL,
            PRIMARY KEY (entity_id, model_id)
        );
        """,
        locks=("entities",),
    ),
    # As SQLite's step 15: each current fact embedded once per model.
    Migration(
        18,
        "fact vectors",
        """
        CREATE TABLE IF NOT EXISTS cell_vectors (
            cell_id  text NOT NULL REFERENCES cells (id) ON DELETE CASCADE,
            model_id text NOT NULL,
            vector   bytea NOT NULL,
            PRIMARY KEY (cell_id, model_id)
        );
        """,
        locks=("cells",),
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version

# Every table the migrations create (a test holds this to the migrated schema): what
# ``vacuum`` rewrites and ``size_bytes`` sums, never another application's tables.
TABLES = (
    "api_keys",
    "cell_restatements",
    "cell_vectors",
    "cells",
    "consolidation_turns",
    "consolidations",
    "derived",
    "derived_sources",
    "entities",
    "entity_edges",
    "entity_mentions",
    "entity_vectors",
    "events",
    "jobs",
    "pattern_observations",
    "patterns",
    "profile",
    "scenes",
    "schema_migrations",
    "segment_turns",
    "segments",
    "sleep_marks",
    "turn_scores",
    "turn_vectors",
    "turns",
    "user_term_counts",
    "user_turn_counts",
    "vector_indexes",
    "working_items",
)


def migrate(connection: psycopg.Connection[Any], location: str, lock_timeout_ms: int = 30_000) -> int:
    """Bring the schema to ``LATEST_VERSION`` under an advisory lock; refuse a database from a newer memstrata.

    The lock is waited for at most ``lock_timeout_ms``, then the open fails with a ``StorageError``.

    The tables pending steps alter (``Migration.locks``) are locked exclusively, in one
    statement, before any step runs, waiting at most ``lock_timeout_ms``: a lock taken
    later, or a weaker one raised later, would deadlock with an older process that holds
    one of them and waits for another.
    """
    wait = max(1, int(lock_timeout_ms))
    try:
        with connection.transaction():
            # Bounded too: a process that hangs while holding it must not hold every other open.
            connection.execute(f"SET LOCAL lock_timeout = {wait}")
            try:
                connection.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_NAMESPACE, MIGRATION_LOCK))
            except errors.LockNotAvailable as exc:
                raise StorageError(
                    f"cannot open {location}: another memstrata process has held the schema's migration lock"
                    f" for {wait / 1000:g} s (it is upgrading the schema, or is stuck doing so); open it again"
                    " once that process is done, or raise busy_timeout_seconds"
                ) from exc
            connection.execute("SET LOCAL lock_timeout = DEFAULT")
            connection.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            row = connection.execute(migrating.RECORDED_VERSION).fetchone()
            current = int(row[0]) if row else 0
            migrating.refuse_if_too_new(current, LATEST_VERSION, location, "'memstrata[postgres]'")
            pending = migrating.pending(MIGRATIONS, current)
            if current >= 1 and pending:
                # Every table a step locks waits this long at most: a session idle in a transaction
                # must not hold the upgrade, and every writer queued behind it, forever.
                connection.execute(f"SET LOCAL lock_timeout = {wait}")
            # turns first, as every writer takes it first: waiting for it, the upgrade holds nothing yet.
            locked = sorted(
                {table for migration in pending for table in migration.locks}, key=lambda t: (t != "turns", t)
            )
            if current >= 1 and locked:  # a database before migration 1 has none of these tables yet
                _lock_tables(connection, locked, location, lock_timeout_ms)
            for migration in pending:
                try:
                    connection.execute(migration.sql)
                except errors.LockNotAvailable as exc:
                    raise StorageError(
                        f"cannot upgrade the schema of {location} (step {migration.version}, {migration.name}):"
                        f" another session kept a table busy for {lock_timeout_ms / 1000:g} s; stop other"
                        " memstrata processes (or end long transactions) and open it again, or raise"
                        " busy_timeout_seconds"
                    ) from exc
                connection.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (migration.version, migration.name)
                )
    except errors.InsufficientPrivilege as exc:
        raise StorageError(
            f"cannot create memstrata's schema in {location}: {exc.diag.message_primary or exc}; connect as a role"
            " that may create tables in the database, and have an administrator run CREATE EXTENSION vector"
            " in it once if the role may not"
        ) from exc
    except (errors.UndefinedFile, errors.FeatureNotSupported) as exc:
        raise StorageError(
            f"cannot set up {location}: {exc.diag.message_primary or exc}; the pgvector extension must be"
            " installed on the server (https://github.com/pgvector/pgvector; most managed PostgreSQL services"
            " offer it as 'vector')"
        ) from exc
    except psycopg.Error as exc:
        raise StorageError(f"cannot migrate the schema of {location}: {exc}") from exc
    return LATEST_VERSION


def _lock_tables(connection: psycopg.Connection[Any], tables: list[str], location: str, lock_timeout_ms: int) -> None:
    """Lock the existing ``tables`` exclusively, in one statement, until the transaction ends (``lock_timeout``
    bounds the wait), or say they were busy."""
    present = [
        table
        for table in tables
        if connection.execute("SELECT to_regclass(%s)", (table,)).fetchone() not in (None, (None,))
    ]
    if not present:
        return
    try:
        connection.execute(f"LOCK TABLE {', '.join(present)} IN ACCESS EXCLUSIVE MODE")
    except errors.LockNotAvailable as exc:
        raise StorageError(
            f"cannot upgrade the schema of {location}: another session kept {_tables(present)} busy for"
            f" {lock_timeout_ms / 1000:g} s; stop other memstrata processes (or end long transactions) and"
            " open it again, or raise busy_timeout_seconds"
        ) from exc


def _tables(names: list[str]) -> str:
    """ "the turns table", "the turns and derived tables", "the turns, cells and derived tables"."""
    if len(names) == 1:
        return f"the {names[0]} table"
    return f"the {', '.join(names[:-1])} and {names[-1]} tables"
