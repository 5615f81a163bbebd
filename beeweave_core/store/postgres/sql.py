"""SQL for the PostgreSQL backend's reads: a Filter as a WHERE clause, BM25 with session
context over the context postings, dense search, and a whole search's candidates in one
statement.

Both reproduce the embedded backend exactly (store/columns.py and bm25.py): the same
filter semantics, and the same Okapi BM25 — Lucene's idf over every live record, length
normalised by each record's context length, term counts spread to session neighbours.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ...errors import InvalidInputError
from ...fields import FIELD_NAME
from ...filters import Filter

__all__ = ["one", "filter_sql", "split_filter", "narrowed", "clean", "qualify", "LEXICAL_SQL", "VECTOR_SQL", "VECTOR_SCORES_SQL",
           "SEARCH_SQL", "GET_SQL", "GET_WITH_RIVALS_SQL", "GET_CHECKED_SQL", "LEX_PLAIN", "LEX_FILTERED",
           "POSTINGS_PLAIN", "POSTINGS_FILTERED", "FILTERED_CTES", "EST_USERS", "EST_FILTERED",
           "EXACT_FROM_USERS", "EXACT_FROM_FILTERED"]

def one(row: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """The row a statement that always returns one returned."""
    if row is None:
        from ...errors import StoreUnavailableError

        raise StoreUnavailableError("PostgreSQL returned no row where one was due")
    return row


_TABLE = re.compile(r"@([a-z_]+)")


def qualify(text: str, schema: str, vschema: str) -> str:
    """Every ``@name`` as a schema-qualified name, ``@vector`` as pgvector's type and ``<#>``
    and ``<->`` as pgvector's operators: no statement depends on a connection's search_path, so the SQL is
    the same through a transaction pooler (PgBouncer), where session settings do not hold."""
    def name(m: re.Match[str]) -> str:
        return f'"{vschema}".vector' if m.group(1) == "vector" else f'"{schema}".{m.group(1)}'

    out = _TABLE.sub(name, text)
    for op in ("<#>", "<->"):
        out = out.replace(op, f'OPERATOR("{vschema}".{op})')
    return out


def clean(values: Iterable[str]) -> list[str]:
    """Values PostgreSQL can compare: text cannot hold NUL, and a value with one is never stored."""
    return [v for v in values if "\x00" not in v]


def filter_sql(flt: Filter | None, alias: str = "c", prefix: str = "f") -> tuple[str, dict[str, Any]]:
    """``AND ...`` conditions over the chunks table aliased ``alias``, with named parameters
    (``%(f0)s``...), so a statement can use the same filter twice."""
    if flt is None:
        return "", {}
    parts: list[str] = []
    args: dict[str, Any] = {}

    def arg(value: Any) -> str:
        name = f"{prefix}{len(args)}"
        args[name] = value
        return f"%({name})s"

    for column, values in (("user_id", flt.user_ids), ("agent_id", flt.agent_ids),
                           ("session_id", flt.session_ids), ("status", flt.statuses), ("ctype", flt.types),
                           ("intent", flt.intents), ("id", flt.ids), ("tier", flt.tiers)):
        if values is not None:
            parts.append(f"{alias}.{column} = ANY({arg(clean(values))}::text[])")
    if flt.tags_any is not None:
        parts.append(f"{alias}.tags && {arg(clean(flt.tags_any))}::text[]")
    if flt.tags_all is not None:
        every = list(flt.tags_all)
        if len(clean(every)) < len(every):
            parts.append("false")  # a tag with NUL is never stored, so no record has all of them
        else:
            parts.append(f"{alias}.tags @> {arg(every)}::text[]")
    if flt.entities is not None:
        parts.append(f"{alias}.entities && {arg(clean(flt.entities))}::text[]")
    if flt.since is not None:
        parts.append(f"{alias}.ts >= {arg(flt.since.timestamp())}")
    if flt.until is not None:
        parts.append(f"{alias}.ts <= {arg(flt.until.timestamp())}")
    for name, _kind, wanted in flt.fields or ():
        # jsonb equality is the filter's reading (docs/retrieval.md): numbers as numbers,
        # never equal to booleans or strings; a text value with NUL is never stored
        kept = [json.dumps(v) for v in wanted if not (isinstance(v, str) and "\x00" in v)]
        if not kept:
            parts.append("false")
        else:
            parts.append(f"{field_expr(name, alias)} IN ({', '.join(arg(v) + '::jsonb' for v in kept)})")
    return "".join(f" AND {p}" for p in parts), args




def field_expr(name: str, alias: str = "") -> str:
    """``metadata[name]`` of a chunk as jsonb, spelled exactly as its index (store.index_field)
    so the planner uses it: the name is a literal there, hence the identifier check."""
    if not FIELD_NAME.match(name):
        raise InvalidInputError(f"field name {name!r} must be an identifier")
    return f"(({alias + '.' if alias else ''}doc -> 'metadata' -> '{name}')::jsonb)"


def narrowed(flt: Filter | None) -> bool:
    """Whether the filter says more than user and status (see split_filter)."""
    return bool(split_filter(flt)[1])


def split_filter(flt: Filter | None) -> tuple[str, str, dict[str, Any]]:
    """The filter as (conditions on the context postings ``cp``: user and status, the rest
    on the chunks ``c``, named parameters); the rest is empty for the usual one-user search,
    which then reads nothing but the context postings' index."""
    if flt is None:
        return "", "", {}
    own = Filter(user_ids=flt.user_ids, statuses=flt.statuses)
    rest = flt.replace(user_ids=None, statuses=None)
    cpf, a1 = filter_sql(own, "cp", "p")
    restf, a2 = filter_sql(rest, "c", "r")
    return cpf, restf, {**a1, **a2}


# The statements' named parameters: t (tenant), terms and qtfs (the query), heavy (its
# evidence terms for calibrated relevance, empty but in a search), w (the lexical
# context weight, 0 without context), k1, b, k (how many), include (ids to score as
# well), q (the query vector) and vw (the vector context weight); ``{cpf}`` is the filter's
# user and status over the context postings ``cp``, ``{rest}`` the rest of it over ``c``,
# ``{flt}`` all of it over ``c``; ``{d}`` is the query's dimension.
#
# BM25 (as bm25.py: Lucene's idf, log(1 + (N - df + .5) / (df + .5)) spelled as bm25_idf
# spells it, always positive, so no floor and no mean idf; Okapi's saturation): N and the
# lengths from the stats row, df from terms, all in float8; each
# record's term frequency with context and its context length come precomputed in the
# context postings, so a query term costs one range scan of the covering index
# cpost_search, and a one-user search reads no record until its top candidates.
# _QI_CTES ends at the query terms' weights (qi), which benchmarks/pg_maxscore.py reads too.
_QI_CTES = """{fs}
st AS (
    SELECT n_docs::float8 AS n, (total_len + %(w)s * total_nb_len)::float8 / n_docs AS avgdl
    FROM @stats WHERE tenant = %(t)s AND n_docs > 0
), qi AS (
    SELECT q.term, q.qtf * (ln(st.n + 1) - ln(t.df::float8 + 0.5)) AS wt, t.df,
           q.term = ANY(%(heavy)s::text[]) AS heavy
    FROM unnest(%(terms)s::text[], %(qtfs)s::float8[]) AS q(term, qtf)
    JOIN @terms t ON t.tenant = %(t)s AND t.term = q.term AND t.df > 0
    CROSS JOIN st
)"""
_BM25_CTES = _QI_CTES + """, lex AS ({lex}), ltop AS MATERIALIZED (
    SELECT seq, score FROM lex ORDER BY score DESC, seq LIMIT %(k)s
)"""

# One context posting's BM25 contribution.
_BM25_POSTING = """qi.wt * (cp.f * (%(k1)s + 1)) / (cp.f + %(k1)s * (1 - %(b)s + %(b)s * cp.clen / st.avgdl))"""

# The BM25 contribution of every context posting of the query terms when the filter is
# only user and status, read from the covering index in (term, user, status) order; a
# record's score is the sum of its postings' (LEX_PLAIN).
POSTINGS_PLAIN = """
    SELECT cp.seq, qi.term, qi.heavy, """ + _BM25_POSTING + """ AS s
    FROM qi JOIN @cpost cp ON cp.tenant = %(t)s AND cp.term = qi.term {cpf}
    CROSS JOIN st"""

# Any other filter (session, agent, tags, time, metadata...) is applied where the
# candidates are generated, over ``fs``: the records that pass it (FILTERED_CTES). When
# they are few beside the query terms' postings, each one's context postings are read by
# key (a session of 20 records: 20 x terms lookups instead of every posting of the
# terms); when they are many, the terms' postings are read as in POSTINGS_PLAIN and kept if
# their record is in ``fs`` (a hash semi-join). A lookup names every key column of
# cpost_search (term, user, status, seq), so it is one index-only probe: on seq and term
# alone the planner picked that index anyway and read the term's whole range per record
# (40 ms for a session at 100k). Both are one-time conditions on counts,
# so only one branch runs, and both read the same postings: only the summation order
# may differ (by ~1e-16). Before, every scored record was looked up by key and then
# filtered: ~1.1 s for a session at 100k.
POSTINGS_FILTERED = """
    SELECT cp.seq, qi.term, qi.heavy, """ + _BM25_POSTING + """ AS s
    FROM fs CROSS JOIN qi
    JOIN @cpost cp ON cp.tenant = %(t)s AND cp.term = qi.term AND cp.user_id = fs.user_id AND cp.status = fs.status
                      AND cp.seq = fs.seq
    CROSS JOIN st
    WHERE (SELECT n FROM fsn) * %(by_key)s <= (SELECT coalesce(sum(df), 0) FROM qi)
    UNION ALL
    SELECT cp.seq, qi.term, qi.heavy, """ + _BM25_POSTING + """ AS s
    FROM qi JOIN @cpost cp ON cp.tenant = %(t)s AND cp.term = qi.term {cpf}
    CROSS JOIN st
    WHERE (SELECT n FROM fsn) * %(by_key)s > (SELECT coalesce(sum(df), 0) FROM qi)
      AND cp.seq IN (SELECT seq FROM fs)"""

# Each record's BM25 score: the sum of its postings' contributions ({postings} is
# POSTINGS_PLAIN or POSTINGS_FILTERED).
_LEX = """
    SELECT seq, sum(s) AS score FROM ({postings}) p GROUP BY seq"""
LEX_PLAIN = _LEX.replace("{postings}", POSTINGS_PLAIN)
LEX_FILTERED = _LEX.replace("{postings}", POSTINGS_FILTERED)

# The records that pass a filter beyond user and status, and how many: read once through
# the filter's indexes (session, tags, agent, time, declared fields) and shared by the
# lexical and dense sides.
FILTERED_CTES = """
fs AS MATERIALIZED (SELECT c.seq, c.user_id, c.status FROM @chunks c WHERE c.tenant = %(t)s {flt}),
fsn AS (SELECT count(*) AS n FROM fs),"""

LEXICAL_SQL = "WITH " + _BM25_CTES + """
SELECT c.id, t.score FROM ltop t JOIN @chunks c ON c.tenant = %(t)s AND c.seq = t.seq
UNION ALL
SELECT c.id, coalesce(s.score, 0) FROM unnest(%(include)s::text[]) AS inc(id)
JOIN @chunks c ON c.tenant = %(t)s AND c.id = inc.id
LEFT JOIN lex s ON s.seq = c.seq
WHERE c.seq NOT IN (SELECT seq FROM ltop) {flt}
"""

# Dense search: the graph (the per-dimension partial HNSW index, which matches the
# expression ``embedding::vector(d)``) when the candidates may be many — more than
# ``exact_limit`` by the user counts or N, unless the caller knows better (``graph``) —
# and the exact scan when they are few or the walk came back short (pgvector filters
# after the walk). Both are one-time conditions: the branch not taken is never run. A
# tenant whose SQL search is off keeps its vectors out of the graph (``v.graph``): for it
# the walk finds nothing and the exact scan answers.
_VECTOR_CTES = """
est AS ({est}), vh AS MATERIALIZED (
    SELECT v.seq, v.embedding::@vector({d}) <#> %(q)s::@vector({d}) AS dist
    FROM @vectors v JOIN @chunks c ON c.tenant = v.tenant AND c.seq = v.seq
    WHERE v.tenant = %(t)s AND v.dim = {d} AND v.graph AND %(graph)s AND (SELECT n FROM est) > %(exact_limit)s {flt}
    ORDER BY v.embedding::@vector({d}) <#> %(q)s::@vector({d}) LIMIT %(vk)s
), ve AS MATERIALIZED (
    SELECT v.seq, v.embedding <#> %(q)s::@vector AS dist
    FROM {exact_from} AND v.dim = {d} AND (SELECT count(*) FROM vh) < %(vk)s
    ORDER BY dist, v.seq LIMIT %(vk)s
), vtop AS (
    SELECT seq, dist, CASE WHEN (SELECT count(*) FROM vh) > 0 THEN 'hnsw+exact' ELSE 'exact' END AS path FROM ve
    UNION ALL
    SELECT seq, dist, 'hnsw' FROM vh WHERE NOT EXISTS (SELECT 1 FROM ve)
)"""

# The dense candidates' estimate: the user counts (a filter of user and status), or the
# records that pass the filter, counted (fsn), so a selective filter takes the exact scan
# at once instead of walking the graph for rows it drops.
EST_USERS = """
    SELECT CASE WHEN %(users)s::text[] IS NULL
                THEN (SELECT coalesce(max(n_docs), 0) FROM @stats WHERE tenant = %(t)s)
                ELSE (SELECT coalesce(sum(n), 0) FROM @ucount WHERE tenant = %(t)s AND user_id = ANY(%(users)s))
           END AS n"""
EST_FILTERED = "SELECT n FROM fsn"

# The exact scan's records: those passing the filter, or under a filter beyond user and
# status the records of ``fs`` by key (a scan of the chunks again took 0.2 s at 100k).
EXACT_FROM_USERS = """@chunks c JOIN @vectors v ON v.tenant = c.tenant AND v.seq = c.seq
    WHERE c.tenant = %(t)s {flt}"""
EXACT_FROM_FILTERED = """fs JOIN @vectors v ON v.tenant = %(t)s AND v.seq = fs.seq
    WHERE true"""

# The last column is the candidates' estimate (est), which tells the store to build the
# graph (store._maybe_index).
VECTOR_SQL = "WITH {fs}" + _VECTOR_CTES + """
SELECT c.id, -t.dist, t.path, t.seq, (SELECT n FROM est) FROM vtop t JOIN @chunks c ON c.tenant = %(t)s AND c.seq = t.seq
UNION ALL
SELECT NULL, NULL, NULL, dim, (SELECT n FROM est) FROM @stats WHERE tenant = %(t)s AND NOT EXISTS (SELECT 1 FROM vtop)
"""

# Cosine of q with each record's context vector normalise(own + vw * sum of neighbours'),
# from inner products (pgvector has no scalar product): with a the own vector and s the
# neighbours' sum, (a + vw s).q / |a + vw s|, |a + vw s|^2 = a.a + 2 vw a.s + vw^2 s.s.
# Without context weight the own cosine, unnormalised (as the embedded index).
# The neighbours' sum s and the norm come precomputed from ctxvec (index.refresh_context).
_CONTEXT_SCORE = """
    CASE WHEN %(vw)s > 0 THEN
        (-(v.embedding <#> %(q)s::@vector) - %(vw)s * coalesce(nb.s <#> %(q)s::@vector, 0))
        / greatest(nb.norm, 1e-12)
    ELSE -(v.embedding <#> %(q)s::@vector) END"""

_NEIGHBOUR_SUM = """
    LEFT JOIN @ctxvec nb ON nb.tenant = v.tenant AND nb.seq = v.seq"""

VECTOR_SCORES_SQL = """
SELECT c.id, """ + _CONTEXT_SCORE + """
FROM @chunks c JOIN @vectors v ON v.tenant = c.tenant AND v.seq = c.seq""" + _NEIGHBOUR_SUM + """
WHERE c.tenant = %(t)s AND c.id = ANY(%(ids)s) AND v.dim = {d}
"""

# A record as get() returns it: the document, the access counts from their side table,
# and the outgoing relationships.
_RECORD_COLUMNS = """c.id, c.doc::text, a.n, a.last,
    (SELECT json_agg(json_build_array(e.dst, e.type, e.weight) ORDER BY e.dst, e.type)::text
     FROM @edges e WHERE e.tenant = c.tenant AND e.src = c.id)"""

# A record's access counts by key, never by a join the planner may turn into a hash join over
# the tenant's whole access table: with no statistics yet (a table just bulk-loaded, before
# autovacuum's ANALYZE) it estimated 45 rows for 10,000 and read them all, 1.4 of a 10-record
# read's 1.9 ms (measured in benchmarks/scale.py's fresh server). LIMIT 1 keeps PostgreSQL from
# flattening the subquery back into a join.
_ACCESS_BY_KEY = """LEFT JOIN LATERAL (SELECT a.n, a.last FROM @access a
    WHERE a.tenant = c.tenant AND a.seq = c.seq LIMIT 1) a ON true"""

GET_SQL = "SELECT " + _RECORD_COLUMNS + """
FROM @chunks c """ + _ACCESS_BY_KEY + """
WHERE c.tenant = %(t)s AND c.id = ANY(%(ids)s)
"""

# ``GET_SQL`` with each record's incoming ``contradicts`` relationships (its outgoing ones
# are among its edges): a hit is shown with its rivals (Graph.with_contradictions), and a
# local-index search reading them with the records is spared a round trip (edges_dst).
GET_WITH_RIVALS_SQL = "SELECT " + _RECORD_COLUMNS + """,
    (SELECT json_agg(json_build_array(e.src, e.weight) ORDER BY e.src)::text
     FROM @edges e WHERE e.tenant = c.tenant AND e.dst = c.id AND e.type = 'contradicts')
FROM @chunks c """ + _ACCESS_BY_KEY + """
WHERE c.tenant = %(t)s AND c.id = ANY(%(ids)s)
"""

# ``GET_WITH_RIVALS_SQL`` after the change log's last seq and the SQL-search setting, read
# in the same statement's snapshot (one row with no record when none is asked for or left):
# an optimistic local search's records and the check that its ranking was current.
GET_CHECKED_SQL = """SELECT f.high, f.setting, r.* FROM (SELECT coalesce(max(seq), 0) AS high,
    (SELECT value FROM @meta WHERE tenant = %(t)s AND key = 'sql_search') AS setting
    FROM @changes WHERE tenant = %(t)s) f
LEFT JOIN LATERAL (""" + GET_WITH_RIVALS_SQL + """) r ON true"""

# A search's BM25 side also gives calibrated relevance its lexical evidence
# (relevance.lexical_evidence) for the query's evidence terms (``heavy``): each term's best
# single-term score in scope (the max of its postings' contributions: a single-term query
# weighs its term qtf * idf, as here) and each record's sum of its positive contributions
# from those terms. The postings ({postings} as in _LEX) are read once and aggregated both
# ways by GROUPING SETS, whose rows (by record: seq set; by term: seq NULL) are materialized
# once, as ``lex`` was without the evidence. At 100k memories that added 15-29 ms to the
# statement, against 49-56 for a MATERIALIZED CTE of the postings aggregated twice and
# 31-42 for reading the evidence terms' postings a second time; the second round trip it
# replaces cost 84-92 ms (benchmarks/pg_profile.py --evidence, RESULTS.md).
_SEARCH_BM25_CTES = _QI_CTES + """, lex AS (
    SELECT seq, term, sum(s) AS score, sum(s) FILTER (WHERE s > 0 AND heavy) AS heavy, max(s) AS best
    FROM ({postings}) p GROUP BY GROUPING SETS ((seq), (term))
), ltop AS MATERIALIZED (
    SELECT seq, score FROM lex WHERE seq IS NOT NULL ORDER BY score DESC, seq LIMIT %(k)s
), tbest AS (
    SELECT term, best FROM lex WHERE seq IS NULL AND term IN (SELECT term FROM qi WHERE heavy)
)"""

# A whole search in one statement: the lexical top k (BM25 with context), the dense top
# k, and for their union each candidate's BM25 score, context-vector score, the fields
# ranking reads and the record, the dense candidates' estimate (as VECTOR_SQL), and the
# lexical evidence of calibrated relevance (each candidate's, and the terms' bests: the
# same in every row).
SEARCH_SQL = "WITH " + _SEARCH_BM25_CTES + "," + _VECTOR_CTES + """,
cand AS (SELECT seq FROM ltop UNION SELECT seq FROM vtop)
SELECT c.id, coalesce(l.score, 0), """ + _CONTEXT_SCORE + """,
    c.doc->>'timestamp', c.doc->>'weight', c.doc->>'confidence', c.doc->>'pinned', c.doc->'metadata'->'stale',
    c.doc->>'reinforced_at', c.doc->>'expires_at', """ + _RECORD_COLUMNS + """, (SELECT n FROM est),
    coalesce(l.heavy, 0), (SELECT array_agg(term ORDER BY term) FROM tbest), (SELECT array_agg(best ORDER BY term) FROM tbest)
FROM cand JOIN @chunks c ON c.tenant = %(t)s AND c.seq = cand.seq
JOIN @vectors v ON v.tenant = c.tenant AND v.seq = c.seq
""" + _ACCESS_BY_KEY + """
LEFT JOIN lex l ON l.seq = cand.seq""" + _NEIGHBOUR_SUM + """
"""
