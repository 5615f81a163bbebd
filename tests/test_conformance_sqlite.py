"""The backend conformance suite (conformance.py) against the SQLite store: in memory,
in a file, and in a file with the HNSW path forced on so the graph is exercised too.

A new backend joins with one class like these: subclass BackendConformance and give it
a ``backend_factory`` fixture (and ``reopen`` if it persists), e.g. for PostgreSQL::

    class TestPostgres(BackendConformance):
        @pytest.fixture
        def backend_factory(self, pg_schema):
            return lambda index_config=None: PostgresStore(pg_schema, index_config=index_config)"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import beeweave_core.store.sqlite as sqlite_store
from beeweave_core.index.vectors import VectorIndex
from beeweave_core.store.sqlite import SQLiteStore
from tests.conformance import BackendConformance
from tests.support import faiss_single_thread


def _reopen_sqlite(backend: SQLiteStore) -> SQLiteStore:
    backend.close()
    return SQLiteStore(backend.path)


class TestSQLiteInMemory(BackendConformance):
    @pytest.fixture
    def backend_factory(self):
        return lambda index_config=None: SQLiteStore(None, index_config=index_config)


class TestSQLiteFile(BackendConformance):
    @pytest.fixture
    def backend_factory(self, tmp_path: Path):
        names = itertools.count()
        return lambda index_config=None: SQLiteStore(tmp_path / f"store{next(names)}.db", index_config=index_config)

    @pytest.fixture
    def reopen(self):
        return _reopen_sqlite


class _AlwaysHNSW(VectorIndex):
    def __init__(self, dim: int, **kw) -> None:
        kw["exact_limit"] = 0
        super().__init__(dim, **kw)


class TestSQLiteFileHNSW(TestSQLiteFile):
    @pytest.fixture
    def backend_factory(self, tmp_path: Path, monkeypatch):
        monkeypatch.setattr(sqlite_store, "VectorIndex", _AlwaysHNSW)
        names = itertools.count()
        with faiss_single_thread():
            yield lambda index_config=None: SQLiteStore(tmp_path / f"store{next(names)}.db",
                                                        index_config=index_config)
