"""The reads of a linking pass (store/links.py) on PostgreSQL, in one round trip.

Every statement of a ``LinkReads`` is sent before any result is read, inside the caller's
pipelined transaction (the insert of the memories being linked, which they therefore
see; sent before the insert reads the session region, so they share its round trip): the nearest records as ``vector_search`` asks them, each session's ids with the
session edges out of them (one statement: the edges of the ids a subquery scans), and the
newest records sharing a tag or entity with their labels. Each answer equals the protocol
method's (tested against links.read_links in tests/postgres/test_pg_links.py). They are
reads: never prepared, even in a store that prepares its writes (``prepare_writes``), where
a generic plan would misjudge the vector search and the scans.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg

from ...records import Relationship, RelationType
from ..links import LinkFacts, LinkReads
from .sql import filter_sql, narrowed

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["read", "send", "receive", "Sent"]

_SESSION_EDGES_SQL = (
    "SELECT e.src, e.dst, e.type, e.weight FROM @edges e WHERE e.tenant = %(t)s AND e.type = %(etype)s "
    "AND e.src IN (SELECT c.id FROM @chunks c WHERE c.tenant = %(t)s{flt}) ORDER BY e.src, e.dst, e.type")


@dataclass
class Sent:
    """The cursors of a ``LinkReads`` whose statements are sent and whose rows are not yet read."""

    similar: list[tuple[np.ndarray, psycopg.Cursor[Any] | None, bool]]
    sessions: list[tuple[psycopg.Cursor[Any], psycopg.Cursor[Any]]]
    shared: list[psycopg.Cursor[Any]]
    near: list[list[tuple[str, float]]] | None = None  # the similar reads, answered by a local index


def read(store: PostgresStore, conn: psycopg.Connection, reads: LinkReads) -> LinkFacts:
    """``reads`` answered on ``conn`` (in a pipeline): all statements out, then all rows in."""
    return receive(store, send(store, conn, reads))


def send(store: PostgresStore, conn: psycopg.Connection, reads: LinkReads,
         near: list[list[tuple[str, float]]] | None = None) -> Sent:
    """Send the statements of ``reads`` on ``conn`` (in a pipeline) without waiting; ``near``:
    the answers of its similar reads, already known (a local index's), which then send nothing."""
    similar: list[tuple[np.ndarray, psycopg.Cursor[Any] | None, bool]] = []
    for vector, scope, k in [] if near is not None else reads.similar:
        q = np.asarray(vector, np.float32)
        if k <= 0:
            similar.append((q, None, False))
            continue
        stmt, params = store._vector_sql(q, scope, k, False)  # noqa: SLF001
        store._settings(conn, k, narrowed(scope))  # noqa: SLF001
        similar.append((q, conn.execute(stmt, params, prepare=False), bool(params["graph"])))
    if any(cur is not None for _, cur, _ in similar):
        # The search settings are SET LOCAL: back to the defaults for the rest of the
        # transaction (the insert's context statements, the edges), planned as without them.
        for setting in store._search_settings:  # noqa: SLF001
            conn.execute(f"SET LOCAL {setting.split()[2]} TO DEFAULT", prepare=False)
    sessions = []
    for scope in reads.sessions:
        stmt, params = store._scan_sql(scope, order="timestamp")  # noqa: SLF001
        where, args = filter_sql(scope)
        edges = conn.execute(store._q(_SESSION_EDGES_SQL.format(flt=where)),  # noqa: SLF001
                             {"t": store.tenant, "etype": RelationType.SESSION.value, **args}, prepare=False)
        sessions.append((conn.execute(stmt, params, prepare=False), edges))
    shared = []
    for scope, limit in reads.shared:
        stmt, params = store._scan_sql(scope, order="timestamp", descending=True, limit=limit,  # noqa: SLF001
                                       columns="c.id, c.tags, c.entities")
        shared.append(conn.execute(stmt, params, prepare=False))
    return Sent(similar, sessions, shared, near)


def receive(store: PostgresStore, sent: Sent) -> LinkFacts:
    """The answers of ``send``'s statements (the first read waits for them all)."""
    found_similar: list[list[tuple[str, float]]] = sent.near if sent.near is not None else [
        [] if cur is None else store._vector_hits(q, cur.fetchall(), graph)  # noqa: SLF001
        for q, cur, graph in sent.similar]
    found_sessions = [([r[0] for r in ids.fetchall()], [Relationship(s, d, t, w) for s, d, t, w in edges.fetchall()])
                      for ids, edges in sent.sessions]
    labels: dict[str, tuple[list[str], list[str]]] = {}
    found_shared = []
    for cur in sent.shared:
        rows = cur.fetchall()
        found_shared.append([r[0] for r in rows])
        labels.update((r[0], (list(r[1]), list(r[2]))) for r in rows)
    return LinkFacts(found_similar, found_sessions, found_shared, labels)
