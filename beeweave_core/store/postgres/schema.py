"""The PostgreSQL schema: named, versioned migrations.

Every table carries a ``tenant`` column that leads every key, so one set of tables
holds many isolated memories.

Vectors live in an untyped ``vector`` column beside their ``dim``: tenants may use
models of different dimensions. No pgvector index is kept: searches are answered by
each process's local index (local.py), which holds the vectors.
Documents are ``json`` (the text as written), not ``jsonb``: jsonb turns 1e300 into
an integer, reorders keys and rejects ``\\u0000``, and a memory must come back as it
went in.
"""

from __future__ import annotations

import hashlib

import psycopg
from psycopg import sql

from ...errors import SchemaVersionError, StoreUnavailableError
from .sql import one

__all__ = ["MIGRATIONS", "PG_SCHEMA_VERSION", "migrate", "check_schema", "lock_key"]

# Named, ordered migrations. Each runs once, in one transaction, under a database-wide
# advisory lock (so concurrent first opens do not race), and is recorded in
# schema_migrations. Never edit a published one: add the next.
MIGRATIONS: list[tuple[str, str]] = [
    ("0001_initial", """
        CREATE SEQUENCE chunk_seq AS bigint;
        CREATE TABLE chunks (
            tenant text COLLATE "C" NOT NULL,
            seq bigint NOT NULL DEFAULT nextval('chunk_seq'),
            id text COLLATE "C" NOT NULL,
            user_id text COLLATE "C" NOT NULL,
            agent_id text COLLATE "C",
            session_id text COLLATE "C",
            ts double precision NOT NULL,
            status text NOT NULL,
            ctype text NOT NULL,
            intent text,
            tags text[] NOT NULL,
            entities text[] NOT NULL,
            doc json NOT NULL,
            dim integer NOT NULL,
            embedding vector NOT NULL,
            doc_len integer NOT NULL,
            nb_len bigint NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant, seq),
            UNIQUE (tenant, id)
        );
        CREATE INDEX chunks_session ON chunks (tenant, user_id, session_id, ts, seq);
        CREATE INDEX chunks_time ON chunks (tenant, ts, seq);
        CREATE INDEX chunks_tags ON chunks USING gin (tags);
        CREATE INDEX chunks_entities ON chunks USING gin (entities);
        CREATE TABLE postings (
            tenant text COLLATE "C" NOT NULL,
            term text COLLATE "C" NOT NULL,
            chunk_seq bigint NOT NULL,
            tf integer NOT NULL,
            PRIMARY KEY (tenant, term, chunk_seq)
        );
        CREATE INDEX postings_chunk ON postings (tenant, chunk_seq);
        CREATE TABLE terms (
            tenant text COLLATE "C" NOT NULL,
            term text COLLATE "C" NOT NULL,
            df integer NOT NULL,
            PRIMARY KEY (tenant, term)
        );
        CREATE TABLE df_hist (
            tenant text COLLATE "C" NOT NULL,
            df integer NOT NULL,
            n_terms bigint NOT NULL,
            PRIMARY KEY (tenant, df)
        );
        CREATE TABLE stats (
            tenant text COLLATE "C" PRIMARY KEY,
            n_docs bigint NOT NULL DEFAULT 0,
            total_len bigint NOT NULL DEFAULT 0,
            total_nb_len bigint NOT NULL DEFAULT 0,
            dim integer
        );
        CREATE TABLE neighbours (
            tenant text COLLATE "C" NOT NULL,
            seq bigint NOT NULL,
            nb_seq bigint NOT NULL,
            PRIMARY KEY (tenant, seq, nb_seq)
        );
        CREATE TABLE edges (
            tenant text COLLATE "C" NOT NULL,
            src text COLLATE "C" NOT NULL,
            dst text COLLATE "C" NOT NULL,
            type text NOT NULL,
            weight double precision NOT NULL,
            PRIMARY KEY (tenant, src, dst, type),
            FOREIGN KEY (tenant, src) REFERENCES chunks (tenant, id) ON DELETE CASCADE,
            FOREIGN KEY (tenant, dst) REFERENCES chunks (tenant, id) ON DELETE CASCADE
        );
        CREATE INDEX edges_dst ON edges (tenant, dst, src);
        CREATE TABLE kv (
            tenant text COLLATE "C" NOT NULL,
            ns text COLLATE "C" NOT NULL,
            key text COLLATE "C" NOT NULL,
            value json NOT NULL,
            user_id text COLLATE "C",
            PRIMARY KEY (tenant, ns, key)
        );
        CREATE INDEX kv_user ON kv (tenant, user_id);
        CREATE TABLE log (
            tenant text COLLATE "C" NOT NULL,
            seq bigserial NOT NULL,
            stream text COLLATE "C" NOT NULL,
            key text COLLATE "C" NOT NULL,
            value json NOT NULL,
            user_id text COLLATE "C",
            PRIMARY KEY (tenant, seq)
        );
        CREATE INDEX log_stream ON log (tenant, stream, key, seq);
        CREATE INDEX log_stream_seq ON log (tenant, stream, seq);
        CREATE INDEX log_user ON log (tenant, user_id);
        CREATE TABLE meta (
            tenant text COLLATE "C" NOT NULL,
            key text COLLATE "C" NOT NULL,
            value text NOT NULL,
            PRIMARY KEY (tenant, key)
        );
    """),
    # A 384-float vector is 1.5 kB, which with the record passes PostgreSQL's 2 kB
    # TOAST threshold: the vector (it does not compress) went out of line, and every
    # exact scan fetched each one from the TOAST table. MAIN keeps vectors in the row
    # and lets the JSON record be compressed or moved instead. (Rows written before keep
    # their storage until rewritten.)
    ("0002_vectors_inline", """
        ALTER TABLE chunks ALTER COLUMN embedding SET STORAGE MAIN;
    """),
    # The search layout (issue 18). Vectors move to their own table, so no record update
    # (status, tags, neighbour length, lifecycle) ever re-inserts a vector into an HNSW
    # graph (dropping the column drops the old per-dimension indexes with it); the chunk
    # rows are left room for HOT updates. Access counts move to a narrow side table that
    # a search's write-back updates in one statement, without the tenant write lock.
    # ``ucount`` (records per user) lets a search choose the exact scan or the graph
    # without counting. ``cpost`` holds each record's context postings: for every term in
    # the record or its session neighbours, f = tf + w * (the neighbours' tf) and the
    # record's context length clen = doc_len + w * nb_len, with its user and status, so
    # BM25 with context is one index-only range scan per query term. It is derived
    # (rebuilt from postings and neighbours by repair()); it is filled here for existing
    # tenants with their own context weight.
    ("0003_search_layout", """
        CREATE TABLE vectors (
            tenant text COLLATE "C" NOT NULL,
            seq bigint NOT NULL,
            dim integer NOT NULL,
            embedding vector NOT NULL,
            PRIMARY KEY (tenant, seq)
        );
        ALTER TABLE vectors ALTER COLUMN embedding SET STORAGE MAIN;
        INSERT INTO vectors (tenant, seq, dim, embedding) SELECT tenant, seq, dim, embedding FROM chunks;
        ALTER TABLE chunks DROP COLUMN embedding, DROP COLUMN dim;
        ALTER TABLE chunks SET (fillfactor = 80);
        CREATE TABLE access (
            tenant text COLLATE "C" NOT NULL,
            seq bigint NOT NULL,
            n bigint NOT NULL DEFAULT 0,
            last timestamptz,
            PRIMARY KEY (tenant, seq)
        ) WITH (fillfactor = 70);
        INSERT INTO access (tenant, seq, n, last)
        SELECT tenant, seq, coalesce((doc->>'access_count')::bigint, 0), (doc->>'last_accessed')::timestamptz
        FROM chunks;
        CREATE TABLE ucount (
            tenant text COLLATE "C" NOT NULL,
            user_id text COLLATE "C" NOT NULL,
            n bigint NOT NULL,
            PRIMARY KEY (tenant, user_id)
        );
        INSERT INTO ucount (tenant, user_id, n) SELECT tenant, user_id, count(*) FROM chunks GROUP BY 1, 2;
        CREATE TABLE cpost (
            tenant text COLLATE "C" NOT NULL,
            seq bigint NOT NULL,
            term text COLLATE "C" NOT NULL,
            user_id text COLLATE "C" NOT NULL,
            status text NOT NULL,
            f double precision NOT NULL,
            clen double precision NOT NULL,
            PRIMARY KEY (tenant, seq, term)
        );
        CREATE INDEX cpost_search ON cpost (tenant, term, user_id, status, seq) INCLUDE (f, clen);
        WITH w AS (
            SELECT m.tenant, CASE WHEN (m.value::json->>'context_radius')::int > 0
                                  THEN (m.value::json->>'lexical_context_weight')::float8 ELSE 0 END AS w
            FROM meta m WHERE m.key = 'index_config'
        ), x AS (
            SELECT p.tenant, p.chunk_seq AS seq, p.term, p.tf::float8 AS tf FROM postings p
            UNION ALL
            SELECT n.tenant, n.seq, p.term, w.w * p.tf FROM neighbours n
            JOIN w ON w.tenant = n.tenant AND w.w > 0
            JOIN postings p ON p.tenant = n.tenant AND p.chunk_seq = n.nb_seq
        )
        INSERT INTO cpost (tenant, seq, term, user_id, status, f, clen)
        SELECT c.tenant, c.seq, x.term, c.user_id, c.status, sum(x.tf), c.doc_len + coalesce(w.w, 0.3) * c.nb_len
        FROM x JOIN chunks c ON c.tenant = x.tenant AND c.seq = x.seq LEFT JOIN w ON w.tenant = c.tenant
        GROUP BY c.tenant, c.seq, x.term, c.user_id, c.status, c.doc_len, c.nb_len, w.w;
    """),
    # The ingest queue of PostgreSQL tenants (ingest_queue.py): an accepted event is a row
    # here, committed before the 202, so any host's worker drains it. A worker claims
    # events with FOR UPDATE SKIP LOCKED and a lease; a worker that dies leaves its lease
    # to expire and the events to the next one.
    ("0004_ingest_queue", """
        CREATE TABLE ingest_events (
            tenant text COLLATE "C" NOT NULL,
            seq bigserial NOT NULL,
            id text COLLATE "C" NOT NULL,
            user_id text COLLATE "C" NOT NULL,
            body text NOT NULL,
            state text NOT NULL DEFAULT 'pending',
            attempts integer NOT NULL DEFAULT 0,
            error text,
            enqueued_at timestamptz NOT NULL DEFAULT now(),
            failed_at timestamptz,
            lease_until timestamptz,
            leased_by text,
            PRIMARY KEY (tenant, id)
        );
        CREATE INDEX ingest_events_state ON ingest_events (tenant, state, seq);
    """),
    # Each record's neighbours' vector sum and its context vector's norm, kept by the
    # writes that change a record's neighbours, so a search scores a candidate's context
    # vector from two rows instead of one per neighbour (derived: rebuilt by repair()).
    ("0005_context_vectors", """
        CREATE TABLE ctxvec (
            tenant text COLLATE "C" NOT NULL,
            seq bigint NOT NULL,
            s vector,
            norm double precision NOT NULL,
            PRIMARY KEY (tenant, seq)
        );
        ALTER TABLE ctxvec ALTER COLUMN s SET STORAGE MAIN;
        WITH w AS (
            SELECT m.tenant, CASE WHEN (m.value::json->>'context_radius')::int > 0
                                  THEN (m.value::json->>'vector_context_weight')::float8 ELSE 0 END AS vw
            FROM meta m WHERE m.key = 'index_config'
        )
        INSERT INTO ctxvec (tenant, seq, s, norm)
        SELECT v.tenant, v.seq, nb.s, sqrt(greatest(-(v.embedding <#> v.embedding)
            - 2 * w.vw * coalesce(v.embedding <#> nb.s, 0) - w.vw * w.vw * coalesce(nb.s <#> nb.s, 0), 0))
        FROM vectors v JOIN w ON w.tenant = v.tenant AND w.vw > 0
        LEFT JOIN LATERAL (SELECT sum(nv.embedding) AS s FROM neighbours n
                           JOIN vectors nv ON nv.tenant = n.tenant AND nv.seq = n.nb_seq
                           WHERE n.tenant = v.tenant AND n.seq = v.seq) nb ON true;
    """),
    # Memory tiers (working / short / long, docs/lifecycle.md): a filter column like status;
    # rows written before tiers existed were long-term memories. (A constant default makes
    # ADD COLUMN a catalogue change, with no table rewrite.)
    ("0006_tiers", """
        ALTER TABLE chunks ADD COLUMN tier text NOT NULL DEFAULT 'long';
    """),
    # A search filtered by agent reads the records that pass the filter first
    # (sql.FILTERED_CTES); without an index that was a scan of every chunk of the tenant.
    # With user and status in it, a filter of agent, user and status is read from
    # the index alone. (Sessions have chunks_session, tags and entities their GIN
    # indexes, time chunks_time, declared fields their own.)
    ("0007_agent_index", """
        CREATE INDEX chunks_agent ON chunks (tenant, agent_id, user_id, status, seq);
    """),
    # Whether a record takes part in session context (index/turns.py), decided when it is
    # written; rows written before had context whenever they had a session.
    ("0008_turns", """
        ALTER TABLE chunks ADD COLUMN turn boolean NOT NULL DEFAULT true;
    """),
    # The change log a store with a local index (store/postgres/local.py) catches up from:
    # one row per record id a write transaction inserted, rewrote or deleted ('w'), or 'f'
    # when the tenant's index must be rebuilt (a user forgotten, a repair, a dropped tenant).
    # Rows are written under the tenant write lock, so within a tenant ``seq`` follows commit
    # order and a reader that saw ``seq`` N has seen every commit before it.
    ("0009_changes", """
        CREATE TABLE changes (
            tenant text COLLATE "C" NOT NULL,
            seq bigserial NOT NULL,
            id text COLLATE "C" NOT NULL,
            op text NOT NULL,
            PRIMARY KEY (tenant, seq)
        );
    """),
    # A tenant's SQL search may be off (meta 'sql_search' = 'off', PostgresStore.set_sql_search):
    # its writes then keep no context postings or vectors and its searches go to local
    # indexes. Code before this version would keep writing them and search them in SQL, so
    # the version moves on (an older BeeWeave refuses to open the schema); the comments say
    # it to whoever reads the tables.
    ("0010_sql_search_setting", """
        COMMENT ON TABLE cpost IS 'context postings: none for a tenant whose meta sql_search is off';
        COMMENT ON TABLE ctxvec IS 'context vectors: none for a tenant whose meta sql_search is off';
    """),
    # Only a tenant whose SQL search is on walks pgvector's graph: one whose SQL search is off
    # answers its nearest-record reads from local indexes. Inserting its vectors into the
    # graph was 40 % of an add's server time at 100k (benchmarks/RESULTS.md), so its rows
    # carry graph = false and the graph's index (hnsw_index_name, built in the background by
    # the first open after this migration; the index of the older name is dropped once it
    # is valid) leaves them out. Nor does such a tenant keep the rest of what only the SQL
    # search reads: document frequencies, session neighbours and their lengths. The
    # migration only adds the column (no rewrite: ALTER TABLE holds every tenant's vectors
    # locked while it runs, and an UPDATE here would insert each row into the old graph
    # again): such a tenant's older rows are tidied by repair(), which verify() asks for.
    ("0011_vectors_graph", """
        ALTER TABLE vectors ADD COLUMN graph boolean NOT NULL DEFAULT true;
        COMMENT ON COLUMN vectors.graph IS 'in the HNSW graph: false for a tenant whose meta sql_search is off';
        COMMENT ON TABLE terms IS 'document frequencies: none for a tenant whose meta sql_search is off';
        COMMENT ON TABLE neighbours IS 'session neighbours: none for a tenant whose meta sql_search is off';
    """),
    # One search path (issue 45): every search is answered by the local index of the
    # searching process (local.py), which computes BM25 with session context, document
    # frequencies and neighbours from the records, postings and vectors. What only the SQL
    # search read goes: context postings and vectors, document frequencies and their
    # histogram, session neighbours and lengths, per-user counts and pgvector's graphs
    # (whatever their name: the index of 0011 or the older one). A tenant whose SQL search
    # was off keeps its rows as they are; its setting goes with the rest.
    ("0012_one_search_path", """
        DROP TABLE cpost, ctxvec, df_hist, neighbours, terms, ucount;
        DO $$
        DECLARE r record;
        BEGIN
            FOR r IN SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()
                     AND tablename = 'vectors' AND indexname ~ '^vectors_(graph|hnsw)_[0-9]+$' LOOP
                EXECUTE format('DROP INDEX %I', r.indexname);
            END LOOP;
        END $$;
        ALTER TABLE vectors DROP COLUMN graph;
        ALTER TABLE chunks DROP COLUMN nb_len, DROP COLUMN doc_len;
        ALTER TABLE stats DROP COLUMN total_len, DROP COLUMN total_nb_len;
        DELETE FROM meta WHERE key = 'sql_search';
    """),
]
PG_SCHEMA_VERSION = len(MIGRATIONS)


def lock_key(*parts: str) -> int:
    """A signed 64-bit advisory-lock key for a tuple of strings (stable across processes)."""
    digest = hashlib.sha1("\x00".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _vector_schema(conn: psycopg.Connection) -> str | None:
    row = conn.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                       "WHERE e.extname = 'vector'").fetchone()
    return None if row is None else row[0]


def migrate(conn: psycopg.Connection, schema: str) -> str:
    """Bring ``schema`` up to date; return the schema holding pgvector (for search_path).

    ``conn`` is a fresh autocommit connection.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("beeweave-migrate"),))
        vschema = _vector_schema(conn)
        if vschema is None:
            try:
                with conn.transaction():
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.Error as exc:
                raise StoreUnavailableError(
                    f"pgvector is not installed in this database and cannot be created here ({exc}); "
                    "run CREATE EXTENSION vector as a privileged user (managed services: enable the "
                    "'vector' extension) and open the store again") from exc
            vschema = _vector_schema(conn)
        ident = sql.Identifier(schema)
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
        conn.execute(sql.SQL("SET LOCAL search_path TO {}, {}").format(ident, sql.Identifier(vschema or "public")))
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, "
                     "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
        version = one(conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone())[0]
        if version > PG_SCHEMA_VERSION:
            raise SchemaVersionError(
                f"the PostgreSQL schema {schema!r} has version {version}; this BeeWeave understands up to "
                f"{PG_SCHEMA_VERSION}: upgrade beeweave")
        for i, (name, ddl) in enumerate(MIGRATIONS[version:], start=version + 1):
            conn.execute(ddl)  # trusted DDL, several statements
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (i, name))
    return vschema or "public"


def check_schema(conn: psycopg.Connection, schema: str) -> str:
    """For a read-only store (a replica): check the schema is there and current, change
    nothing; return the schema holding pgvector."""
    vschema = _vector_schema(conn)
    if vschema is None:
        raise StoreUnavailableError("pgvector is not installed in this database")
    row = one(conn.execute("SELECT to_regclass(%s)", (f'"{schema}".schema_migrations',)).fetchone())
    version = 0 if row[0] is None else one(conn.execute(
        sql.SQL("SELECT coalesce(max(version), 0) FROM {}.schema_migrations").format(sql.Identifier(schema))
    ).fetchone())[0]
    if version > PG_SCHEMA_VERSION:
        raise SchemaVersionError(f"the PostgreSQL schema {schema!r} has version {version}; this BeeWeave "
                                 f"understands up to {PG_SCHEMA_VERSION}: upgrade beeweave")
    if version < PG_SCHEMA_VERSION:
        raise StoreUnavailableError(f"the PostgreSQL schema {schema!r} is at version {version}, not "
                                    f"{PG_SCHEMA_VERSION}: open a writable store on the primary once to migrate it")
    return vschema
