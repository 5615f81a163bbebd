"""A user's export written back (``MemoryService.import_user``, ``beeweave import``, ``beeweave
copy``): everything an export holds comes back as it was, bad data writes nothing, a repeated
import writes nothing twice."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest

from beeweave_core import BeeWeave, DuplicateIdError, InvalidInputError
from beeweave_core.cli import main as cli_main
from beeweave_core.lifecycle.facts import FACTS
from beeweave_core.lifecycle.review import flag
from beeweave_core.server import open_memory
from beeweave_core.server.service import MemoryService

EMB = "beeweave:hashing-64"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)


def _seed(m: BeeWeave) -> None:
    """alice with what an export can hold; bob with one memory."""
    ids = [m.add(text, user_id="alice", session_id="s1", timestamp=T0.replace(hour=9 + i), chunk_id=f"a{i}")
           for i, text in enumerate(["I moved to Lyon in March.", "My sister Ana lives in Paris.",
                                     "Ana works as a nurse at the Paris hospital.", "I drink green tea every morning."])]
    m.add("I drink green tea every morning.", user_id="alice", chunk_id="a-dup", timestamp=T0)
    m.maintain(user_id="alice")  # the duplicate is merged: a version and an audit entry
    m.update("a0", content="I moved to Lyon, France, in March.")  # a version
    m.update("a1", pinned=True, tier="short")
    m.relate("a1", "a2", "supports", note="same person")
    m.feedback(["a2"], "up")
    m.search("where does my sister live", user_id="alice")
    m.flush()
    flag(m.backend, m.get("a1"), "stale", T0)
    m.backend.kv_put(FACTS, "alice\x1fhome", {"chunk_id": "a0", "subject_key": "home"}, user_id="alice")
    m.watch("trips to Paris", user_id="alice")
    # A vector of the caller's own, which the model would not give: a copy must carry it.
    m.add("Bob's notes.", user_id="bob", chunk_id="b0", embedding=[1.0] + [0.0] * 63)
    assert ids


def _comparable(data: dict[str, Any]) -> dict[str, Any]:
    """An export without what differs between two stores holding the same data."""
    out = {k: v for k, v in data.items() if k not in ("exported_at", "searches")}
    out["versions"] = [{k: v for k, v in e.items() if k != "seq"} for e in data["versions"]]
    out["audit"] = [{k: v for k, v in e.items() if k != "seq"} for e in data["audit"]]
    out["chunks"] = sorted(data["chunks"], key=lambda c: c["id"])
    for c in out["chunks"]:
        c["relationships"] = sorted(c["relationships"], key=lambda r: (r["target_id"], r["type"]))
    return json.loads(json.dumps(out, sort_keys=True, default=str))


@pytest.fixture
def source():
    m = BeeWeave(embedder=EMB)
    _seed(m)
    yield MemoryService(m)
    m.close()


def _hits(svc: MemoryService, query: str) -> list[str]:
    return [h.id for h in svc.memory.search(query, user_id="alice", k=5)]


def test_an_import_gives_back_what_was_exported(source):
    data = source.export_user("alice")
    assert {c["status"] for c in data["chunks"]} == {"active", "merged"}
    assert data["versions"] and data["audit"] and data["facts"] and data["review"] and data["watches"]
    assert data["notes"] == [{"source_id": "a1", "target_id": "a2", "type": "supports", "note": "same person"}]
    with BeeWeave(embedder=EMB) as m2:
        dst = MemoryService(m2)
        report = dst.import_user(json.loads(json.dumps(data, default=str)))
        assert (report.memories, report.skipped) == (len(data["chunks"]), 0)
        assert _comparable(dst.export_user("alice")) == _comparable(data)
        assert _hits(dst, "where does my sister live") == _hits(source, "where does my sister live")
        assert m2.relation_note(m2.relationships("a1", types=["supports"])[0]) == "same person"
        assert [w.query for w in m2.watches(user_id="alice")] == ["trips to Paris"]
        assert m2.count(user_id="bob") == 0
        # Everything imported belongs to the user: forgetting them leaves nothing behind.
        dst.forget_user("alice")
        assert MemoryService.export_is_empty(dst.export_user("alice"))


def test_a_repeated_import_writes_nothing_twice(source):
    data = source.export_user("alice")
    with BeeWeave(embedder=EMB) as m2:
        dst = MemoryService(m2)
        dst.import_user(data)
        again = dst.import_user(data)
        assert (again.memories, again.skipped, again.versions, again.audit) == (0, len(data["chunks"]), 0, 0)
        assert _comparable(dst.export_user("alice")) == _comparable(data)


@pytest.mark.parametrize("spoil, message", [
    (lambda d: d.update(format="other/1"), "not a BeeWeave export"),
    (lambda d: d["chunks"][1].update(user_id="bob"), "belongs to user 'bob'"),
    (lambda d: d["chunks"][1].update(status="bogus"), "is not a memory"),
    (lambda d: d["chunks"][0]["relationships"].append({"source_id": "a0"}), "is not a relationship"),
    (lambda d: d["versions"][0].update(at="yesterday"), "is not a time"),
    (lambda d: d["chunks"].append(dict(d["chunks"][0])), "twice"),
    (lambda d: d["review"][0].update(reasons="stale"), "list of strings"),
])
def test_bad_data_is_refused_and_writes_nothing(source, spoil, message):
    data = json.loads(json.dumps(source.export_user("alice"), default=str))
    spoil(data)
    with BeeWeave(embedder=EMB) as m2:
        with pytest.raises(InvalidInputError, match=message):
            MemoryService(m2).import_user(data)
        assert m2.count() == 0 and not list(m2.backend.log_read("lifecycle.versions"))
        assert not list(m2.backend.kv_scan(FACTS))


def test_an_id_held_by_another_user_is_refused_before_any_write(source):
    data = source.export_user("alice")
    with BeeWeave(embedder=EMB) as m2:
        m2.add("Carol's memory.", user_id="carol", chunk_id="a2")
        with pytest.raises(DuplicateIdError, match="'a2'"):
            MemoryService(m2).import_user(data)
        assert m2.count() == 1 and m2.get("a2").user_id == "carol"


def test_cli_export_then_import_and_copy(tmp_path, capsys):
    src = tmp_path / "src.db"
    with BeeWeave(str(src), embedder=EMB) as m:
        _seed(m)
        want = _comparable(MemoryService(m).export_user("alice"))
        vectors = m.backend.get_vectors(["a0", "b0"])
    out = tmp_path / "alice.json"
    assert cli_main(["--store", str(src), "export", "alice", "-o", str(out)]) == 0
    assert cli_main(["--store", str(tmp_path / "imported.db"), "--embedder", EMB, "import", str(out)]) == 0
    assert cli_main(["--store", str(src), "copy", "--to", str(tmp_path / "copy.db")]) == 0
    assert "user 'bob': 1 memories" in capsys.readouterr().out
    with open_memory(tmp_path / "imported.db") as m:
        assert _comparable(MemoryService(m).export_user("alice")) == want
    with open_memory(tmp_path / "copy.db") as m:  # opened with the model the copy recorded
        assert _comparable(MemoryService(m).export_user("alice")) == want
        copied = m.backend.get_vectors(["a0", "b0"])
        assert all((copied[i] == vectors[i]).all() for i in vectors)  # vectors carried, not embedded again
    assert cli_main(["--store", str(tmp_path / "imported.db"), "import", str(tmp_path / "missing.json")]) == 1


def test_import_over_rest_needs_an_admin_key(tmp_path, source):
    from beeweave_core.client import AuthenticationError
    from beeweave_core.server import ServerConfig
    from tests.service.service_support import start_server

    admin, scoped = "import-admin-key", "import-scoped-key"
    srv = start_server(ServerConfig(tmp_path, {admin: "acme", scoped: {"tenant": "acme", "users": ["alice"]}},
                                    embedder=EMB))
    data = json.loads(json.dumps(source.export_user("alice"), default=str))
    try:
        with srv.client(scoped) as c, pytest.raises(AuthenticationError):
            c.import_user(data)
        with srv.client(admin) as c:
            report = c.import_user(data)
            assert (report["memories"], report["other"]["notes"]) == (len(data["chunks"]), 1)
            assert _comparable(c.export_user("alice")) == _comparable(data)
            with srv.http(admin) as h:  # the path names the user the export is of
                r = h.post("/api/v1/users/bob/import", json=data)
                assert r.status_code == 400 and "not 'bob'" in r.text
    finally:
        srv.stop()


# -- what a user trial found (each failed before its fix) -------------------------------------------
def test_a_crafted_export_cannot_write_onto_another_users_memories(source):
    with BeeWeave(embedder=EMB) as m2:
        m2.add("Bob's secret plan.", user_id="bob", chunk_id="bob-1")
        w = m2.watch("bob's standing query", user_id="bob")
        base = json.loads(json.dumps(source.export_user("alice"), default=str))
        crafted = [
            lambda d: d["review"].append({"chunk_id": "bob-1", "user_id": "alice", "reasons": ["x"],
                                          "flagged_at": T0.isoformat()}),
            lambda d: d["audit"].append({"chunk_id": "bob-1", "action": "archived", "reason": "injected",
                                         "at": T0.isoformat()}),
            lambda d: d["notes"].append({"source_id": "bob-1", "target_id": "a1", "type": "supports",
                                         "note": "injected"}),
            lambda d: d["facts"].update(secret={"chunk_id": "bob-1", "subject_key": "secret"}),
            lambda d: d["watches"].append({"id": w.id, "query": "taken over", "user_id": "alice",
                                           "agent_id": None, "min_relevance": 0.5}),
        ]
        for spoil in crafted:
            data = json.loads(json.dumps(base))
            spoil(data)
            with pytest.raises(InvalidInputError, match="another user"):
                MemoryService(m2).import_user(data)
            assert m2.count() == 1 and m2.audit("bob-1") == [] and m2.review_queue() == []
            assert [x.query for x in m2.watches()] == ["bob's standing query"]


def test_cli_checks_every_file_before_writing_any(source, tmp_path, capsys):
    good = tmp_path / "alice.json"
    good.write_text(json.dumps(source.export_user("alice"), default=str))
    bad = json.loads(good.read_text())
    bad["chunks"][0]["user_id"] = "bob"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    store = str(tmp_path / "dst.db")
    assert cli_main(["--store", store, "--embedder", EMB, "import", str(good), str(tmp_path / "bad.json")]) == 1
    assert "bad.json" in capsys.readouterr().err
    with BeeWeave(store, embedder=EMB) as m:
        m.add("Carol's memory.", user_id="carol", chunk_id="a2")  # a store-side conflict for the next run
        assert m.count() == 1
    bob = source.export_user("bob")
    (tmp_path / "bob.json").write_text(json.dumps(bob, default=str))
    assert cli_main(["--store", store, "import", str(tmp_path / "bob.json"), str(good)]) == 1
    with open_memory(store) as m:
        assert m.count() == 1  # bob's file was fine, but alice's collides: neither was written


def test_a_repeated_import_after_a_delete_logs_nothing_twice_and_counts_what_it_wrote(source):
    data = json.loads(json.dumps(source.export_user("alice"), default=str))
    with BeeWeave(embedder=EMB) as m2:
        dst = MemoryService(m2)
        dst.import_user(data)
        audit = m2.audit()
        m2.delete("a-dup")  # the memory the audit entry is about
        again = dst.import_user(data)
        # The deleted memory comes back with its versions and edges (deleted with it); its
        # audit entry outlived it and is not written again.
        assert (again.memories, again.audit) == (1, 0)
        assert again.other == {"facts": 0, "review": 0, "watches": 0, "notes": 0, "searches": 0}
        assert [(a["chunk_id"], a["action"]) for a in m2.audit()] == [(a["chunk_id"], a["action"]) for a in audit]


def test_an_export_holds_the_audit_entries_of_deleted_memories(source):
    m = source.memory
    (entry,) = m.audit("a3")
    assert entry["user_id"] == "alice"
    m.delete("a3")
    m.delete("a-dup")
    assert [(a["chunk_id"], a["action"]) for a in source.export_user("alice")["audit"]] == [("a3", "merged")]
    assert source.export_user("bob")["audit"] == []


def test_a_user_id_cannot_hold_the_key_separator():
    # "alice\x1fmallory"'s facts were keyed "alice\x1fmallory\x1f<name>" and so showed up in alice's export.
    with BeeWeave(embedder=EMB) as m:
        for write in (lambda: m.add("x", user_id="alice\x1fmallory"),
                      lambda: m.remember_fact("salary", "250k", user_id="alice\x1fmallory"),
                      lambda: m.ingest({"user_id": "alice\x1fmallory", "query": "q", "response": "r"}),
                      lambda: m.watch("q", user_id="alice\x1fmallory")):
            with pytest.raises(InvalidInputError, match="control characters"):
                write()
        assert m.count() == 0 and not list(m.backend.kv_scan(FACTS))
