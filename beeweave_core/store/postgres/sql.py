"""SQL for the PostgreSQL backend's reads: a Filter as a WHERE clause, and BM25 with
session context as one statement.

Both reproduce the embedded backend exactly (store/columns.py and bm25.py): the same
filter semantics, and the same Okapi BM25 — idf over every live record with
rank_bm25's epsilon floor at the mean idf of all terms, length normalised by each
record's context length, term counts spread to session neighbours.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...filters import Filter

__all__ = ["filter_sql", "clean", "LEXICAL_SQL"]


def clean(values: Iterable[str]) -> list[str]:
    """Values PostgreSQL can compare: text cannot hold NUL, and a value with one is never stored."""
    return [v for v in values if "\x00" not in v]


def filter_sql(flt: Filter | None, alias: str = "c") -> tuple[str, dict[str, Any]]:
    """``AND ...`` conditions over the chunks table aliased ``alias``, with named parameters
    (``%(f0)s``...), so a statement can use the same filter twice."""
    if flt is None:
        return "", {}
    parts: list[str] = []
    args: dict[str, Any] = {}

    def arg(value: Any) -> str:
        name = f"f{len(args)}"
        args[name] = value
        return f"%({name})s"

    for column, values in (("user_id", flt.user_ids), ("agent_id", flt.agent_ids),
                           ("session_id", flt.session_ids), ("status", flt.statuses), ("ctype", flt.types),
                           ("intent", flt.intents), ("id", flt.ids)):
        if values is not None:
            parts.append(f"{alias}.{column} = ANY({arg(clean(values))}::text[])")
    if flt.tags_any is not None:
        parts.append(f"{alias}.tags && {arg(clean(flt.tags_any))}::text[]")
    if flt.tags_all is not None:
        values = list(flt.tags_all)
        if len(clean(values)) < len(values):
            parts.append("false")  # a tag with NUL is never stored, so no record has all of them
        else:
            parts.append(f"{alias}.tags @> {arg(values)}::text[]")
    if flt.entities is not None:
        parts.append(f"{alias}.entities && {arg(clean(flt.entities))}::text[]")
    if flt.since is not None:
        parts.append(f"{alias}.ts >= {arg(flt.since.timestamp())}")
    if flt.until is not None:
        parts.append(f"{alias}.ts <= {arg(flt.until.timestamp())}")
    return "".join(f" AND {p}" for p in parts), args


# Named parameters: t (tenant), terms and qtfs (the query), w (the lexical context
# weight, 0 without context), k1, b, eps, k, include, and the filter's own; ``{flt}`` is
# the filter over ``c``.
#
# N and the lengths come from the stats row, df from terms, the mean idf from the df
# histogram, so a search reads only the postings of its query terms, their neighbours
# and their records: never a whole table. Neighbours and records are fetched by key in
# LATERAL subqueries fenced with OFFSET 0, and filtered outside them: right after a bulk
# load the planner's statistics are stale, and it would otherwise scan a user's
# records once per posting.
LEXICAL_SQL = """
WITH st AS (
    SELECT n_docs::float8 AS n, (total_len + %(w)s * total_nb_len)::float8 / n_docs AS avgdl
    FROM stats WHERE tenant = %(t)s AND n_docs > 0
), mean AS (
    SELECT sum(h.n_terms * (ln(st.n - h.df + 0.5) - ln(h.df + 0.5))) / sum(h.n_terms) AS idf
    FROM df_hist h, st WHERE h.tenant = %(t)s AND h.df > 0 AND h.n_terms > 0
), q AS (
    SELECT term, qtf FROM unnest(%(terms)s::text[], %(qtfs)s::float8[]) AS q(term, qtf)
), qi AS (
    SELECT q.term, q.qtf * CASE WHEN r.raw < 0 THEN %(eps)s * mean.idf ELSE r.raw END AS wt
    FROM q JOIN terms t ON t.tenant = %(t)s AND t.term = q.term AND t.df > 0
    CROSS JOIN st CROSS JOIN mean
    CROSS JOIN LATERAL (SELECT ln(st.n - t.df + 0.5) - ln(t.df + 0.5) AS raw) r
), p AS (
    SELECT p.term, p.chunk_seq AS seq, p.tf::float8 AS tf
    FROM qi JOIN postings p ON p.tenant = %(t)s AND p.term = qi.term
), spread AS (
    SELECT term, seq, tf FROM p
    UNION ALL
    SELECT p.term, n.nb_seq, %(w)s * p.tf FROM p CROSS JOIN LATERAL (
        SELECT nb_seq FROM neighbours n WHERE n.tenant = %(t)s AND n.seq = p.seq OFFSET 0) n
    WHERE %(w)s > 0
), f AS (
    SELECT term, seq, sum(tf) AS f FROM spread GROUP BY term, seq
), scored AS (
    SELECT c.id, c.seq,
           sum(qi.wt * (f.f * (%(k1)s + 1)) / (f.f + %(k1)s * (1 - %(b)s + %(b)s
               * (c.doc_len + %(w)s * c.nb_len) / st.avgdl))) AS score
    FROM f JOIN qi USING (term) CROSS JOIN st
    CROSS JOIN LATERAL (SELECT * FROM chunks c WHERE c.tenant = %(t)s AND c.seq = f.seq OFFSET 0) c
    WHERE true {flt}
    GROUP BY c.id, c.seq
), top AS (
    SELECT id, score FROM scored ORDER BY score DESC, seq LIMIT %(k)s
)
SELECT id, score FROM top
UNION ALL
SELECT c.id, coalesce(s.score, 0) FROM unnest(%(include)s::text[]) AS inc(id)
CROSS JOIN LATERAL (SELECT * FROM chunks c WHERE c.tenant = %(t)s AND c.id = inc.id OFFSET 0) c
LEFT JOIN scored s ON s.seq = c.seq
WHERE c.id NOT IN (SELECT id FROM top) {flt}
"""
