"""A snapshot of the embedded store's in-memory indexes, so that a large store opens in seconds.

Opening a store rebuilds its indexes from every row: about 3 s per 100k memories on the
development machine, so half a minute at a million. At ``close()`` the store therefore
writes its in-memory state (ids, term ids, BM25 postings and lengths, session order,
filter and rank columns, live mask and the vectors not in the HNSW graph) to ``<db>.snapshot`` (a JSON
header and raw arrays that opening maps copy-on-write) and records a random token for it in
the database's meta table.

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
    from ..index.vectors import VectorIndex
    from .sqlite import SQLiteStore

__all__ = ["snapshot_path", "save_snapshot", "load_snapshot", "new_token"]

FORMAT = 3  # 3: rank columns
logger = logging.getLogger(__name__)


def snapshot_path(db: Path) -> Path:
    return db.with_name(db.name + ".snapshot")


def new_token() -> str:
    return uuid.uuid4().hex


def _rows_and_last_seq(store: SQLiteStore) -> tuple[int, int]:
    n, last = store._db.execute("SELECT count(*), coalesce(max(seq), 0) FROM chunks").fetchone()
    return int(n), int(last)


_MAGIC = b"BWSNAP02"
_ALIGN = 64


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def save_snapshot(store: SQLiteStore, path: Path, token: str) -> None:
    """Write the store's in-memory state to ``path`` (atomically); the caller records ``token``.

    Layout: magic, header length, a JSON header (the small and string-keyed parts, and where
    each array lies), then the raw arrays at aligned offsets, so that opening maps them
    (copy-on-write) instead of reading and copying hundreds of megabytes."""
    assert store._vec is not None
    n_slots = len(store._ids)
    lex_arrays, lex_ints = store._lex.state()
    col_arrays, col_extra = store._cols.state(n_slots)
    n_rows, last_seq = _rows_and_last_seq(store)
    arrays: dict[str, np.ndarray] = {
        "seqs": np.asarray(store._seqs, np.int64),
        **{f"lex_{k}": v for k, v in lex_arrays.items()},
        **{f"ord_{k}": v for k, v in store._order.state().items()},
        **col_arrays,
        **{f"rank_{k}": v for k, v in store._rank.state(n_slots).items()},
        **store._vec.state(),
    }
    arrays = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    layout, offset = {}, 0
    for name, a in arrays.items():
        layout[name] = [a.dtype.str, list(a.shape), offset]
        offset = _aligned(offset + a.nbytes)
    header = json.dumps({
        "format": FORMAT, "token": token, "rows": n_rows, "last_seq": last_seq, "dim": store._vec.dim,
        "ids": store._ids, "term_ids": store._term_ids, "lex": lex_ints, "cols": col_extra, "arrays": layout,
    }, ensure_ascii=False).encode("utf-8")
    data_start = _aligned(16 + len(header))
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(_MAGIC + len(header).to_bytes(8, "little") + header)
        for name, a in arrays.items():
            f.seek(data_start + layout[name][2])
            f.write(a.tobytes())
        f.truncate(data_start + offset)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _read(path: Path, token: str) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    with open(path, "rb") as f:
        head = f.read(16)
        if len(head) != 16 or head[:8] != _MAGIC:
            return None
        header = json.loads(f.read(int.from_bytes(head[8:], "little")).decode("utf-8"))
    if header.get("format") != FORMAT or header.get("token") != token:
        return None
    data_start = _aligned(16 + int.from_bytes(head[8:], "little"))
    size = path.stat().st_size
    arrays: dict[str, np.ndarray] = {}
    for name, (dtype, shape, offset) in header["arrays"].items():
        dt, shape = np.dtype(dtype), tuple(shape)
        nbytes = int(np.prod(shape)) * dt.itemsize
        if data_start + offset + nbytes > size:
            return None  # truncated
        # Copy-on-write: pages are read when touched, and changes never reach the file.
        arrays[name] = np.zeros(shape, dt) if nbytes == 0 else \
            np.memmap(path, dtype=dt, mode="c", offset=data_start + offset, shape=shape).view(np.ndarray)
    return header, arrays


def load_snapshot(store: SQLiteStore, path: Path, token: str, graph: Path | None,
                  make_vectors: Callable[[int], VectorIndex]) -> bool:
    """Restore the store's in-memory state from ``path`` if it is the snapshot ``token`` names and
    still matches the database; False (with the store's indexes untouched) otherwise."""
    if not path.exists():
        return False
    try:
        found = _read(path, token)
        if found is None:
            return False
        header, arrays = found
        if (header["rows"], header["last_seq"]) != _rows_and_last_seq(store):
            return False
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
    store._slot_of = dict(zip(ids, range(len(ids))))  # (half the time of a filtering comprehension)
    store._slot_of.pop(None, None)  # type: ignore[call-overload]  # deleted slots
    store._term_ids = header["term_ids"]
    store._lex.restore({k[4:]: v for k, v in arrays.items() if k.startswith("lex_")}, header["lex"])
    store._order.restore({k[4:]: v for k, v in arrays.items() if k.startswith("ord_")})
    store._cols.restore({k: v for k, v in arrays.items() if k.startswith("col_")}, header["cols"])
    store._rank.restore({k[5:]: v for k, v in arrays.items() if k.startswith("rank_")})
    return True
