"""A snapshot of the embedded store's in-memory indexes, so that a large store opens in seconds.

Opening a store rebuilds its indexes from every row: about 3 s per 100k memories on the
development machine, so half a minute at a million. At ``close()`` the store therefore
writes its in-memory state (ids, term ids, BM25 postings and lengths, session order,
filter columns, live mask and the vectors not in the HNSW graph) to ``<db>.snapshot``, one
uncompressed ``.npz``, and records a random token for it in the database's meta table.

The snapshot is used only if the database has not changed since: the first write
transaction after a snapshot was written or loaded deletes the token in that same
transaction, and the file after the commit. The number of rows and the last row number are
compared too, in case a writer that knows nothing of snapshots touched the file. The HNSW
graph is saved beside it as before and must cover exactly the slots the snapshot expects.
Anything missing, stale or unreadable only costs the full rebuild, never a wrong index.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..vectors import VectorIndex
    from .sqlite import SQLiteStore

__all__ = ["snapshot_path", "save_snapshot", "load_snapshot", "new_token"]

FORMAT = 1
logger = logging.getLogger(__name__)


def snapshot_path(db: Path) -> Path:
    return db.with_name(db.name + ".snapshot")


def new_token() -> str:
    return uuid.uuid4().hex


def _rows_and_last_seq(store: SQLiteStore) -> tuple[int, int]:
    n, last = store._db.execute("SELECT count(*), coalesce(max(seq), 0) FROM chunks").fetchone()
    return int(n), int(last)


def save_snapshot(store: SQLiteStore, path: Path, token: str) -> None:
    """Write the store's in-memory state to ``path`` (atomically); the caller records ``token``."""
    assert store._vec is not None
    n_slots = len(store._ids)
    lex_arrays, lex_ints = store._lex.state()
    col_arrays, col_extra = store._cols.state(n_slots)
    n_rows, last_seq = _rows_and_last_seq(store)
    header = {
        "format": FORMAT, "token": token, "rows": n_rows, "last_seq": last_seq, "dim": store._vec.dim,
        "ids": store._ids, "term_ids": store._term_ids, "lex": lex_ints, "cols": col_extra,
    }
    arrays: dict[str, Any] = {
        "header": np.frombuffer(json.dumps(header, ensure_ascii=False).encode("utf-8"), np.uint8),
        "seqs": np.asarray(store._seqs, np.int64),
        **{f"lex_{k}": v for k, v in lex_arrays.items()},
        **{f"ord_{k}": v for k, v in store._order.state().items()},
        **col_arrays,
        **store._vec.state(),
    }
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_snapshot(store: SQLiteStore, path: Path, token: str, graph: Path | None,
                  make_vectors: Callable[[int], VectorIndex]) -> bool:
    """Restore the store's in-memory state from ``path`` if it is the snapshot ``token`` names and
    still matches the database; False (with the store's indexes untouched) otherwise."""
    if not path.exists():
        return False
    try:
        with np.load(path, allow_pickle=False) as z:
            header = json.loads(bytes(z["header"]).decode("utf-8"))
            if header.get("format") != FORMAT or header.get("token") != token:
                return False
            if (header["rows"], header["last_seq"]) != _rows_and_last_seq(store):
                return False
            arrays = {k: z[k] for k in z.files if k != "header"}
    except Exception as exc:  # a torn or foreign file is only a cache miss
        logger.info("BeeWeave: ignoring the snapshot %s (%s)", path, exc)
        return False
    seqs = arrays["seqs"]
    vec = make_vectors(int(header["dim"]))
    if not vec.restore({k: v for k, v in arrays.items() if k.startswith("vec_")}, graph, seqs):
        return False
    ids: list[str | None] = header["ids"]
    store._vec = vec
    store._ids = ids
    store._seqs = seqs.tolist()
    store._slot_of = {cid: slot for slot, cid in enumerate(ids) if cid is not None}
    store._term_ids = header["term_ids"]
    store._lex.restore({k[4:]: v for k, v in arrays.items() if k.startswith("lex_")}, header["lex"])
    store._order.restore({k[4:]: v for k, v in arrays.items() if k.startswith("ord_")})
    store._cols.restore({k: v for k, v in arrays.items() if k.startswith("col_")}, header["cols"])
    return True
