"""PostgreSQL's steps from 4 on: each changes the schema a released memstrata left. Never edit a released one."""

from __future__ import annotations

from memstrata.storage.migrating import Migration

#: Every ASCII punctuation mark, as a regular expression: read as a space before text is indexed.
_PUNCTUATION = r"[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]+"

UPGRADES: tuple[Migration, ...] = (
    # Full-text ranking needs each user's turn count (BM25's N) on every search; counting
    # the rows took tens of milliseconds at 100k turns. Statement triggers keep it in the
    # writing transaction, one row change per statement and user; a user whose turns are
    # all deleted leaves no row behind.
    Migration(
        version=4,
        name="per-user turn counts for full-text ranking",
        sql="""
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
        version=5,
        name="index of each user's speaker names",
        sql="""
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
        version=6,
        name="per-user lexeme counts for full-text ranking",
        sql="""
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
        version=7,
        name="full-text vectors kept in the turn's row",
        sql="""
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
        version=8,
        name="pattern occurrences, one per turn; failed jobs by user; sleep marks",
        sql="""
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
        version=9,
        name="finished jobs deleted",
        sql="""
        DELETE FROM jobs WHERE state = 'done';
        """,
    ),
    # As SQLite's step 8: a visit job is counted once. A constant default makes this a change
    # of the catalogue only (PostgreSQL 11+), with no rewrite of the table.
    Migration(
        version=10,
        name="visit jobs counted once",
        sql="""
        ALTER TABLE jobs ADD COLUMN counted boolean NOT NULL DEFAULT false;
        """,
    ),
    # As SQLite's step 9: the audit log keeps ids only.
    Migration(
        version=11,
        name="supersession events keep ids only",
        sql="""
        UPDATE events SET detail = detail - 'subject' - 'attribute' WHERE kind = 'supersession';
        """,
    ),
    # As SQLite's step 10: cells are found by their successor.
    Migration(
        version=12,
        name="cells by successor",
        sql="""
        CREATE INDEX IF NOT EXISTS cells_by_successor ON cells (superseded_by) WHERE superseded_by IS NOT NULL;
        """,
    ),
    # As SQLite's step 11: scenes whose segment retention deleted go.
    Migration(
        version=13,
        name="scenes without their segment",
        sql="""
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
        version=14,
        name="full-text words split at punctuation, as queries are",
        sql=f"""
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
        version=15,
        name="turns that restate a fact",
        sql="""
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
        version=16,
        name="the model of each segment's direction",
        sql="""
        ALTER TABLE segments ADD COLUMN IF NOT EXISTS centroid_model text;
        """,
        locks=("segments",),
    ),
    # As SQLite's step 14: each entity's name embedded once per model.
    Migration(
        version=17,
        name="entity name vectors",
        sql="""
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
        version=18,
        name="fact vectors",
        sql="""
        CREATE TABLE IF NOT EXISTS cell_vectors (
            cell_id  text NOT NULL REFERENCES cells (id) ON DELETE CASCADE,
            model_id text NOT NULL,
            vector   bytea NOT NULL,
            PRIMARY KEY (cell_id, model_id)
        );
        """,
        locks=("cells",),
    ),
    # As SQLite's step 16: spaces, grants, trust, share links, and the agent of an API key.
    Migration(
        version=19,
        name="spaces, grants, trust and share links",
        sql="""
        CREATE TABLE IF NOT EXISTS spaces (
            name        text PRIMARY KEY,
            description text,
            created_at  timestamptz NOT NULL,
            deleting_since timestamptz
        );
        CREATE TABLE IF NOT EXISTS space_grants (
            space       text NOT NULL REFERENCES spaces (name) ON DELETE CASCADE,
            agent_id    text NOT NULL,
            access      text NOT NULL CHECK (access IN ('read', 'write', 'admin')),
            granted_at  timestamptz NOT NULL,
            PRIMARY KEY (space, agent_id)
        );
        CREATE INDEX IF NOT EXISTS space_grants_by_agent ON space_grants (agent_id, space);
        CREATE TABLE IF NOT EXISTS agent_trust (
            agent_id    text NOT NULL,
            of_agent    text NOT NULL,
            weight      double precision NOT NULL CHECK (weight >= 0 AND weight <= 1),
            PRIMARY KEY (agent_id, of_agent)
        );
        CREATE TABLE IF NOT EXISTS shares (
            turn_id      text PRIMARY KEY,
            scope        text NOT NULL,
            source_id    text NOT NULL,
            source_scope text NOT NULL,
            shared_by    text,
            shared_at    timestamptz NOT NULL
        );
        ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS agent_id text;
        """,
        locks=("api_keys",),
    ),
    # As SQLite's step 17: what an API key may do over REST; every key stored before is admin.
    Migration(
        version=20,
        name="API key roles",
        sql="""
        ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS role text NOT NULL DEFAULT 'admin'
            CHECK (role IN ('read', 'write', 'admin'));
        """,
        locks=("api_keys",),
    ),
    # As SQLite's step 18: the salt of forgotten ids, and share links found by scope.
    Migration(
        version=21,
        name="the salt of forgotten ids",
        sql="""
        CREATE TABLE IF NOT EXISTS store_secrets (
            name  text PRIMARY KEY,
            value text NOT NULL
        );
        CREATE INDEX IF NOT EXISTS shares_by_scope ON shares (scope);
        CREATE INDEX IF NOT EXISTS shares_by_source_scope ON shares (source_scope);
        """,
        # No exclusive lock: building the indexes only holds off writers of shares, within lock_timeout.
    ),
    # As SQLite's step 19: a user's vectors by turn, for novelty's "the last ones before this turn".
    Migration(
        version=22,
        name="vectors of a user by turn",
        sql="""
        CREATE INDEX IF NOT EXISTS turn_vectors_by_user_turn ON turn_vectors (model_id, user_id, turn_seq);
        """,
        # Building it holds off writers of turn_vectors (not readers) for as long as it takes.
    ),
)
