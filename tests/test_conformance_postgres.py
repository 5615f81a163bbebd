"""The backend conformance suite (conformance.py), unchanged, against PostgresStore on a
real PostgreSQL with pgvector (tests/postgres/pg_support.py): once as configured by default, and once with
the HNSW path forced on (exact_limit=0) so the pgvector index and its fallback are
exercised too, and once with a local index (searches answered in the process), once with the tenant's SQL
search off (no context postings kept; every store answers from a local index), and once with the writes'
statements prepared on the server. Every backend the suite opens is a fresh tenant in one schema."""

from __future__ import annotations

import pytest

from beeweave_core.store.postgres import PostgresStore
from tests.conformance import BackendConformance
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)

pytestmark = pytest.mark.slow


def _reopen(backend: PostgresStore) -> PostgresStore:
    backend.close()
    return PostgresStore(backend.url, schema=backend.schema, tenant=backend.tenant,
                         exact_limit=backend.exact_limit, local_index=backend.local is not None,
                         prepare_writes=backend.prepare_writes)


class TestPostgres(BackendConformance):
    exact_limit = 10_000
    local_index = False
    prepare_writes = False
    sql_search: bool | None = None

    @pytest.fixture
    def backend_factory(self, pg_url):  # noqa: F811
        return lambda index_config=None: PostgresStore(pg_url, index_config=index_config, tenant=new_tenant(),
                                                       exact_limit=self.exact_limit, pool_size=2,
                                                       local_index=self.local_index,
                                                       prepare_writes=self.prepare_writes,
                                                       sql_search=self.sql_search)

    @pytest.fixture
    def reopen(self):
        return _reopen


class TestPostgresHNSW(TestPostgres):
    exact_limit = 0


class TestPostgresLocalIndex(TestPostgres):
    """Searches' candidates from the index held in the process (store/postgres/local.py)."""

    local_index = True


class TestPostgresSqlSearchOff(TestPostgres):
    """The tenant's SQL search off (``set_sql_search``): writes keep no context postings or
    vectors, and every store of the tenant, reopened ones too, searches a local index."""

    sql_search = False


class TestPostgresPreparedWrites(TestPostgres):
    """Writes' statements as server-side prepared statements (``prepare_writes``)."""

    prepare_writes = True
