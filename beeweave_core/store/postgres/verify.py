"""verify() and repair() for the PostgreSQL backend: the derived tables checked against,
and rebuilt from, each tenant's records and their postings.

The records (``chunks``), their vectors and their term counts (``postings``, written in
the same transaction) are the source; everything the search reads besides them is
derived and is recomputed here set-wise, from scratch: lengths, document frequencies and
their histogram, the statistics row, session neighbours and their lengths, the context
postings and the per-user counts (and an access row for every record). A tenant whose SQL
search is off (``PostgresStore.set_sql_search``) keeps no context postings or context
vectors: they are checked to be absent, and rebuilt only when it is on; its vectors stay
out of pgvector's graph (``vectors.graph``).
"""

from __future__ import annotations

import psycopg

from .index import CONTEXT_ROWS_SQL, CONTEXT_VECTORS_SQL, Q
from .sql import one

__all__ = ["problems", "rebuild", "set_context"]

# Each memory's neighbours, from scratch: the records within ``r`` positions in its
# (user, session) among those that take part in context (``turn``), ordered by timestamp
# then insertion.
_EXPECTED_NEIGHBOURS = """
WITH o AS (
    SELECT seq, user_id, session_id, row_number() OVER (PARTITION BY user_id, session_id ORDER BY ts, seq) AS pos
    FROM chunks WHERE tenant = %(t)s AND session_id IS NOT NULL AND turn AND %(r)s > 0
), expected AS (
    SELECT a.seq, b.seq AS nb_seq FROM o a JOIN o b ON a.user_id = b.user_id AND a.session_id = b.session_id
        AND b.pos BETWEEN a.pos - %(r)s AND a.pos + %(r)s AND b.seq <> a.seq
)"""

_CHECKS: list[tuple[str, str]] = [
    ("records whose length differs from their postings", """
        SELECT count(*) FROM chunks c LEFT JOIN (
            SELECT chunk_seq, sum(tf) AS n FROM postings WHERE tenant = %(t)s GROUP BY chunk_seq) p
        ON p.chunk_seq = c.seq WHERE c.tenant = %(t)s AND c.doc_len <> coalesce(p.n, 0)"""),
    ("postings of missing records", """
        SELECT count(*) FROM postings p WHERE p.tenant = %(t)s
        AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.seq = p.chunk_seq)"""),
    ("statistics that differ from the records", """
        SELECT count(*) FROM (SELECT count(*) AS n, coalesce(sum(doc_len), 0) AS l, coalesce(sum(nb_len), 0) AS nl
                              FROM chunks WHERE tenant = %(t)s) c
        LEFT JOIN stats s ON s.tenant = %(t)s
        WHERE (c.n, c.l, c.nl) IS DISTINCT FROM (coalesce(s.n_docs, 0), coalesce(s.total_len, 0),
                                                 coalesce(s.total_nb_len, 0))"""),
    ("vectors whose dimension differs from the store's", """
        SELECT count(*) FROM vectors v JOIN stats s ON s.tenant = v.tenant
        WHERE v.tenant = %(t)s AND (v.dim <> s.dim OR vector_dims(v.embedding) <> v.dim)"""),
    ("records without a vector or vectors without a record", """
        SELECT count(*) FROM (SELECT seq FROM chunks WHERE tenant = %(t)s) c
        FULL JOIN (SELECT seq FROM vectors WHERE tenant = %(t)s) v USING (seq) WHERE c.seq IS NULL OR v.seq IS NULL"""),
    ("vectors whose place in pgvector's graph differs from the SQL-search setting", """
        SELECT count(*) FROM vectors WHERE tenant = %(t)s AND graph <> %(on)s"""),
    ("records without an access row", """
        SELECT count(*) FROM chunks c WHERE c.tenant = %(t)s
        AND NOT EXISTS (SELECT 1 FROM access a WHERE a.tenant = %(t)s AND a.seq = c.seq)"""),
    ("user counts that differ from the records", """
        SELECT count(*) FROM (SELECT user_id, count(*) AS n FROM chunks WHERE tenant = %(t)s GROUP BY user_id) c
        FULL JOIN (SELECT user_id, n FROM ucount WHERE tenant = %(t)s AND n <> 0) u USING (user_id)
        WHERE c.n IS DISTINCT FROM u.n"""),
]

# The context postings and vectors of every record of the tenant (index.py's statements
# for some records, with their ``seqs`` condition dropped).
_ALL_CONTEXT_ROWS = CONTEXT_ROWS_SQL.replace("p.chunk_seq = ANY(%(seqs)s)", "true").replace("n.seq = ANY(%(seqs)s)", "true")
_ALL_CONTEXT_VECTORS = CONTEXT_VECTORS_SQL.replace("v.seq = ANY(%(seqs)s)", "true")

# What only the SQL search reads: checked against the records when it is on, else absent.
_CONTEXT_CHECKS: list[tuple[str, str]] = [
    ("terms whose document frequency differs from the postings", """
        SELECT count(*) FROM (SELECT term, count(*)::int AS df FROM postings WHERE tenant = %(t)s GROUP BY term) p
        FULL JOIN (SELECT term, df FROM terms WHERE tenant = %(t)s AND df > 0) t USING (term)
        WHERE p.df IS DISTINCT FROM t.df"""),
    ("document-frequency histogram rows that differ from the terms", """
        SELECT count(*) FROM (SELECT df, count(*) AS n FROM terms WHERE tenant = %(t)s AND df > 0 GROUP BY df) t
        FULL JOIN (SELECT df, n_terms AS n FROM df_hist WHERE tenant = %(t)s AND n_terms <> 0) h USING (df)
        WHERE t.n IS DISTINCT FROM h.n"""),
    ("neighbour links that differ from the session order", _EXPECTED_NEIGHBOURS + """,
        actual AS (SELECT seq, nb_seq FROM neighbours WHERE tenant = %(t)s)
        SELECT count(*) FROM ((SELECT * FROM expected EXCEPT SELECT * FROM actual)
                              UNION ALL (SELECT * FROM actual EXCEPT SELECT * FROM expected)) x"""),
    ("records whose neighbour length differs from their neighbours", """
        SELECT count(*) FROM chunks c LEFT JOIN (
            SELECT n.seq, sum(m.doc_len) AS n FROM neighbours n
            JOIN chunks m ON m.tenant = n.tenant AND m.seq = n.nb_seq WHERE n.tenant = %(t)s GROUP BY n.seq) x
        ON x.seq = c.seq WHERE c.tenant = %(t)s AND c.nb_len <> coalesce(x.n, 0)"""),
    ("context postings that differ from the postings and neighbours", """
        SELECT count(*) FROM (""" + _ALL_CONTEXT_ROWS + """) e
        FULL JOIN (SELECT * FROM cpost WHERE tenant = %(t)s) a ON a.seq = e.seq AND a.term = e.term
        WHERE e.seq IS NULL OR a.seq IS NULL OR a.user_id <> e.user_id OR a.status <> e.status
        OR abs(a.f - e.f) > 1e-9 OR abs(a.clen - e.clen) > 1e-9"""),
    ("context vectors that differ from the vectors and neighbours", """
        SELECT count(*) FROM (""" + _ALL_CONTEXT_VECTORS + """) e
        FULL JOIN (SELECT * FROM ctxvec WHERE tenant = %(t)s) a ON a.seq = e.seq
        WHERE e.seq IS NULL OR a.seq IS NULL OR abs(a.norm - e.norm) > 1e-6
        OR (a.s IS NULL) <> (e.s IS NULL) OR (a.s <-> e.s) > 1e-5"""),
]
_NO_CONTEXT_CHECKS: list[tuple[str, str]] = [
    ("rows of what only the SQL search reads, kept while it is off", """
        SELECT (SELECT count(*) FROM cpost WHERE tenant = %(t)s) + (SELECT count(*) FROM ctxvec WHERE tenant = %(t)s)
        + (SELECT count(*) FROM terms WHERE tenant = %(t)s) + (SELECT count(*) FROM df_hist WHERE tenant = %(t)s)
        + (SELECT count(*) FROM neighbours WHERE tenant = %(t)s)
        + (SELECT count(*) FROM chunks WHERE tenant = %(t)s AND nb_len <> 0)"""),
]
_EDGE_CHECKS: list[tuple[str, str]] = [
    ("relationships that point at missing records", """
        SELECT count(*) FROM edges e WHERE e.tenant = %(t)s AND (
            NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.id = e.src)
            OR NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.id = e.dst))"""),
]


def _tables(query: str) -> str:
    """The unqualified table names of these statements as ``@name`` for the qualifier."""
    import re

    return re.sub(r"\b(FROM|JOIN|INTO|UPDATE|TABLE) (chunks|vectors|postings|terms|df_hist|stats|neighbours|edges|"
                  r"cpost|ucount|access|ctxvec)\b", r"\1 @\2", query)


def problems(conn: psycopg.Connection, q: Q, tenant: str, radius: int, w: float, vw: float, *,
             context: bool = True) -> list[str]:
    """One line per kind of disagreement found, with how many rows it concerns (``context``:
    whether the tenant's SQL search, and so its context postings and vectors, is on)."""
    args = {"t": tenant, "r": int(radius), "w": float(w), "vw": float(vw), "on": bool(context)}
    out = []
    for what, query in [*_CHECKS, *(_CONTEXT_CHECKS if context else _NO_CONTEXT_CHECKS), *_EDGE_CHECKS]:
        n = one(conn.execute(q(_tables(query)), args).fetchone())[0]
        if n:
            out.append(f"{n} {what}")
    return out


_CONTEXT_REBUILD = (
    "INSERT INTO cpost (tenant, seq, term, user_id, status, f, clen) " + _ALL_CONTEXT_ROWS,
    "INSERT INTO ctxvec (tenant, seq, s, norm) " + _ALL_CONTEXT_VECTORS,
)


# The rest of what only the SQL search reads: document frequencies and their histogram,
# session neighbours and their lengths (the context postings and vectors are built from
# them), deleted by every switch and rebuilt when it turns the SQL search on.
_SEARCH_DELETE = tuple(f"DELETE FROM {table} WHERE tenant = %(t)s"
                       for table in ("cpost", "ctxvec", "terms", "df_hist", "neighbours"))
_SEARCH_REBUILD = (
    "INSERT INTO terms (tenant, term, df) SELECT %(t)s, term, count(*) FROM postings WHERE tenant = %(t)s "
    "GROUP BY term",
    "INSERT INTO df_hist (tenant, df, n_terms) SELECT %(t)s, df, count(*) FROM terms WHERE tenant = %(t)s "
    "GROUP BY df",
    "INSERT INTO neighbours (tenant, seq, nb_seq) " + _EXPECTED_NEIGHBOURS + " SELECT %(t)s, seq, nb_seq FROM expected",
    "UPDATE chunks c SET nb_len = coalesce((SELECT sum(m.doc_len) FROM neighbours n JOIN chunks m "
    "ON m.tenant = n.tenant AND m.seq = n.nb_seq WHERE n.tenant = %(t)s AND n.seq = c.seq), 0) "
    "WHERE c.tenant = %(t)s",
    *_CONTEXT_REBUILD,
)
_NO_NEIGHBOUR_LENGTHS = "UPDATE chunks SET nb_len = 0 WHERE tenant = %(t)s AND nb_len <> 0"
_STATS_NB = ("UPDATE stats s SET total_nb_len = (SELECT coalesce(sum(nb_len), 0) FROM chunks WHERE tenant = %(t)s) "
             "WHERE s.tenant = %(t)s")


def set_context(conn: psycopg.Connection, q: Q, tenant: str, on: bool, radius: int, w: float, vw: float) -> None:
    """Delete what only a tenant's SQL search reads (context postings and vectors, document
    frequencies, session neighbours and their lengths), and with ``on`` rebuild it from its
    records and postings (inside the caller's transaction, holding the tenant's write lock);
    its vectors go into pgvector's graph with ``on``, out of it without (schema 0011)."""
    args = {"t": tenant, "r": int(radius), "w": float(w), "vw": float(vw), "on": bool(on)}
    for query in ("UPDATE vectors SET graph = %(on)s WHERE tenant = %(t)s AND graph <> %(on)s", *_SEARCH_DELETE,
                  *(_SEARCH_REBUILD if on else (_NO_NEIGHBOUR_LENGTHS,)), _STATS_NB):
        conn.execute(q(_tables(query)), args)


def rebuild(conn: psycopg.Connection, q: Q, tenant: str, radius: int, w: float, vw: float, *,
            context: bool = True) -> None:
    """Recompute every derived table of a tenant from its records and postings (inside the
    caller's transaction, holding the tenant's write lock); what only the SQL search reads
    (``set_context``) only with ``context`` (its SQL search on), else it is deleted."""
    args = {"t": tenant, "r": int(radius), "w": float(w), "vw": float(vw)}
    for query in (
        "DELETE FROM postings p WHERE p.tenant = %(t)s "
        "AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.seq = p.chunk_seq)",
        "DELETE FROM edges e WHERE e.tenant = %(t)s AND ("
        "NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.id = e.src) "
        "OR NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.id = e.dst))",
        "UPDATE chunks c SET doc_len = coalesce((SELECT sum(tf) FROM postings p WHERE p.tenant = %(t)s "
        "AND p.chunk_seq = c.seq), 0) WHERE c.tenant = %(t)s",
        "DELETE FROM vectors v WHERE v.tenant = %(t)s "
        "AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.seq = v.seq)",
        "DELETE FROM access a WHERE a.tenant = %(t)s "
        "AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.seq = a.seq)",
        "INSERT INTO access (tenant, seq, n, last) SELECT %(t)s, c.seq, coalesce((c.doc->>'access_count')::bigint, 0), "
        "(c.doc->>'last_accessed')::timestamptz FROM chunks c WHERE c.tenant = %(t)s ON CONFLICT DO NOTHING",
        "DELETE FROM ucount WHERE tenant = %(t)s",
        "INSERT INTO ucount (tenant, user_id, n) SELECT %(t)s, user_id, count(*) FROM chunks WHERE tenant = %(t)s "
        "GROUP BY user_id",
        "INSERT INTO stats AS s (tenant, n_docs, total_len, total_nb_len, dim) "
        "SELECT %(t)s, count(*), coalesce(sum(c.doc_len), 0), coalesce(sum(c.nb_len), 0), max(v.dim) "
        "FROM chunks c LEFT JOIN vectors v ON v.tenant = c.tenant AND v.seq = c.seq WHERE c.tenant = %(t)s "
        "ON CONFLICT (tenant) DO UPDATE SET n_docs = excluded.n_docs, total_len = excluded.total_len, "
        "total_nb_len = excluded.total_nb_len, dim = coalesce(excluded.dim, s.dim)",
    ):
        conn.execute(q(_tables(query)), args)
    set_context(conn, q, tenant, context, radius, w, vw)
