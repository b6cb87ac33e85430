"""PostgreSQL's steps 1 to 3: turns, vectors, events, the memory hierarchy and API keys. Never edit a released one."""

from __future__ import annotations

from memstrata.storage.migrating import Migration

# Identity columns come from sequences, which never hand out a value twice: an index that
# catches up by "ids above the last one seen" can neither miss a row nor mislabel one
# (writers of one user serialise on an advisory lock, so ids also grow in commit order).
# The text search configuration is English stemming without a stopword list, like the
# SQLite backend's porter tokenizer: a query made only of stopwords still finds something.
# ``near`` and ``far`` hold the text of the turn's neighbours in its session (see
# neighbours.py), like the SQLite index's columns of the same names: labels A (text),
# B (speaker), C (turns ±1 away), D (±2).
SCHEMA: tuple[Migration, ...] = (
    Migration(
        version=1,
        name="turns, full-text search, vectors, events",
        sql="""
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
        version=2,
        name="memory hierarchy: working set, job queue, segments, cells, scenes, profile, patterns, entities",
        sql="""
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
        version=3,
        name="API keys of the REST server",
        sql="""
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
)
