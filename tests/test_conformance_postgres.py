"""The backend conformance suite (conformance.py), unchanged, against PostgresStore on a
real PostgreSQL with pgvector (tests/postgres/pg_support.py): every search answered by the
store's local index, every read of records in SQL. Every backend the suite opens is a fresh
tenant in one schema."""

from __future__ import annotations

import pytest

from beeweave_core.store.postgres import PostgresStore
from tests.conformance import BackendConformance
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)

pytestmark = pytest.mark.slow


def _reopen(backend: PostgresStore) -> PostgresStore:
    backend.close()
    return PostgresStore(backend.url, schema=backend.schema, tenant=backend.tenant)


class TestPostgres(BackendConformance):
    @pytest.fixture
    def backend_factory(self, pg_url):  # noqa: F811
        return lambda index_config=None: PostgresStore(pg_url, index_config=index_config, tenant=new_tenant(),
                                                       pool_size=2)

    @pytest.fixture
    def reopen(self):
        return _reopen
