"""verify() and repair() for the PostgreSQL backend: what is kept beside each tenant's
records checked against, and rebuilt from, the records.

The records (``chunks``), their vectors and their term counts (``postings``) are written
in one transaction; beside them a tenant keeps an access row per record, the statistics
row (how many records, the vectors' dimension) and relationships between existing
records. Everything a search reads beyond that is computed by the local index (local.py).
"""

from __future__ import annotations

import re

import psycopg

from .connection import Database
from .sql import one

__all__ = ["problems", "rebuild"]

_CHECKS: list[tuple[str, str]] = [
    ("postings of missing records", """
        SELECT count(*) FROM postings p WHERE p.tenant = %(t)s
        AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.seq = p.chunk_seq)"""),
    ("statistics that differ from the records", """
        SELECT count(*) FROM (SELECT count(*) AS n FROM chunks WHERE tenant = %(t)s) c
        LEFT JOIN stats s ON s.tenant = %(t)s WHERE c.n <> coalesce(s.n_docs, 0)"""),
    ("vectors whose dimension differs from the store's", """
        SELECT count(*) FROM vectors v JOIN stats s ON s.tenant = v.tenant
        WHERE v.tenant = %(t)s AND (v.dim <> s.dim OR vector_dims(v.embedding) <> v.dim)"""),
    ("records without a vector or vectors without a record", """
        SELECT count(*) FROM (SELECT seq FROM chunks WHERE tenant = %(t)s) c
        FULL JOIN (SELECT seq FROM vectors WHERE tenant = %(t)s) v USING (seq) WHERE c.seq IS NULL OR v.seq IS NULL"""),
    ("records without an access row", """
        SELECT count(*) FROM chunks c WHERE c.tenant = %(t)s
        AND NOT EXISTS (SELECT 1 FROM access a WHERE a.tenant = %(t)s AND a.seq = c.seq)"""),
    ("relationships that point at missing records", """
        SELECT count(*) FROM edges e WHERE e.tenant = %(t)s AND (
            NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.id = e.src)
            OR NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.id = e.dst))"""),
]

_REBUILD = (
    "DELETE FROM postings p WHERE p.tenant = %(t)s "
    "AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.seq = p.chunk_seq)",
    "DELETE FROM edges e WHERE e.tenant = %(t)s AND ("
    "NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.id = e.src) "
    "OR NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.id = e.dst))",
    "DELETE FROM vectors v WHERE v.tenant = %(t)s "
    "AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.seq = v.seq)",
    "DELETE FROM access a WHERE a.tenant = %(t)s "
    "AND NOT EXISTS (SELECT 1 FROM chunks c WHERE c.tenant = %(t)s AND c.seq = a.seq)",
    "INSERT INTO access (tenant, seq, n, last) SELECT %(t)s, c.seq, coalesce((c.doc->>'access_count')::bigint, 0), "
    "(c.doc->>'last_accessed')::timestamptz FROM chunks c WHERE c.tenant = %(t)s ON CONFLICT DO NOTHING",
    "INSERT INTO stats AS s (tenant, n_docs, dim) "
    "SELECT %(t)s, count(*), max(v.dim) FROM chunks c LEFT JOIN vectors v ON v.tenant = c.tenant AND v.seq = c.seq "
    "WHERE c.tenant = %(t)s "
    "ON CONFLICT (tenant) DO UPDATE SET n_docs = excluded.n_docs, dim = coalesce(excluded.dim, s.dim)",
)


def _tables(query: str) -> str:
    """The unqualified table names of these statements as ``@name`` for the qualifier."""
    return re.sub(r"\b(FROM|JOIN|INTO|UPDATE|TABLE) (chunks|vectors|postings|stats|edges|access)\b", r"\1 @\2",
                  query)


def problems(db: Database, conn: psycopg.Connection) -> list[str]:
    """One line per kind of disagreement found, with how many rows it concerns."""
    out = []
    for what, query in _CHECKS:
        n = one(conn.execute(db.q(_tables(query)), {"t": db.tenant}).fetchone())[0]
        if n:
            out.append(f"{n} {what}")
    return out


def rebuild(db: Database, conn: psycopg.Connection) -> None:
    """Recompute what is kept beside a tenant's records from them (inside the caller's
    transaction, holding the tenant's write lock)."""
    for query in _REBUILD:
        conn.execute(db.q(_tables(query)), {"t": db.tenant})
