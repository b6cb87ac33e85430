"""SQLite's steps from 4 on: each changes the schema a released memstrata left. Never edit a released one."""

from __future__ import annotations

from memstrata.storage.migrating import Migration

# Migration 4's triggers on turns first mark the turns whose indexed text a change alters (the
# turn and its two neighbours on each side), then index every marked turn again.
_MARK_NEW_AND_NEIGHBOURS = """\
            INSERT OR IGNORE INTO turns_fts_dirty (seq)
                SELECT new.seq UNION SELECT before1 FROM turn_neighbours WHERE seq = new.seq AND before1 IS NOT NULL
                UNION SELECT before2 FROM turn_neighbours WHERE seq = new.seq AND before2 IS NOT NULL
                UNION SELECT after1 FROM turn_neighbours WHERE seq = new.seq AND after1 IS NOT NULL
                UNION SELECT after2 FROM turn_neighbours WHERE seq = new.seq AND after2 IS NOT NULL;"""
_REINDEX_MARKED = """\
            DELETE FROM turns_fts WHERE rowid IN (SELECT seq FROM turns_fts_dirty);
            INSERT INTO turns_fts (rowid, content, name, near, far)
                SELECT seq, content, name, near, far FROM turn_index_text
                WHERE seq IN (SELECT seq FROM turns_fts_dirty);
            DELETE FROM turns_fts_dirty;"""

UPGRADES: tuple[Migration, ...] = (
    Migration(
        version=4,
        name="full-text index with each turn's neighbours",
        # Each turn is also indexed with the two turns before and after it in its session
        # (columns ``near``: ±1 and ``far``: ±2, weighted low): an answer is then found by the
        # words of the question before it. The index keeps its own copy of the text,
        # maintained by triggers in the writing transaction, and stays rebuildable from
        # ``turns`` (the view ``turn_index_text``).
        sql=f"""
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
{_MARK_NEW_AND_NEIGHBOURS}
{_REINDEX_MARKED}
        END;
        CREATE TRIGGER turns_fts_delete AFTER DELETE ON turns BEGIN
            DELETE FROM turns_fts WHERE rowid = old.seq;
            INSERT OR IGNORE INTO turns_fts_dirty (seq)
                SELECT seq FROM (SELECT seq FROM turns WHERE user_id = old.user_id AND session_id IS old.session_id
                    AND seq < old.seq ORDER BY seq DESC LIMIT 2)
                UNION SELECT seq FROM (SELECT seq FROM turns WHERE user_id = old.user_id
                    AND session_id IS old.session_id AND seq > old.seq ORDER BY seq LIMIT 2);
{_REINDEX_MARKED}
        END;
        CREATE TRIGGER turns_fts_update AFTER UPDATE OF content, name ON turns BEGIN
{_MARK_NEW_AND_NEIGHBOURS}
{_REINDEX_MARKED}
        END;
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
    # A pattern counts each turn once: a tier job retried after a failure part-way observes
    # its turns again, and a deleted turn takes its occurrence (and its evidence) along.
    # Patterns counted before this step have no rows here and keep their counts.
    Migration(
        version=6,
        name="pattern occurrences, one per turn; sleep marks",
        sql="""
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
        version=7,
        name="open jobs by user; finished jobs deleted",
        sql="""
        DELETE FROM jobs WHERE state = 'done';
        CREATE INDEX jobs_open_by_user ON jobs (user_id, id) WHERE state IN ('pending', 'running');
        """,
    ),
    # A visit job marks itself counted in the transaction that adds its visits, so a retry
    # (after a crash between the two) does not count them again.
    Migration(
        version=8,
        name="visit jobs counted once",
        sql="""
        ALTER TABLE jobs ADD COLUMN counted INTEGER NOT NULL DEFAULT 0;
        """,
    ),
    # The audit log holds ids and counts, never content: a fact's subject and attribute
    # ("pet:dog:max") are what the user said, and stayed after the user was forgotten.
    Migration(
        version=9,
        name="supersession events keep ids only",
        sql="""
        UPDATE events SET detail = json_remove(detail, '$.subject', '$.attribute') WHERE kind = 'supersession';
        """,
    ),
    # Deleting a fact's turn hands the value it replaced its place: found by its successor.
    Migration(
        version=10,
        name="cells by successor",
        sql="""
        CREATE INDEX IF NOT EXISTS cells_by_successor ON cells (superseded_by) WHERE superseded_by IS NOT NULL;
        """,
    ),
    # Retention used to delete archived segments promoted to scenes: the scene, which quotes the
    # segment's turns, lost the link that deleting those turns finds it by. Such scenes go.
    Migration(
        version=11,
        name="scenes without their segment",
        sql="""
        DELETE FROM scenes WHERE segment_id IS NOT NULL AND segment_id NOT IN (SELECT id FROM segments);
        """,
    ),
    # A fact said again ("I live in Porto", twice) is stored once, from the turn that said it
    # first; deleting that turn deleted the fact although a kept turn still said it. The turns
    # that restate a current fact are noted here, with the sentence each said it in: when the
    # fact's own turn is deleted, the earliest of them becomes its source.
    Migration(
        version=12,
        name="turns that restate a fact",
        sql="""
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
        version=13,
        name="the model of each segment's direction",
        sql="""
        ALTER TABLE segments ADD COLUMN centroid_model TEXT;
        """,
    ),
    # Each entity's name embedded once (per model), so a question asking for a kind of thing
    # ("What European countries …?") can find the entities that are of that kind ("Spain").
    Migration(
        version=14,
        name="entity name vectors",
        sql="""
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
        version=15,
        name="fact vectors",
        sql="""
        CREATE TABLE IF NOT EXISTS cell_vectors (
            cell_id  TEXT NOT NULL REFERENCES cells (id) ON DELETE CASCADE,
            model_id TEXT NOT NULL,
            vector   BLOB NOT NULL,
            PRIMARY KEY (cell_id, model_id)
        );
        """,
    ),
    # Shared spaces: their grants, how far agents trust each other, where shared copies came
    # from, and the agent an API key acts as. A space's memories are stored under its scope id.
    Migration(
        version=16,
        name="spaces, grants, trust and share links",
        sql="""
        CREATE TABLE spaces (
            name        TEXT PRIMARY KEY,
            description TEXT,
            created_at  TEXT NOT NULL,
            -- Set when its deletion begins: the space is gone for every call, its memories go next.
            deleting_since TEXT
        );
        CREATE TABLE space_grants (
            space       TEXT NOT NULL REFERENCES spaces (name) ON DELETE CASCADE,
            agent_id    TEXT NOT NULL,
            access      TEXT NOT NULL CHECK (access IN ('read', 'write', 'admin')),
            granted_at  TEXT NOT NULL,
            PRIMARY KEY (space, agent_id)
        );
        CREATE INDEX space_grants_by_agent ON space_grants (agent_id, space);
        CREATE TABLE agent_trust (
            agent_id    TEXT NOT NULL,
            of_agent    TEXT NOT NULL,
            weight      REAL NOT NULL CHECK (weight >= 0 AND weight <= 1),
            PRIMARY KEY (agent_id, of_agent)
        );
        CREATE TABLE shares (
            turn_id      TEXT PRIMARY KEY,
            scope        TEXT NOT NULL,
            source_id    TEXT NOT NULL,
            source_scope TEXT NOT NULL,
            shared_by    TEXT,
            shared_at    TEXT NOT NULL
        );
        ALTER TABLE api_keys ADD COLUMN agent_id TEXT;
        """,
    ),
    # What an API key may do over REST. Every key stored before is admin: it could do everything.
    Migration(
        version=17,
        name="API key roles",
        sql="""
        ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'admin' CHECK (role IN ('read', 'write', 'admin'));
        """,
    ),
    # A forgotten user id is replaced in the audit log and share links by its hash, salted with a
    # random value kept here (made by the first forget); the share links are found by scope.
    Migration(
        version=18,
        name="the salt of forgotten ids",
        sql="""
        CREATE TABLE IF NOT EXISTS store_secrets (
            name  TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        CREATE INDEX IF NOT EXISTS shares_by_scope ON shares (scope);
        CREATE INDEX IF NOT EXISTS shares_by_source_scope ON shares (source_scope);
        """,
    ),
    # A user's vectors by turn: novelty reads the last ones before a turn, and without this index
    # SQLite walked (model_id, turn_seq) back through every other user's vectors to find them.
    Migration(
        version=19,
        name="vectors of a user by turn",
        sql="""
        CREATE INDEX IF NOT EXISTS turn_vectors_by_user_turn ON turn_vectors (model_id, user_id, turn_seq);
        """,
    ),
    # How many turns each user has, kept by triggers: counting a user's turns walked an index
    # entry each (80 ms at 1M turns), and full text reads the count on every search. And a
    # user's turns in seq order (an index on user_id holds them so): a large memory's latest
    # turns are found by a walk back from its newest, not by sorting all of them.
    Migration(
        version=20,
        name="turns per user",
        sql="""
        CREATE INDEX IF NOT EXISTS turns_by_user ON turns (user_id);
        CREATE TABLE IF NOT EXISTS user_turn_counts (
            user_id TEXT PRIMARY KEY,
            turns   INTEGER NOT NULL
        ) WITHOUT ROWID;
        INSERT OR REPLACE INTO user_turn_counts (user_id, turns) SELECT user_id, count(*) FROM turns GROUP BY user_id;
        CREATE TRIGGER IF NOT EXISTS user_turn_counts_insert AFTER INSERT ON turns BEGIN
            INSERT INTO user_turn_counts (user_id, turns) VALUES (new.user_id, 1)
                ON CONFLICT (user_id) DO UPDATE SET turns = turns + 1;
        END;
        -- A user whose last turn goes leaves no row: a forgotten id must not stay in the file.
        CREATE TRIGGER IF NOT EXISTS user_turn_counts_delete AFTER DELETE ON turns BEGIN
            UPDATE user_turn_counts SET turns = turns - 1 WHERE user_id = old.user_id;
            DELETE FROM user_turn_counts WHERE user_id = old.user_id AND turns <= 0;
        END;
        CREATE TRIGGER IF NOT EXISTS user_turn_counts_move AFTER UPDATE OF user_id ON turns
        WHEN new.user_id IS NOT old.user_id BEGIN
            UPDATE user_turn_counts SET turns = turns - 1 WHERE user_id = old.user_id;
            DELETE FROM user_turn_counts WHERE user_id = old.user_id AND turns <= 0;
            INSERT INTO user_turn_counts (user_id, turns) VALUES (new.user_id, 1)
                ON CONFLICT (user_id) DO UPDATE SET turns = turns + 1;
        END;
        """,
    ),
)
