"""SQL for the PostgreSQL backend's reads: a Filter as a WHERE clause (the embedded
backend's filter semantics, store/columns.py), a record as ``get`` returns it, a scan in
order, and the exact nearest-records read of a linking pass whose local index cannot
answer (links.py). Searches are answered by the local index (local.py), not in SQL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ...errors import InvalidInputError, StoreUnavailableError
from ...fields import FIELD_NAME
from ...filters import Filter

__all__ = ["one", "filter_sql", "field_expr", "clean", "qualify", "scan_sql", "NEAREST_SQL", "GET_SQL",
           "GET_WITH_RIVALS_SQL", "GET_CHECKED_SQL"]


def one(row: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """The row a statement that always returns one returned."""
    if row is None:
        raise StoreUnavailableError("PostgreSQL returned no row where one was due")
    return row


_TABLE = re.compile(r"@([a-z_]+)")


def qualify(text: str, schema: str, vschema: str) -> str:
    """Every ``@name`` as a schema-qualified name, ``@vector`` and ``@vector_*`` as pgvector's type
    and functions, and ``<#>``
    and ``<->`` as pgvector's operators: no statement depends on a connection's search_path, so the SQL is
    the same through a transaction pooler (PgBouncer), where session settings do not hold."""
    def name(m: re.Match[str]) -> str:
        pgvector = m.group(1) == "vector" or m.group(1).startswith("vector_")
        return f'"{vschema if pgvector else schema}".{m.group(1)}'

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


# A record as get() returns it: the document, the access counts from their side table,
# and the outgoing relationships.
_RECORD_COLUMNS = """c.id, c.doc::text, a.n, a.last,
    (SELECT json_agg(json_build_array(e.dst, e.type, e.weight) ORDER BY e.dst, e.type)::text
     FROM @edges e WHERE e.tenant = c.tenant AND e.src = c.id)"""

# A record's access counts by key, never by a join the planner may turn into a hash join over
# the tenant's whole access table: with no statistics yet (a table just bulk-loaded, before
# autovacuum's ANALYZE) it underestimated the table and read all of it, most of a small read's
# time (benchmarks/history/postgres.md). LIMIT 1 keeps PostgreSQL from flattening the subquery
# back into a join.
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

# ``GET_WITH_RIVALS_SQL`` after the change log's last seq, read in the same statement's
# snapshot (one row with no record when none is asked for or left): an optimistic local
# search's records and the check that its ranking was current.
GET_CHECKED_SQL = """SELECT f.high, r.* FROM (SELECT coalesce(max(seq), 0) AS high
    FROM @changes WHERE tenant = %(t)s) f
LEFT JOIN LATERAL (""" + GET_WITH_RIVALS_SQL + """) r ON true"""

# The nearest records of a query vector by an exact scan of those passing the filter ({flt}
# over ``c``): a linking pass's read when no local index answers it (links.py), which
# scopes it to one user. Ties in insertion order, as the local index's.
NEAREST_SQL = """SELECT c.id, -(v.embedding <#> %(q)s::@vector) AS score
FROM @chunks c JOIN @vectors v ON v.tenant = c.tenant AND v.seq = c.seq
WHERE c.tenant = %(t)s AND v.dim = %(d)s {flt}
ORDER BY v.embedding <#> %(q)s::@vector, c.seq LIMIT %(k)s"""


def scan_sql(flt: Filter, *, order: str = "timestamp", limit: int | None = None, descending: bool = False,
             columns: str = "c.id") -> tuple[str, dict[str, Any]]:
    """A scan's statement (unqualified) and its parameters but the tenant ``t``: the
    ``columns`` of the records passing ``flt``, by timestamp or by insertion."""
    where, args = filter_sql(flt)
    direction = "DESC" if descending else "ASC"
    order_by = f"c.ts {direction}, c.seq {direction}" if order == "timestamp" else f"c.seq {direction}"
    lim = "" if limit is None else " LIMIT %(lim)s"
    return (f"SELECT {columns} FROM @chunks c WHERE c.tenant = %(t)s{where} ORDER BY {order_by}{lim}",
            {"lim": max(int(limit or 0), 0), **args})
