"""``beeweave memory ...`` and ``beeweave dead-letters ...`` on a local store and on a server."""

from __future__ import annotations

import json

import pytest

from beeweave_core.cli import main
from beeweave_core.server import ServerConfig
from tests.service.service_support import EMBEDDER, start_server

KEY = "cli-key-00001"


def _run(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


@pytest.fixture(params=["local", "remote"])
def store(request, tmp_path):
    if request.param == "local":
        yield ["--store", str(tmp_path / "m.db"), "--embedder", EMBEDDER]
        return
    srv = start_server(ServerConfig(tmp_path / "tenants", {KEY: "acme"}, embedder=EMBEDDER))
    try:
        yield ["--store", srv.url, "--api-key", KEY]
    finally:
        srv.stop()


def test_memory_commands(store, capsys):
    mid = _run(capsys, *store, "memory", "add", "The", "staging", "db", "password", "rotates", "monthly",
               "--user-id", "alice", "--tag", "ops", "--pin", "--status", "active").strip()
    shown = json.loads(_run(capsys, *store, "memory", "show", mid))
    assert shown["pinned"] and shown["tags"] == ["ops"] and shown["user_id"] == "alice"
    out = _run(capsys, *store, "memory", "edit", mid, "--unpin", "--tag", "ops", "--tag", "db", "--json")
    assert json.loads(out)["tags"] == ["ops", "db"] and not json.loads(out)["pinned"]
    listed = json.loads(_run(capsys, *store, "memory", "list", "--user-id", "alice", "--json"))
    assert [c["id"] for c in listed["memories"]] == [mid]
    assert json.loads(_run(capsys, *store, "memory", "relationships", mid)) == []
    assert "deleted" in _run(capsys, *store, "memory", "delete", mid)
    assert main([*store, "memory", "show", mid]) == 1
    assert "0 dead letter(s)" in _run(capsys, *store, "dead-letters")
    assert "queued 0" in _run(capsys, *store, "dead-letters", "retry")


def test_memory_history_shows_the_text_an_edit_replaced(store, capsys):
    mid = _run(capsys, *store, "memory", "add", "Alice works at Acme", "--user-id", "alice",
               "--status", "active").strip()
    assert json.loads(_run(capsys, *store, "memory", "history", mid)) == []
    _run(capsys, *store, "memory", "edit", mid, "--content", "Alice works at Initech")
    (version,) = json.loads(_run(capsys, *store, "memory", "history", mid))
    assert version["chunk"]["raw_content"] == "Alice works at Acme" and version["reason"] == "edit"
    assert json.loads(_run(capsys, *store, "memory", "show", mid))["raw_content"] == "Alice works at Initech"


def test_a_missing_memory_or_user_is_the_same_error_locally_and_remotely(store, capsys):
    # A second user trial saw a local store print "ID: not found" and exit 0, and an empty
    # export of an unknown user, where a server said 404 and the CLI exited 1.
    _run(capsys, *store, "memory", "add", "Alice works at Acme", "--user-id", "alice")  # the store exists
    assert main([*store, "memory", "delete", "no-such-id"]) == 1
    assert "no chunk with id 'no-such-id'" in capsys.readouterr().err
    assert main([*store, "export", "nobody"]) == 1
    assert "no data of user 'nobody'" in capsys.readouterr().err
