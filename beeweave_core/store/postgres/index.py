"""Write-side bookkeeping of the PostgreSQL backend's BM25 index, inside the caller's
transaction: postings, document frequencies and their histogram, the session
neighbours and the per-tenant statistics.

What the lexical search reads is kept exact and cheap:

* ``terms.df`` — how many live records hold each term;
* ``df_hist`` — how many terms have each df. It gave the mean idf of rank_bm25's epsilon
  floor; Lucene's idf (bm25.py) needs no mean, so no search reads it now, but it is still
  kept exact (``verify()`` checks it) until a migration drops it;
* ``stats`` — N and the integer sums of own and neighbour lengths, so the average
  context length is exact (no floating-point drift however many writes);
* ``neighbours`` and ``chunks.nb_len`` — each record's session neighbours (``radius``
  before and after it among the records of its (user, session) that take part in
  context, ``chunks.turn``, by timestamp then insertion) and the sum of their lengths;
* ``cpost`` — each record's context postings (what the search reads): for every term of
  the record or its neighbours, f = tf + w * (the neighbours' tf), with the record's
  context length, user and status. A write refreshes the rows of every record whose
  text, neighbours, user or status it changed (``refresh_context``).

Every statement is schema-qualified through ``q`` (see sql.qualify) and none needs its
result before the next is sent, except where a value is computed here, so a write runs
in a pipeline: a few round trips per transaction, not one per statement.

Writers of one tenant are serialised by the caller (an advisory lock), so these
read-modify-write steps never interleave.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

import psycopg

__all__ = ["add_postings", "remove_postings", "rethread", "bump_stats", "refresh_context", "count_users",
           "SessionChanges", "Q"]

Q = Callable[[str], str]  # the store's qualifier: "@table" -> '"schema".table'

# (user_id, session_id) -> positions (ts, seq) where records arrived or left.
SessionChanges = dict[tuple[str, str], list[tuple[float, int]]]


# df changes as one statement: the terms' new df, and the histogram moved by the old and
# new df of each changed term. ``{src}`` yields (term, d) rows.
_DF_SQL = """
WITH {pre} d AS ({src}), up AS (
    INSERT INTO @terms AS tm (tenant, term, df) SELECT %(t)s, d.term, d.d FROM d
    ON CONFLICT (tenant, term) DO UPDATE SET df = tm.df + excluded.df RETURNING tm.term, tm.df
), h AS (
    SELECT x.df, sum(x.n)::bigint AS n FROM (
        SELECT up.df - d.d AS df, -1 AS n FROM up JOIN d ON d.term = up.term WHERE up.df - d.d > 0
        UNION ALL SELECT up.df, 1 FROM up WHERE up.df > 0) x
    GROUP BY x.df HAVING sum(x.n) <> 0
)
INSERT INTO @df_hist AS dh (tenant, df, n_terms) SELECT %(t)s, h.df, h.n FROM h
ON CONFLICT (tenant, df) DO UPDATE SET n_terms = dh.n_terms + excluded.n_terms
"""


def add_postings(conn: psycopg.Connection, q: Q, tenant: str, seqs: Sequence[int],
                 counts: Sequence[Mapping[str, int]], *, df: bool = True) -> None:
    """Write the postings of new records and, with ``df`` (the tenant's SQL search on: only
    its statements read them), raise their terms' df."""
    terms, pseqs, tfs = [], [], []
    for seq, tc in zip(seqs, counts, strict=True):
        for term, tf in tc.items():
            terms.append(term)
            pseqs.append(seq)
            tfs.append(tf)
    if not terms:
        return
    args = {"t": tenant, "terms": terms, "seqs": pseqs, "tfs": tfs}
    conn.execute(q("INSERT INTO @postings (tenant, term, chunk_seq, tf) SELECT %(t)s, u.term, u.seq, u.tf "
                   "FROM unnest(%(terms)s::text[], %(seqs)s::bigint[], %(tfs)s::int[]) AS u(term, seq, tf)"), args)
    if df:
        conn.execute(q(_DF_SQL.format(pre="", src="SELECT u.term, count(*)::int AS d FROM unnest(%(terms)s::text[]) "
                                                  "AS u(term) GROUP BY u.term")), args)


def remove_postings(conn: psycopg.Connection, q: Q, tenant: str, seqs: Sequence[int], *, df: bool = True) -> None:
    """Delete the postings of removed records and, with ``df``, lower their terms' df."""
    if not df:
        conn.execute(q("DELETE FROM @postings WHERE tenant = %s AND chunk_seq = ANY(%s)"), (tenant, list(seqs)))
        return
    conn.execute(q(_DF_SQL.format(
        pre="gone AS (DELETE FROM @postings WHERE tenant = %(t)s AND chunk_seq = ANY(%(seqs)s) RETURNING term),",
        src="SELECT term, -count(*)::int AS d FROM gone GROUP BY term")), {"t": tenant, "seqs": list(seqs)})
    conn.execute(q("DELETE FROM @terms WHERE tenant = %s AND df <= 0"), (tenant,))
    conn.execute(q("DELETE FROM @df_hist WHERE tenant = %s AND n_terms <= 0"), (tenant,))


# For each changed session: up to 2*radius records before its first change, every record
# between its first and last change, and up to 2*radius after the last. The records
# within ``radius`` of a change are the ones whose neighbours may differ, and the outer
# ``radius`` on each side are their own neighbours.
_REGION_SQL = """
SELECT k.i, x.part, x.ts, x.seq, x.doc_len, x.nb_len
FROM unnest(%(u)s::text[], %(s)s::text[], %(lts)s::float8[], %(lseq)s::bigint[], %(hts)s::float8[],
            %(hseq)s::bigint[]) WITH ORDINALITY AS k(u, s, lts, lseq, hts, hseq, i)
CROSS JOIN LATERAL (
    (SELECT 0 AS part, c.ts, c.seq, c.doc_len, c.nb_len FROM @chunks c
     WHERE c.tenant = %(t)s AND c.user_id = k.u AND c.session_id = k.s AND c.turn AND (c.ts, c.seq) < (k.lts, k.lseq)
     ORDER BY c.ts DESC, c.seq DESC LIMIT %(lim)s)
    UNION ALL
    (SELECT 1, c.ts, c.seq, c.doc_len, c.nb_len FROM @chunks c
     WHERE c.tenant = %(t)s AND c.user_id = k.u AND c.session_id = k.s AND c.turn
       AND (c.ts, c.seq) >= (k.lts, k.lseq) AND (c.ts, c.seq) <= (k.hts, k.hseq))
    UNION ALL
    (SELECT 2, c.ts, c.seq, c.doc_len, c.nb_len FROM @chunks c
     WHERE c.tenant = %(t)s AND c.user_id = k.u AND c.session_id = k.s AND c.turn AND (c.ts, c.seq) > (k.hts, k.hseq)
     ORDER BY c.ts, c.seq LIMIT %(lim)s)
) AS x
"""


def rethread(conn: psycopg.Connection, q: Q, tenant: str, radius: int,
             changes: SessionChanges) -> tuple[int, list[int]]:
    """Recompute the neighbours of every record near a change; return the change of the
    tenant's total neighbour length and the records whose neighbours were recomputed.
    Records that left a session must already have had their neighbours cleared (``nb_len`` 0)."""
    if radius <= 0 or not changes:
        return 0, []
    keys = list(changes)
    lo = [min(changes[k]) for k in keys]
    hi = [max(changes[k]) for k in keys]
    rows = conn.execute(q(_REGION_SQL), {
        "t": tenant, "lim": 2 * radius, "u": [k[0] for k in keys], "s": [k[1] for k in keys],
        "lts": [p[0] for p in lo], "lseq": [p[1] for p in lo], "hts": [p[0] for p in hi], "hseq": [p[1] for p in hi],
    }).fetchall()
    regions: dict[int, list[tuple[float, int, int, int]]] = {}
    n_before: Counter[int] = Counter()
    n_after: Counter[int] = Counter()
    for i, part, ts, seq, doc_len, nb_len in rows:
        regions.setdefault(i, []).append((ts, seq, doc_len, nb_len))
        if part == 0:
            n_before[i] += 1
        elif part == 2:
            n_after[i] += 1
    seqs, nb_lens, pairs_a, pairs_b = [], [], [], []
    delta = 0
    for i, region in regions.items():
        region.sort()
        first = n_before[i] - min(n_before[i], radius)
        last = len(region) - n_after[i] + min(n_after[i], radius)
        for idx in range(first, last):
            nbs = region[max(0, idx - radius) : idx] + region[idx + 1 : idx + radius + 1]
            seq, old = region[idx][1], region[idx][3]
            new = sum(n[2] for n in nbs)
            delta += new - old
            seqs.append(seq)
            nb_lens.append(new)
            pairs_a += [seq] * len(nbs)
            pairs_b += [n[1] for n in nbs]
    if seqs:
        conn.execute(q("DELETE FROM @neighbours WHERE tenant = %s AND seq = ANY(%s)"), (tenant, seqs))
        conn.execute(q("INSERT INTO @neighbours (tenant, seq, nb_seq) SELECT %s, a, b FROM unnest(%s::bigint[], "
                       "%s::bigint[]) AS u(a, b)"), (tenant, pairs_a, pairs_b))
        conn.execute(q("UPDATE @chunks c SET nb_len = u.v FROM unnest(%s::bigint[], %s::bigint[]) AS u(s, v) "
                       "WHERE c.tenant = %s AND c.seq = u.s AND c.nb_len <> u.v"), (seqs, nb_lens, tenant))
    return delta, seqs


def bump_stats(conn: psycopg.Connection, q: Q, tenant: str, *, docs: int = 0, length: int = 0,
               nb_length: int = 0, dim: int | None = None) -> None:
    conn.execute(q(
        "INSERT INTO @stats AS s (tenant, n_docs, total_len, total_nb_len, dim) VALUES (%s, %s, %s, %s, %s) "
        "ON CONFLICT (tenant) DO UPDATE SET n_docs = s.n_docs + excluded.n_docs, "
        "total_len = s.total_len + excluded.total_len, "
        "total_nb_len = s.total_nb_len + excluded.total_nb_len, dim = coalesce(excluded.dim, s.dim)"),
        (tenant, docs, length, nb_length, dim))


def count_users(conn: psycopg.Connection, q: Q, tenant: str, delta: Mapping[str, int]) -> None:
    """Move the per-user record counts (which choose exact or graph search) by ``delta``."""
    users = sorted(u for u, d in delta.items() if d)
    if users:
        conn.execute(q("INSERT INTO @ucount AS uc (tenant, user_id, n) SELECT %s, u.user_id, u.d "
                       "FROM unnest(%s::text[], %s::bigint[]) AS u(user_id, d) "
                       "ON CONFLICT (tenant, user_id) DO UPDATE SET n = uc.n + excluded.n"),
                     (tenant, users, [delta[u] for u in users]))


# The context postings of some records, from their postings and their neighbours'.
CONTEXT_ROWS_SQL = """
SELECT c.tenant, c.seq, x.term, c.user_id, c.status, sum(x.tf) AS f, c.doc_len + %(w)s * c.nb_len AS clen
FROM (
    SELECT p.chunk_seq AS seq, p.term, p.tf::float8 AS tf FROM @postings p
    WHERE p.tenant = %(t)s AND p.chunk_seq = ANY(%(seqs)s)
    UNION ALL
    SELECT n.seq, p.term, %(w)s * p.tf FROM @neighbours n
    JOIN @postings p ON p.tenant = n.tenant AND p.chunk_seq = n.nb_seq
    WHERE n.tenant = %(t)s AND n.seq = ANY(%(seqs)s) AND %(w)s > 0
) x JOIN @chunks c ON c.tenant = %(t)s AND c.seq = x.seq
GROUP BY c.tenant, c.seq, x.term, c.user_id, c.status, c.doc_len, c.nb_len
"""


# The context vectors of some records: the neighbours' vector sum s and |own + vw * s|.
CONTEXT_VECTORS_SQL = """
SELECT v.tenant, v.seq, nb.s, sqrt(greatest(-(v.embedding <#> v.embedding)
    - 2 * %(vw)s * coalesce(v.embedding <#> nb.s, 0) - %(vw)s * %(vw)s * coalesce(nb.s <#> nb.s, 0), 0)) AS norm
FROM @vectors v LEFT JOIN LATERAL (
    SELECT sum(nv.embedding) AS s FROM @neighbours n JOIN @vectors nv ON nv.tenant = n.tenant AND nv.seq = n.nb_seq
    WHERE n.tenant = v.tenant AND n.seq = v.seq) nb ON true
WHERE v.tenant = %(t)s AND v.seq = ANY(%(seqs)s) AND %(vw)s > 0
"""


def refresh_context(conn: psycopg.Connection, q: Q, tenant: str, w: float, seqs: Iterable[int],
                    vw: float = 0.0) -> None:
    """Rewrite the context postings and context vectors of ``seqs`` (records gone
    meanwhile just lose theirs)."""
    seqs = sorted(set(seqs))
    if not seqs:
        return
    args = {"t": tenant, "w": float(w), "vw": float(vw), "seqs": seqs}
    conn.execute(q("DELETE FROM @cpost WHERE tenant = %(t)s AND seq = ANY(%(seqs)s)"), args)
    conn.execute(q("INSERT INTO @cpost (tenant, seq, term, user_id, status, f, clen) " + CONTEXT_ROWS_SQL), args)
    conn.execute(q("DELETE FROM @ctxvec WHERE tenant = %(t)s AND seq = ANY(%(seqs)s)"), args)
    conn.execute(q("INSERT INTO @ctxvec (tenant, seq, s, norm) " + CONTEXT_VECTORS_SQL), args)
