"""Moving from the embedded store to PostgreSQL: ``beeweave copy`` writes every user into a
PostgreSQL tenant as the SQLite file held them."""

from __future__ import annotations

from beeweave_core import BeeWeave
from beeweave_core.cli import main as cli_main
from beeweave_core.server import open_memory
from beeweave_core.server.service import MemoryService
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)
from tests.service.test_user_import import EMB, _comparable, _seed


def test_copy_from_sqlite_to_postgres(tmp_path, pg_url, capsys) -> None:  # noqa: F811
    src = tmp_path / "src.db"
    with BeeWeave(str(src), embedder=EMB) as m:
        _seed(m)
        hits = [h.id for h in m.search("where does my sister live", user_id="alice", k=5)]
        m.flush()  # the search's access counts are written before the export
        svc = MemoryService(m)
        want = {u: _comparable(svc.export_user(u)) for u in ("alice", "bob")}
        vectors = m.backend.get_vectors(["a0", "b0"])
    tenant = new_tenant()
    assert cli_main(["--store", str(src), "copy", "--to", pg_url, "--to-tenant", tenant]) == 0
    assert "user 'alice'" in capsys.readouterr().out
    with open_memory(pg_url, tenant=tenant) as m:  # the model the copy recorded
        svc = MemoryService(m)
        assert {u: _comparable(svc.export_user(u)) for u in ("alice", "bob")} == want
        assert [h.id for h in m.search("where does my sister live", user_id="alice", k=5)] == hits
        copied = m.backend.get_vectors(["a0", "b0"])
        assert all((copied[i] == vectors[i]).all() for i in vectors)
        svc.forget_user("alice")  # what the copy wrote belongs to the user in this store too
        assert MemoryService.export_is_empty(svc.export_user("alice"))
