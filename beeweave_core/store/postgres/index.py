"""Write-side bookkeeping of the PostgreSQL backend's BM25 index, inside the caller's
transaction: postings, document frequencies and their histogram, the session
neighbours and the per-tenant statistics.

What the lexical search reads is kept exact and cheap:

* ``terms.df`` — how many live records hold each term;
* ``df_hist`` — how many terms have each df, so the mean idf over every term (rank_bm25's
  epsilon floor) is a sum over a few hundred rows however large the vocabulary;
* ``stats`` — N and the integer sums of own and neighbour lengths, so the average
  context length is exact (no floating-point drift however many writes);
* ``neighbours`` and ``chunks.nb_len`` — each record's session neighbours (``radius``
  before and after it in its (user, session), by timestamp then insertion) and the sum
  of their lengths.

Writers of one tenant are serialised by the caller (an advisory lock), so these
read-modify-write steps never interleave.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import psycopg

__all__ = ["add_postings", "remove_postings", "rethread", "bump_stats", "SessionChanges"]

# (user_id, session_id) -> positions (ts, seq) where records arrived or left.
SessionChanges = dict[tuple[str, str], list[tuple[float, int]]]


def add_postings(conn: psycopg.Connection, tenant: str, seqs: Sequence[int],
                 counts: Sequence[Mapping[str, int]]) -> None:
    """Write the postings of new records and raise their terms' df."""
    with conn.cursor().copy("COPY postings (tenant, term, chunk_seq, tf) FROM STDIN") as copy:
        for seq, tc in zip(seqs, counts):
            for term, tf in tc.items():
                copy.write_row((tenant, term, seq, tf))
    _change_df(conn, tenant, Counter(t for tc in counts for t in tc))


def remove_postings(conn: psycopg.Connection, tenant: str, seqs: Sequence[int]) -> None:
    """Delete the postings of removed records and lower their terms' df."""
    gone = conn.execute("DELETE FROM postings WHERE tenant = %s AND chunk_seq = ANY(%s) RETURNING term",
                        (tenant, list(seqs))).fetchall()
    _change_df(conn, tenant, Counter({t: -n for t, n in Counter(r[0] for r in gone).items()}))


def _change_df(conn: psycopg.Connection, tenant: str, delta: Mapping[str, int]) -> None:
    if not delta:
        return
    terms = sorted(delta)
    new_df = conn.execute(
        "INSERT INTO terms (tenant, term, df) SELECT %s, u.term, u.d FROM unnest(%s::text[], %s::int[]) AS u(term, d) "
        "ON CONFLICT (tenant, term) DO UPDATE SET df = terms.df + excluded.df RETURNING term, df",
        (tenant, terms, [delta[t] for t in terms])).fetchall()
    hist: Counter[int] = Counter()
    for term, df in new_df:
        old = df - delta[term]
        if old > 0:
            hist[old] -= 1
        if df > 0:
            hist[df] += 1
    conn.execute("DELETE FROM terms WHERE tenant = %s AND df <= 0 AND term = ANY(%s)", (tenant, terms))
    changes = sorted((d, n) for d, n in hist.items() if n)
    if changes:
        conn.execute(
            "INSERT INTO df_hist (tenant, df, n_terms) SELECT %s, u.df, u.n FROM unnest(%s::int[], %s::bigint[]) "
            "AS u(df, n) ON CONFLICT (tenant, df) DO UPDATE SET n_terms = df_hist.n_terms + excluded.n_terms",
            (tenant, [d for d, _ in changes], [n for _, n in changes]))
        conn.execute("DELETE FROM df_hist WHERE tenant = %s AND n_terms <= 0", (tenant,))


# For each changed session: up to 2*radius records before its first change, every record
# between its first and last change, and up to 2*radius after the last. The records
# within ``radius`` of a change are the ones whose neighbours may differ, and the outer
# ``radius`` on each side are their own neighbours.
_REGION_SQL = """
SELECT k.i, x.part, x.ts, x.seq, x.doc_len, x.nb_len
FROM unnest(%(u)s::text[], %(s)s::text[], %(lts)s::float8[], %(lseq)s::bigint[], %(hts)s::float8[],
            %(hseq)s::bigint[]) WITH ORDINALITY AS k(u, s, lts, lseq, hts, hseq, i)
CROSS JOIN LATERAL (
    (SELECT 0 AS part, c.ts, c.seq, c.doc_len, c.nb_len FROM chunks c
     WHERE c.tenant = %(t)s AND c.user_id = k.u AND c.session_id = k.s AND (c.ts, c.seq) < (k.lts, k.lseq)
     ORDER BY c.ts DESC, c.seq DESC LIMIT %(lim)s)
    UNION ALL
    (SELECT 1, c.ts, c.seq, c.doc_len, c.nb_len FROM chunks c
     WHERE c.tenant = %(t)s AND c.user_id = k.u AND c.session_id = k.s
       AND (c.ts, c.seq) >= (k.lts, k.lseq) AND (c.ts, c.seq) <= (k.hts, k.hseq))
    UNION ALL
    (SELECT 2, c.ts, c.seq, c.doc_len, c.nb_len FROM chunks c
     WHERE c.tenant = %(t)s AND c.user_id = k.u AND c.session_id = k.s AND (c.ts, c.seq) > (k.hts, k.hseq)
     ORDER BY c.ts, c.seq LIMIT %(lim)s)
) AS x
"""


def rethread(conn: psycopg.Connection, tenant: str, radius: int, changes: SessionChanges) -> int:
    """Recompute the neighbours of every record near a change; return the change of the
    tenant's total neighbour length. Records that left a session must already have had
    their neighbours cleared (``nb_len`` 0)."""
    if radius <= 0 or not changes:
        return 0
    keys = list(changes)
    lo = [min(changes[k]) for k in keys]
    hi = [max(changes[k]) for k in keys]
    rows = conn.execute(_REGION_SQL, {
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
        conn.execute("DELETE FROM neighbours WHERE tenant = %s AND seq = ANY(%s)", (tenant, seqs))
        conn.execute("INSERT INTO neighbours (tenant, seq, nb_seq) SELECT %s, a, b FROM unnest(%s::bigint[], "
                     "%s::bigint[]) AS u(a, b)", (tenant, pairs_a, pairs_b))
        conn.execute("UPDATE chunks c SET nb_len = u.v FROM unnest(%s::bigint[], %s::bigint[]) AS u(s, v) "
                     "WHERE c.tenant = %s AND c.seq = u.s AND c.nb_len <> u.v", (seqs, nb_lens, tenant))
    return delta


def bump_stats(conn: psycopg.Connection, tenant: str, *, docs: int = 0, length: int = 0, nb_length: int = 0,
               dim: int | None = None) -> None:
    conn.execute(
        "INSERT INTO stats (tenant, n_docs, total_len, total_nb_len, dim) VALUES (%s, %s, %s, %s, %s) "
        "ON CONFLICT (tenant) DO UPDATE SET n_docs = stats.n_docs + excluded.n_docs, "
        "total_len = stats.total_len + excluded.total_len, "
        "total_nb_len = stats.total_nb_len + excluded.total_nb_len, dim = coalesce(excluded.dim, stats.dim)",
        (tenant, docs, length, nb_length, dim))
