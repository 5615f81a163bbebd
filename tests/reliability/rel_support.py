"""Helpers of the reliability suite: consistency checks against a rebuild from the records,
durations and example counts from the environment, and child processes.

Two independent checks say that a store's indexes agree with its records:

* ``verify()`` (the engine's own check: postings, vectors, document frequencies, dangling
  relationships);
* for a file store, a *rebuild*: a second ``SQLiteStore`` opened on the same file builds
  its indexes from the committed rows alone, and must answer every lexical, vector, filter
  and relationship query exactly as the live store does.

PostgreSQL has no ``verify()`` yet, so :func:`pg_problems` checks its derived tables
(postings, document frequencies, statistics, relationships) against the records in SQL.
"""

from __future__ import annotations

import functools
import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from beeweave_core import BeeWeave, ChunkStatus
from beeweave_core.filters import build_filter
from beeweave_core.store.sqlite import SQLiteStore
from tests.support import WORDS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ALL_STATUSES = [s.value for s in ChunkStatus]
EVERYTHING = build_filter({"status": ALL_STATUSES})


def env_number(name: str, default: float) -> float:
    """A figure of the suite (seconds, threads, examples) that CI or a person can raise."""
    value = os.environ.get(name)
    return float(value) if value else default


def examples(default: int) -> int:
    """Hypothesis examples per property, scaled by ``BEEWEAVE_FUZZ_SCALE`` (default 1)."""
    return max(1, int(default * env_number("BEEWEAVE_FUZZ_SCALE", 1.0)))


def all_chunks(backend: Any) -> dict[str, Any]:
    return {c.id: c for c in backend.scan(EVERYTHING)}


# -- the embedded store -----------------------------------------------------------------------
def assert_verified(memory: Any) -> None:
    report = memory.verify()
    assert report.ok, report.problems


def _probe_terms(backend: SQLiteStore, n: int, rnd: random.Random) -> list[dict[str, int]]:
    terms = list(backend.index.term_ids)  # every term ever indexed, live or not
    rnd.shuffle(terms)
    queries = [{t: 1} for t in terms[:n]]
    queries += [{w: 1 for w in rnd.sample(terms, min(3, len(terms)))} for _ in range(n // 2)] if terms else []
    return queries


def assert_matches_rebuild(memory: Any, *, probes: int = 40, seed: int = 0) -> None:
    """A store rebuilt from the file's committed rows answers like the live store.

    Compared: the records, the relationships, per-user counts under every status, and
    the results of lexical and exact vector searches over random terms and vectors,
    unfiltered and scoped to each user.
    """
    live = memory.backend
    assert isinstance(live, SQLiteStore) and live.path is not None, "a rebuild needs a file store"
    rnd = random.Random(seed)
    fresh = SQLiteStore(live.path)
    try:
        mine, theirs = all_chunks(live), all_chunks(fresh)
        assert set(mine) == set(theirs), (sorted(set(mine) ^ set(theirs)))[:10]
        for cid, c in mine.items():
            assert c.to_dict() == theirs[cid].to_dict(), cid
        ids = sorted(mine)
        assert live.edges(ids) == fresh.edges(ids)
        users = sorted({c.user_id for c in mine.values()})
        scopes = [build_filter(None)] + [build_filter({"status": ALL_STATUSES}, user_id=u) for u in users]
        for flt in scopes:
            assert live.count(flt) == fresh.count(flt)
            assert live.matching(ids, flt) == fresh.matching(ids, flt)
        for terms in _probe_terms(fresh, probes, rnd):
            for flt in scopes[:4]:
                a, b = live.lexical_search(terms, flt, 20), fresh.lexical_search(terms, flt, 20)
                assert [i for i, _ in a] == [i for i, _ in b], terms
                assert np.allclose([s for _, s in a], [s for _, s in b], rtol=1e-9, atol=1e-12)
        if fresh.dim:
            for _ in range(probes // 4):
                q = np.asarray([rnd.gauss(0, 1) for _ in range(fresh.dim)], np.float32)
                q /= np.linalg.norm(q)
                for flt in scopes[:4]:
                    a = live.vector_search(q, flt, 10, exact=True)
                    b = fresh.vector_search(q, flt, 10, exact=True)
                    assert [i for i, _ in a] == [i for i, _ in b]
    finally:
        fresh.close()


def assert_consistent(memory: Any, **rebuild: Any) -> None:
    """``verify()`` passes and, for a file store, a rebuild answers identically."""
    assert_verified(memory)
    backend = memory.backend
    if isinstance(backend, SQLiteStore) and backend.path is not None:
        assert_matches_rebuild(memory, **rebuild)


@contextmanager
def small_hnsw(limit: int = 64) -> Iterator[None]:
    """Make the embedded store switch from exact search to its FAISS HNSW graph above
    ``limit`` vectors instead of 10,000, so a small store exercises the graph, its file
    and its reuse on reopen."""
    import beeweave_core.store.sqlite as sqlite_mod
    from beeweave_core.index.vectors import VectorIndex

    sqlite_mod.VectorIndex = functools.partial(VectorIndex, exact_limit=limit)  # type: ignore[misc]
    try:
        yield
    finally:
        sqlite_mod.VectorIndex = VectorIndex  # type: ignore[misc]


# -- PostgreSQL --------------------------------------------------------------------------------
def pg_problems(url: str, tenant: str) -> list[str]:
    """The PostgreSQL backend's derived tables checked against its records, in SQL."""
    import psycopg

    from beeweave_core.store.postgres.options import split_url

    plain, own = split_url(url)
    schema = own.get("schema", "beeweave")
    problems: list[str] = []
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema}", public')

        def one(q: str) -> Any:
            return conn.execute(q, {"t": tenant}).fetchone()

        n = one("SELECT count(*) FROM chunks WHERE tenant = %(t)s")[0]
        st = (one("SELECT n_docs FROM stats WHERE tenant = %(t)s") or (0,))[0]
        if n != st:
            problems.append(f"stats say {st} records, the records {n}")
        orphans = one("SELECT count(*) FROM postings p WHERE p.tenant = %(t)s AND NOT EXISTS "
                      "(SELECT 1 FROM chunks c WHERE c.tenant = p.tenant AND c.seq = p.chunk_seq)")
        if orphans[0]:
            problems.append(f"{orphans[0]} postings of missing records")
        dangling = one("SELECT count(*) FROM edges e WHERE e.tenant = %(t)s AND (NOT EXISTS (SELECT 1 FROM chunks c "
                       "WHERE c.tenant = e.tenant AND c.id = e.src) OR NOT EXISTS (SELECT 1 FROM chunks c "
                       "WHERE c.tenant = e.tenant AND c.id = e.dst))")
        if dangling[0]:
            problems.append(f"{dangling[0]} relationships point at missing records")
    return problems


# -- child processes ---------------------------------------------------------------------------
def child(script: str, *args: Any, **popen: Any) -> subprocess.Popen:
    """``python -m tests.reliability.<script> args...`` from the checkout (one name per module)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    module = f"tests.reliability.{Path(script).stem}"
    return subprocess.Popen([sys.executable, "-m", module, *map(str, args)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def sentence_for(rnd: random.Random, lo: int = 4, hi: int = 12, words: Sequence[str] = WORDS) -> str:
    return " ".join(rnd.choice(words) for _ in range(rnd.randint(lo, hi)))


def duplicates(values: Sequence[str]) -> list[str]:
    return [v for v, n in Counter(values).items() if n > 1]


def open_file_store(path: Path, *, dim: int = 32, **kw: Any) -> BeeWeave:
    from beeweave_core import HashingEmbedder

    return BeeWeave(path, embedder=HashingEmbedder(dim), **kw)


@contextmanager
def small_tmpfs(tmp_path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. "24m") mounted at ``tmp_path/disk``, unmounted after: a disk
    that fills up. Skips the test where it cannot be mounted (not root, no mount)."""
    import pytest

    disk = tmp_path / "disk"
    disk.mkdir()
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
