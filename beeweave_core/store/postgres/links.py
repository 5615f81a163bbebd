"""The reads of a linking pass (store/links.py) on PostgreSQL, in one round trip.

Every statement of a ``LinkReads`` is sent before any result is read, inside the caller's
pipelined transaction (the insert of the memories being linked, which they therefore
see; sent before the insert's last statements, so they share a round trip): the nearest
records (unless the local index answered them: ``near``) by an exact scan of the read's
scope, each session's ids with the session edges out of them (one statement: the edges
of the ids a subquery scans), and the newest records sharing a tag or entity with their
labels. Each answer equals the protocol method's (tested against links.read_links in
tests/postgres/test_pg_links.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg

from ...records import Relationship, RelationType
from ..links import LinkFacts, LinkReads
from .connection import Database
from .sql import NEAREST_SQL, filter_sql, scan_sql

__all__ = ["send", "receive", "Sent"]

_SESSION_EDGES_SQL = (
    "SELECT e.src, e.dst, e.type, e.weight FROM @edges e WHERE e.tenant = %(t)s AND e.type = %(etype)s "
    "AND e.src IN (SELECT c.id FROM @chunks c WHERE c.tenant = %(t)s{flt}) ORDER BY e.src, e.dst, e.type")


@dataclass
class Sent:
    """The cursors of a ``LinkReads`` whose statements are sent and whose rows are not yet read."""

    similar: list[psycopg.Cursor[Any] | None]
    sessions: list[tuple[psycopg.Cursor[Any], psycopg.Cursor[Any]]]
    shared: list[psycopg.Cursor[Any]]
    near: list[list[tuple[str, float]]] | None = None  # the similar reads, answered by a local index


def send(db: Database, conn: psycopg.Connection, reads: LinkReads,
         near: list[list[tuple[str, float]]] | None = None) -> Sent:
    """Send the statements of ``reads`` on ``conn`` (in a pipeline) without waiting; ``near``:
    the answers of its similar reads, already known (a local index's), which then send nothing."""
    similar: list[psycopg.Cursor[Any] | None] = []
    for vector, scope, k in [] if near is not None else reads.similar:
        q = np.asarray(vector, np.float32)
        if k <= 0:
            similar.append(None)
            continue
        where, args = filter_sql(scope)
        similar.append(conn.execute(db.q(NEAREST_SQL.format(flt=where)),
                                    {"t": db.tenant, "q": q, "d": int(len(q)), "k": int(k), **args}))
    sessions = []
    for scope in reads.sessions:
        stmt, params = scan_sql(scope, order="timestamp")
        where, args = filter_sql(scope)
        edges = conn.execute(db.q(_SESSION_EDGES_SQL.format(flt=where)),
                             {"t": db.tenant, "etype": RelationType.SESSION.value, **args})
        sessions.append((conn.execute(db.q(stmt), {"t": db.tenant, **params}), edges))
    shared = []
    for scope, limit in reads.shared:
        stmt, params = scan_sql(scope, order="timestamp", descending=True, limit=limit,
                                columns="c.id, c.tags, c.entities")
        shared.append(conn.execute(db.q(stmt), {"t": db.tenant, **params}))
    return Sent(similar, sessions, shared, near)


def receive(sent: Sent) -> LinkFacts:
    """The answers of ``send``'s statements (the first read waits for them all)."""
    found_similar: list[list[tuple[str, float]]] = sent.near if sent.near is not None else [
        [] if cur is None else [(cid, float(s)) for cid, s in cur.fetchall()] for cur in sent.similar]
    found_sessions = [([r[0] for r in ids.fetchall()], [Relationship(s, d, t, w) for s, d, t, w in edges.fetchall()])
                      for ids, edges in sent.sessions]
    labels: dict[str, tuple[list[str], list[str]]] = {}
    found_shared = []
    for cur in sent.shared:
        rows = cur.fetchall()
        found_shared.append([r[0] for r in rows])
        labels.update((r[0], (list(r[1]), list(r[2]))) for r in rows)
    return LinkFacts(found_similar, found_sessions, found_shared, labels)
