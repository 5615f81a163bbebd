"""Several processes opening one new SQLite store file at the same moment all succeed.

(The ingest queue needs no such test: each process takes a queue file of its own.)

Before ``store.wal.use_wal`` one of three processes failed with "database is locked" in about
one try in six: SQLite refuses a second switch to WAL at once, without waiting for the timeout.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
from pathlib import Path

import pytest

from beeweave_core.store.sqlite import SQLiteStore

pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="uses fork"), pytest.mark.slow]

ROUNDS = 40  # at the old failure rate, all 40 rounds passing had a chance below 1e-6
PROCESSES = 3


def _open(path: str, barrier, results) -> None:  # type: ignore[no-untyped-def]
    barrier.wait()
    try:
        SQLiteStore(path).close()
        results.put("ok")
    except Exception as exc:  # reported to the test, which names it
        results.put(repr(exc))


def test_processes_opening_one_new_store_file_at_once_all_succeed(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    failures = []
    for i in range(ROUNDS):
        path = str(tmp_path / f"r{i}.db")
        barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
        procs = [ctx.Process(target=_open, args=(path, barrier, results)) for _ in range(PROCESSES)]
        for p in procs:
            p.start()
        got = [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(60)
        failures += [g for g in got if g != "ok"]
    assert failures == []
