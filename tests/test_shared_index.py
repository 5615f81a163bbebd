"""Two SQLiteStores on one file (two connections, as two processes would have): each one's
in-memory index follows the other's commits, so after any mix of inserts, updates, replaces,
deletes and forgets by either, both answer exactly as a store opened afresh on the file."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from beeweave_core.errors import StoreUnavailableError
from beeweave_core.filters import build_filter
from beeweave_core.records import KnowledgeChunk
from beeweave_core.store.base import ChunkRow
from beeweave_core.store.sqlite import SQLiteStore

WORDS = [f"w{i}" for i in range(60)]


def _row(rnd: random.Random, cid: str, user: str) -> ChunkRow:
    terms = [rnd.choice(WORDS) for _ in range(rnd.randint(2, 8))] + [f"only{cid}"]
    vec = np.asarray([rnd.gauss(0, 1) for _ in range(16)], np.float32)
    chunk = KnowledgeChunk(" ".join(terms), user_id=user, id=cid, session_id=f"s{rnd.randint(0, 3)}")
    return ChunkRow(chunk, vec / np.linalg.norm(vec), terms)


def _answers(store: SQLiteStore, probes: list[tuple[dict[str, int], np.ndarray]]) -> list[object]:
    out: list[object] = [store.count(), sorted(store.scan_ids(build_filter({})))]
    for user in (None, "u0", "u1"):
        flt = build_filter({}, user_id=user) if user else build_filter({})
        for terms, vec in probes:
            out.append([(cid, round(s, 9)) for cid, s in store.lexical_search(terms, flt, 8)])
            out.append([cid for cid, _ in store.vector_search(vec, flt, 8, exact=True)])
    return out


def test_each_store_sees_the_others_commits(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    rnd = random.Random(5)
    a, b = SQLiteStore(db), SQLiteStore(db)
    live: list[str] = []
    probes = []
    for step in range(200):
        w = a if rnd.random() < 0.5 else b
        op = rnd.random()
        if op < 0.5 or len(live) < 5:
            cid = f"c{step}"
            w.insert([_row(rnd, cid, f"u{step % 3}")])
            live.append(cid)
        elif op < 0.65:
            cid = rnd.choice(live)
            c = w.get([cid])[cid]
            w.update([c.copy(session_id=f"s{rnd.randint(0, 5)}", tags=[f"t{step}"])])
        elif op < 0.8:
            cid = rnd.choice(live)
            w.replace([_row(rnd, cid, w.get([cid])[cid].user_id)])
        elif op < 0.97:
            cid = live.pop(rnd.randrange(len(live)))
            assert w.delete([cid]) == [cid]
        else:
            w.delete_user("u2")
            live = [c for c in live if int(c[1:]) % 3 != 2]
        if step % 20 == 19:
            probes = [({f"only{rnd.choice(live)}": 1, rnd.choice(WORDS): 1},
                       np.asarray([rnd.gauss(0, 1) for _ in range(16)], np.float32)) for _ in range(4)]
            fresh = SQLiteStore(db)
            expected = _answers(fresh, probes)
            fresh.close()
            for s in (a, b):
                assert _answers(s, probes) == expected
                assert s.verify().ok, s.verify().problems
    a.close()
    b.close()



@pytest.mark.parametrize("read", ["get", "rank_fields"])
def test_a_rewrite_committed_while_a_read_looks_rows_up_is_never_a_missing_memory(tmp_path: Path, read: str) -> None:
    """A rewrite gives a row a new number. Another store's commit that lands after a read
    caught up but before it looked its rows up by number must not make the memory vanish
    from that read (get; rank_fields of rows loaded at open): a search dropped a memory it had
    ranked."""
    db = tmp_path / "s.db"
    rnd = random.Random(3)
    a = SQLiteStore(db)
    a.insert([_row(rnd, "c1", "u0"), _row(rnd, "c2", "u0")])
    b = SQLiteStore(db)  # built from the rows: it reads their records when first asked
    real, calls = b._select_by_seq, []

    def rewrite_first(columns: str, seqs: list[int]) -> list[tuple[object, ...]]:
        if not calls:
            a.replace([_row(rnd, "c1", "u0")])  # committed by the other connection, right now
        calls.append(seqs)
        return real(columns, seqs)

    b._select_by_seq = rewrite_first  # type: ignore[method-assign]
    assert set(getattr(b, read)(["c1", "c2"])) == {"c1", "c2"}
    assert calls  # the rows were looked up, with the rewrite in between
    del b._select_by_seq
    assert set(getattr(b, read)(["c1", "c2"])) == {"c1", "c2"} and b.verify().ok
    assert b.get(["c1"])["c1"].content == a.get(["c1"])["c1"].content  # the next read has the rewrite
    a.close()
    b.close()


class _Hooked:
    """A store's connection with a hook run before each statement (the hook may commit
    through another store, or raise as a failing disk would)."""

    def __init__(self, db: sqlite3.Connection, hook: Callable[[str], None]) -> None:
        self._db, self._hook = db, hook

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        self._hook(sql)
        return self._db.execute(sql, *args)


def test_an_error_while_catching_up_leaves_the_changes_to_the_next_call(tmp_path: Path) -> None:
    """A catch-up that fails reading the changed rows (rolled back) must not mark their
    change-log entries seen: the next call applies them, instead of the index never holding
    the rewrite (get then missed the memory until the store was reopened)."""
    db = tmp_path / "s.db"
    rnd = random.Random(4)
    a, b = SQLiteStore(db), SQLiteStore(db)
    a.insert([_row(rnd, "c1", "u0"), _row(rnd, "c2", "u0")])
    assert set(b.get(["c1", "c2"])) == {"c1", "c2"}
    failed: list[str] = []

    def disk_error_once(sql: str) -> None:
        if "FROM chunks WHERE id IN" in sql and not failed:
            failed.append(sql)
            raise sqlite3.OperationalError("disk I/O error")

    plain = b._db
    b._db = _Hooked(plain, disk_error_once)  # type: ignore[assignment]
    a.replace([_row(rnd, "c1", "u0")])
    with pytest.raises(StoreUnavailableError):
        b.get(["c1", "c2"])
    assert failed
    b._db = plain
    assert set(b.get(["c1", "c2"])) == {"c1", "c2"}
    assert b.get(["c1"])["c1"].content == a.get(["c1"])["c1"].content
    assert b.verify().ok, b.verify().problems
    a.close()
    b.close()


def test_verify_beside_another_stores_rewrite_reports_no_false_problem(tmp_path: Path) -> None:
    """verify() compares the index with the records of the state it was caught up to: a
    rewrite another store commits while it reads is not a problem of this store's index."""
    db = tmp_path / "s.db"
    rnd = random.Random(6)
    a, b = SQLiteStore(db), SQLiteStore(db)
    a.insert([_row(rnd, f"c{i}", "u0") for i in range(5)])
    assert b.verify().ok
    done: list[str] = []

    def rewrite_once(sql: str) -> None:
        if "FROM chunks" in sql and "lex" in sql and not done:
            done.append(sql)
            a.replace([_row(rnd, "c1", "u0")])

    plain = b._db
    b._db = _Hooked(plain, rewrite_once)  # type: ignore[assignment]
    report = b.verify()
    b._db = plain
    assert done and report.ok, report.problems
    assert b.verify().ok
    a.close()
    b.close()
