"""DELETE /api/v1/users/{id} also forgets the user's events in the tenant's SSE event log:
none is replayed from ``after=0``, and none of the user's words stays in any file of the store
directory (the log ``<tenant>.db.events`` and its WAL included). Other users' events stay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beeweave_core.events import EventType, MemoryEvent
from beeweave_core.server import ServerConfig
from beeweave_core.server.event_log import EventFilter, EventLog
from tests.service.service_support import EMBEDDER, start_server

pytestmark = pytest.mark.slow

ADMIN = "admin-key-of-acme"
WORD = "zorblaxquint"  # only the forgotten user ever says it


def _events(h, user_id: str | None = None) -> list[dict]:
    params: dict = {"after": 0, "max_seconds": 1}
    if user_id is not None:
        params["user_id"] = user_id
    r = h.get("/api/v1/events", params=params)
    assert r.status_code == 200, r.text
    return [json.loads(line[5:]) for line in r.text.splitlines() if line.startswith("data:")]


def _files_holding(root: Path, word: bytes) -> list[str]:
    return [str(p) for p in sorted(root.rglob("*")) if p.is_file() and word in p.read_bytes()]


def test_forgetting_a_user_removes_their_events_from_the_log_and_its_files(tmp_path):
    s = start_server(ServerConfig(tmp_path, {ADMIN: "acme"}, embedder=EMBEDDER))
    try:
        with s.http(ADMIN) as h:
            gone, kept = "user-gone", "user-kept"
            r = h.post("/api/v1/watches", json={"query": "passport renewal", "user_id": gone, "min_relevance": 0.0})
            assert r.status_code == 201, r.text
            for i in range(3):
                r = h.post("/api/v1/memories", json={
                    "content": f"My passport renewal appointment {i} is with agent {WORD} on Friday.",
                    "user_id": gone, "tags": [WORD + "tag"], "status": "active"})
                assert r.status_code in (200, 201), r.text
            r = h.post("/api/v1/memories", json={"content": "the nightly database backup runs at 2am",
                                                 "user_id": kept, "status": "active"})
            assert r.status_code in (200, 201), r.text
            assert h.post("/api/v1/flush").json()["drained"]
            before = _events(h, gone)
            assert {"memory.created", "watch.matched"} <= {e["type"] for e in before}
            assert any(WORD in json.dumps(e) for e in before)
            kept_before = _events(h, kept)
            assert kept_before

            assert h.delete(f"/api/v1/users/{gone}").json() == {"user_id": gone, "deleted": 3}
            # A retried erasure keeps the notices the first one left (a trial saw them purged).
            assert h.delete(f"/api/v1/users/{gone}").json() == {"user_id": gone, "deleted": 0}

            # What stays of the user is one memory.deleted notice per memory (its id, nothing it
            # said), so a client mirroring the memories erases its copies too.
            notices = _events(h, gone)
            assert [e["type"] for e in notices] == ["memory.deleted"] * 3
            assert {e["chunk_id"] for e in notices} == {e["chunk_id"] for e in before if e["type"] == "memory.created"}
            assert all(e["tags"] == [] and e["data"] == {} for e in notices)
            everything = _events(h)
            assert all(e["user_id"] != gone or e["type"] == "memory.deleted" for e in everything)
            assert all(WORD not in json.dumps(e) for e in everything)
            assert [e["seq"] for e in _events(h, kept)] == [e["seq"] for e in kept_before]
            assert (tmp_path / "acme.db.events").exists()
            assert _files_holding(tmp_path, WORD.encode()) == []
    finally:
        s.stop()


def test_event_log_forget_user_in_memory_and_on_disk(tmp_path):
    for path in (None, tmp_path / "t.events"):
        log = EventLog(path)
        try:
            log.append(MemoryEvent(EventType.CREATED, "c1", "gone", None, (WORD,), {"content": WORD}))
            log.append(MemoryEvent(EventType.CREATED, "c2", "kept", None, ("x",), {"content": "hello"}))
            log.append(MemoryEvent(EventType.PATTERN_DETECTED, None, None, None, (), {"key": "k"}))
            assert log.forget_user("gone") == 1
            assert log.forget_user("gone") == 0
            got, _ = log.read(0, EventFilter())
            assert [(e["chunk_id"], e["user_id"]) for e in got] == [("c2", "kept"), (None, None)]
            assert log.last_seq() == 3  # sequence numbers are not reused
            if path is not None:
                assert _files_holding(tmp_path, WORD.encode()) == []
        finally:
            log.close()


def test_the_event_stream_outlives_the_read_timeout_and_bad_ids_are_refused(tmp_path):
    # A trial saw every stream cut at --read-timeout (the wait for the client's disconnect
    # was timed as if it were the body), and a huge Last-Event-ID end in a server error.
    import time

    s = start_server(ServerConfig(tmp_path, {ADMIN: "acme"}, embedder=EMBEDDER, read_timeout=1.0))
    try:
        with s.http(ADMIN) as h:
            t0 = time.monotonic()
            r = h.get("/api/v1/events", params={"after": 0, "max_seconds": 3}, timeout=20)
            assert r.status_code == 200 and time.monotonic() - t0 >= 2.5
            r = h.get("/api/v1/events", params={"max_seconds": 1}, headers={"Last-Event-ID": "9" * 23})
            assert r.status_code == 400 and "Last-Event-ID" in r.text
            r = h.get("/api/v1/events", params={"max_seconds": 1, "after": "9" * 23})
            assert r.status_code == 422
    finally:
        s.stop()
