"""Parts own their data (issue 45, item 3): every part that keeps state of a user exports and
imports its own, ``BeeWeave`` assembles them, and an export is all of a user.

The coverage test reads the store's own tables: every kv namespace and log stream that holds
an entry tagged with the user must be kept by a registered part, so a new part that writes
state of a user without exporting it fails here without anyone editing this file.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from beeweave_core import BeeWeave, InvalidInputError
from beeweave_core.cli import main as cli_main
from beeweave_core.lifecycle.review import flag
from beeweave_core.server import open_memory
from beeweave_core.server.service import MemoryService
from beeweave_core.stats import SEARCHES, USED
from beeweave_core.user_data import UserData

EMB = "beeweave:hashing-64"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
# Written by tests/service/data's generator with the code at main b9675b0 (before parts
# owned their data): the sections an export had then.
MAIN_EXPORT = Path(__file__).parent / "data" / "export_at_b9675b0.json"


def _use_everything(svc: MemoryService, user: str = "alice") -> None:
    """Exercise every part that keeps state of a user, through the public API where it has one."""
    m = svc.memory
    for i, text in enumerate(["I moved to Lyon in March.", "My sister Ana lives in Paris.",
                              "Ana works as a nurse at the Paris hospital.", "I drink green tea every morning."]):
        m.add(text, user_id=user, session_id="s1", timestamp=T0.replace(hour=9 + i), chunk_id=f"{user}-{i}")
    m.add("I drink green tea every morning.", user_id=user, chunk_id=f"{user}-dup", timestamp=T0)
    m.maintain(user_id=user)  # a merge: a version and an audit entry
    m.update(f"{user}-0", content="I moved to Lyon, France, in March.")
    m.relate(f"{user}-1", f"{user}-2", "supports", note="same person")
    m.feedback([f"{user}-2"], "up")
    m.feedback([f"{user}-2"], "used")
    svc.search("where does my sister live", user_id=user)
    m.remember_fact("drink", "My morning drink is green tea.", user_id=user)
    m.remember_opinion("Lyon is too rainy.", user_id=user, topic="lyon weather", confidence=0.4)
    m.remember_opinion("Lyon is sunny enough.", user_id=user, topic="lyon weather", confidence=0.7)
    flag(m.backend, m.get(f"{user}-1"), "stale", T0)
    m.watch("trips to Paris", user_id=user)
    m.add_turn("chat-1", "user", "Remind me to call Ana.", user_id=user)
    m.add("A guess to review.", user_id=user, chunk_id=f"{user}-pending", status="pending")
    m.reject(f"{user}-pending", reason="wrong")
    for n, text in enumerate(["I live in Berlin.", "How do I export my data?", "how can I export my data",
                              "How do I export my data?"]):
        m.ingest({"user_id": user, "id": f"{user}-ev{n}", "query": text, "response": "Open Settings, then Export."})
    assert m.flush(60)
    svc.recorder.flush()


Rows = list[tuple[str, str, Any]]


def _rows(pairs: Any) -> Rows:
    """(namespace or stream, key, value) sorted; a search's place in the ring is no part of it
    (an import appends)."""
    rows = [(ns, "" if ns == SEARCHES else key, value if isinstance(value, dict) else json.loads(value))
            for ns, key, value in pairs]
    return sorted(rows, key=lambda r: (r[0], r[1], json.dumps(r[2], sort_keys=True)))


def _sqlite_rows(path: Path) -> Callable[[str], Rows]:
    """Every kv and log entry tagged with a user, read from the SQLite file itself."""
    def rows(user: str) -> Rows:
        with sqlite3.connect(path) as db:
            return _rows([*db.execute("SELECT ns, key, value FROM kv WHERE user_id=?", (user,)),
                          *db.execute("SELECT stream, key, value FROM log WHERE user_id=?", (user,))])
    return rows


def _postgres_rows(schema: str, tenant: str) -> Callable[[str], Rows]:
    """The same from a PostgreSQL tenant's tables."""
    import psycopg
    from psycopg import sql

    from tests.postgres.pg_support import server_url

    def rows(user: str) -> Rows:
        with psycopg.connect(server_url()) as conn:
            kv, log = (sql.Identifier(schema, t) for t in ("kv", "log"))
            q = sql.SQL("SELECT ns, key, value FROM {} WHERE tenant=%s AND user_id=%s "
                        "UNION ALL SELECT stream, key, value FROM {} WHERE tenant=%s AND user_id=%s").format(kv, log)
            return _rows(conn.execute(q, (tenant, user, tenant, user)).fetchall())
    return rows


def _not_exported(memory: BeeWeave, rows: Callable[[str], Rows], user: str) -> set[str]:
    return {ns for ns, _, _ in rows(user)} - memory.user_data.keeps


def _comparable(data: dict[str, Any]) -> dict[str, Any]:
    """An export without what differs between two stores holding the same data."""
    out = json.loads(json.dumps({k: v for k, v in data.items() if k != "exported_at"}, default=str))
    for name in ("versions", "audit"):
        out[name] = [{k: v for k, v in e.items() if k != "seq"} for e in out[name]]
    out["chunks"] = sorted(out["chunks"], key=lambda c: c["id"])
    for c in out["chunks"]:
        c["relationships"] = sorted(c["relationships"], key=lambda r: (r["target_id"], r["type"]))
    return out


@pytest.fixture(scope="module")
def pg_schema():
    from tests.postgres.pg_support import fresh_schema

    with fresh_schema() as schema:
        yield schema


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    """A store where alice and bob used every part, and how to read its user-tagged rows."""
    if request.param == "sqlite":
        memory, rows = BeeWeave(tmp_path / "m.db", embedder=EMB), _sqlite_rows(tmp_path / "m.db")
    else:
        from tests.postgres.pg_support import new_tenant, schema_url, server_url

        schema, tenant = request.getfixturevalue("pg_schema"), new_tenant()
        memory = open_memory(schema_url(server_url(), schema), tenant=tenant, embedder=EMB)
        rows = _postgres_rows(schema, tenant)
    svc = MemoryService(memory)
    _use_everything(svc)
    _use_everything(svc, "bob")
    yield svc, rows
    svc.close()


@pytest.fixture
def used(tmp_path):
    path = tmp_path / "m.db"
    svc = MemoryService(BeeWeave(path, embedder=EMB))
    _use_everything(svc)
    yield svc, _sqlite_rows(path)
    svc.close()


def test_every_namespace_holding_a_users_data_is_exported_by_some_part(store) -> None:
    svc, rows = store
    found = {ns for ns, _, _ in rows("alice")}
    # The scenario reaches the parts it is meant to (else the check below proves little).
    assert {"lifecycle.versions", "lifecycle.audit", "lifecycle.facts", "lifecycle.conflicts", "lifecycle.timeline",
            "lifecycle.review", "session_buffer", "engine.watches", "graph.notes", "ingest.patterns",
            "ingest.rejected", "stats.searches", "stats.used"} <= found
    assert _not_exported(svc.memory, rows, "alice") == set()
    for part in svc.memory.user_data.parts:
        assert isinstance(part, UserData)


def test_the_coverage_check_fails_for_state_no_part_exports(used) -> None:
    svc, rows = used
    svc.memory.backend.kv_put("someone.new", "k", {"x": 1}, user_id="alice")  # what a new part would write
    assert _not_exported(svc.memory, rows, "alice") == {"someone.new"}


def test_export_forget_import_gives_back_every_entry(store) -> None:
    svc, rows = store
    before, held = _comparable(svc.export_user("alice")), rows("alice")
    assert all(before[k] for k in ("chunks", "versions", "audit", "facts", "conflicts", "timeline", "review",
                                   "sessions", "watches", "notes", "patterns", "rejected", "searches", "used"))
    bob = _comparable(svc.export_user("bob"))
    svc.forget_user("alice")
    assert MemoryService.export_is_empty(svc.export_user("alice")) and rows("alice") == []
    report = svc.import_user(json.loads(json.dumps(before)))
    assert report.memories == len(before["chunks"]) and report.other["sessions"] == 1
    assert _comparable(svc.export_user("alice")) == before
    assert rows("alice") == held  # the store's own entries, not only the export, as they were
    assert _comparable(svc.export_user("bob")) == bob
    again = svc.import_user(before)  # nothing twice
    assert again.memories == 0 and not any(again.other.values()) and (again.versions, again.audit) == (0, 0)
    assert rows("alice") == held


def test_an_export_made_by_the_code_at_main_still_imports(tmp_path) -> None:
    old = json.loads(MAIN_EXPORT.read_text(encoding="utf-8"))
    with BeeWeave(embedder=EMB) as m:
        svc = MemoryService(m)
        report = svc.import_user(old)
        assert (report.memories, report.versions, report.audit) == (len(old["chunks"]), 2, 1)
        now = _comparable(svc.export_user("alice"))
        want = _comparable(old)
        for name in want:  # every section the old export had comes back as it was
            assert now[name] == want[name], name
        assert m.relation_note(m.relationships("a1", types=["supports"])[0]) == "same person"
        assert m.fact("drink", user_id="alice").raw_content == "My morning drink is green tea."


@pytest.mark.parametrize("spoil, message", [
    (lambda d: d["sessions"].update(x={"summary": 1}), "not a session buffer"),
    (lambda d: d["timeline"].update(x={"entries": [{"id": "a", "at": "never", "seq": 1}]}), "not a time"),
    (lambda d: d["patterns"]["counts"].update(x={"user_id": "bob"}), "belongs to user 'bob'"),
    (lambda d: d["patterns"]["concepts"].update(x={"keys": ["bob\x1fq"]}), "keys of the export's user"),
    (lambda d: d["rejected"].update(x={"at": T0.isoformat(), "reason": "r", "user_id": "bob"}), "belongs to"),
    (lambda d: d["searches"][0].update(ids="alice-1"), "must be a JSON list"),
    (lambda d: d["used"].update(x={"at": "soon", "user_id": "alice"}), "not a time"),
])
def test_a_bad_section_of_a_new_part_writes_nothing(used, tmp_path, spoil, message) -> None:
    svc, _ = used
    data = json.loads(json.dumps(svc.export_user("alice"), default=str))
    spoil(data)
    path = tmp_path / "dst.db"
    with open_memory(path, embedder=EMB) as m:
        with pytest.raises(InvalidInputError, match=message):
            MemoryService(m).import_user(data)
    assert _sqlite_rows(path)("alice") == []
    with open_memory(path) as m:
        assert m.count() == 0


def test_a_rejected_mark_cannot_name_another_users_memory(used) -> None:
    svc, _ = used
    svc.memory.add("Bob's plan.", user_id="bob", chunk_id="bob-1")
    data = json.loads(json.dumps(svc.export_user("alice"), default=str))
    data["rejected"]["bob-1"] = {"at": T0.isoformat(), "reason": "crafted", "user_id": "alice"}
    with pytest.raises(InvalidInputError, match="another user"):
        svc.import_user(data)


def test_copy_takes_a_user_who_has_no_memory_but_other_state(tmp_path, capsys) -> None:
    src, dst = tmp_path / "src.db", tmp_path / "dst.db"
    with BeeWeave(src, embedder=EMB) as m:
        m.add("Ann's note.", user_id="ann")
        m.add_turn("chat-1", "user", "Remind me to call Ana.", user_id="carol")  # no memory, a session
        m.watch("trips to Paris", user_id="dan")
    assert cli_main(["--store", str(src), "copy", "--to", str(dst)]) == 0
    assert "user 'carol'" in capsys.readouterr().out
    with open_memory(dst) as m:
        assert m.get_conversation_context("chat-1", user_id="carol").turns[0].content == "Remind me to call Ana."
        assert [w.query for w in m.watches(user_id="dan")] == ["trips to Paris"]


def test_a_used_mark_written_before_marks_carried_their_user_is_exported_with_its_memory(used) -> None:
    svc, _ = used
    m = svc.memory
    m.backend.kv_put(USED, "alice-3", {"at": T0.isoformat()}, user_id="alice")  # as the code at main wrote it
    m.add("Bob's note.", user_id="bob", chunk_id="bob-0")
    m.backend.kv_put(USED, "bob-0", {"at": T0.isoformat()}, user_id="bob")
    exported = svc.export_user("alice")["used"]
    assert exported["alice-3"] == {"at": T0.isoformat(), "user_id": "alice"} and "bob-0" not in exported


def test_each_namespace_has_one_owner() -> None:
    from beeweave_core.user_export import UserExport

    with BeeWeave(embedder=EMB) as m:
        graph = m.parts.graph
        with pytest.raises(ValueError, match="two parts keep 'graph.notes'"):
            UserExport(m.backend, m.clock, m.parts.records.restore, [graph, graph])
