"""A snapshot of the embedded store's in-memory indexes, so that a large store opens in seconds.

Opening a store rebuilds its indexes from every row, which grows with the store (half a
minute at a million memories on the development machine: benchmarks/RESULTS.md). At ``close()`` the store therefore
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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..index.memory_index import MemoryIndex

__all__ = ["snapshot_path", "save_snapshot", "load_snapshot", "new_token"]

FORMAT = 4  # 3: rank columns; 4: the tier column
logger = logging.getLogger(__name__)


def snapshot_path(db: Path) -> Path:
    return db.with_name(db.name + ".snapshot")


def new_token() -> str:
    return uuid.uuid4().hex


_MAGIC = b"BWSNAP02"
_ALIGN = 64


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def save_snapshot(index: MemoryIndex, path: Path, token: str, rows_and_last_seq: tuple[int, int]) -> None:
    """Write ``index.state()`` to ``path`` (atomically); the caller records ``token``.
    ``rows_and_last_seq`` (the database's row count and last row number) is kept to check against.

    Layout: magic, header length, a JSON header (the small and string-keyed parts, and where
    each array lies), then the raw arrays at aligned offsets, so that opening maps them
    (copy-on-write) instead of reading and copying hundreds of megabytes."""
    parts, arrays = index.state()
    n_rows, last_seq = rows_and_last_seq
    arrays = {k: np.ascontiguousarray(v) for k, v in arrays.items()}
    layout, offset = {}, 0
    for name, a in arrays.items():
        layout[name] = [a.dtype.str, list(a.shape), offset]
        offset = _aligned(offset + a.nbytes)
    header = json.dumps({
        "format": FORMAT, "token": token, "rows": n_rows, "last_seq": last_seq, **parts, "arrays": layout,
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


def load_snapshot(index: MemoryIndex, path: Path, token: str, graph: Path | None,
                  rows_and_last_seq: tuple[int, int]) -> bool:
    """Restore ``index`` (empty) from ``path`` if it is the snapshot ``token`` names and still
    matches the database (``rows_and_last_seq``); False (with the index untouched) otherwise."""
    if not path.exists():
        return False
    try:
        found = _read(path, token)
        if found is None:
            return False
        header, arrays = found
        if (header["rows"], header["last_seq"]) != tuple(rows_and_last_seq):
            return False
    except Exception as exc:  # a torn or foreign file is only a cache miss
        logger.info("BeeWeave: ignoring the snapshot %s (%s)", path, exc)
        return False
    return index.restore(header, arrays, graph)
