"""The server on PostgreSQL: tenants share the tables, the backend scopes every statement."""

from __future__ import annotations

import pytest

from beeweave_core import NotFoundError
from beeweave_core.server import ServerConfig
from tests.service.service_support import ACME_KEY, BETA_KEY, EMBEDDER, KEYS, event, start_server

pytestmark = pytest.mark.slow

pg_support = pytest.importorskip("tests.postgres.pg_support", reason="PostgreSQL tests need psycopg and a test server")


@pytest.fixture(scope="module")
def pg_live(tmp_path_factory):
    """The server on a fresh schema."""
    with pg_support.fresh_schema() as schema:
        url = pg_support.schema_url(pg_support.server_url(), schema)
        queues = tmp_path_factory.mktemp("queues")
        srv = start_server(ServerConfig(url, KEYS, embedder=EMBEDDER, queue_dir=queues))
        yield srv, queues
        srv.stop()


def test_tenants_on_one_database_stay_apart(pg_live):
    srv, queues = pg_live
    with srv.client(ACME_KEY) as acme, srv.client(BETA_KEY) as beta:
        acme.ingest(event("alice", "What is the vault code?", "Acme's vault code is 7781.", session_id="s1",
                          id="pg-acme"))
        beta.ingest(event("alice", "What is the vault code?", "Beta's vault code is 1234.", session_id="s1",
                          id="pg-beta"))
        assert acme.flush(30) and beta.flush(30)
        assert [h.id for h in beta.search("vault code", k=10, filters={"ids": ["pg-acme@alice:0", "pg-beta@alice:0"]})] == [
            "pg-beta@alice:0"]
        assert [c.id for c in beta.trace("s1")] == ["pg-beta@alice:0"]
        assert [c["id"] for c in beta.export_user("alice")["chunks"]] == ["pg-beta@alice:0"]
        with pytest.raises(NotFoundError):
            beta.feedback(["pg-acme@alice:0"], "up")
        assert beta.forget_user("alice") == 1
        assert [h.id for h in acme.search("vault code", user_id="alice", k=10)] == ["pg-acme@alice:0"]
        assert [h.id for h in beta.search("vault code", user_id="alice", k=10)] == []  # forgotten
    # The 202s were durable in the database (its ingest_events table), not in files of this host.
    assert list(queues.glob("*.queue")) == []
