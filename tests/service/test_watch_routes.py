"""Standing queries over REST: a watch made with POST /watches is delivered on the SSE stream,
and the lineage route answers for a memory."""

from __future__ import annotations

import threading
import time

import pytest

from beeweave_core import InvalidInputError
from beeweave_core.server import ServerConfig
from tests.service.service_support import EMBEDDER, start_server
from tests.service.test_memory_service import ADMIN, _sse


def test_a_watch_made_over_rest_arrives_on_the_event_stream(tmp_path):
    s = start_server(ServerConfig(tmp_path, {ADMIN: "acme"}, embedder=EMBEDDER))
    try:
        with s.http(ADMIN) as h:
            r = h.post("/api/v1/watches", json={"query": "nightly database backup", "user_id": "u",
                                                "agent_id": "ops-bot", "min_relevance": 0.3})
            assert r.status_code == 201, r.text
            wid = r.json()["id"]
            got: list = []
            reader = threading.Thread(target=lambda: got.extend(
                _sse(s.url, ADMIN, {"type": "watch.matched"}, "0", 1)))
            reader.start()
            time.sleep(0.5)
            h.post("/api/v1/memories", json={"content": "lunch is at noon", "user_id": "u", "status": "active"})
            mid = h.post("/api/v1/memories", json={"content": "the nightly database backup runs at 2am",
                                                   "user_id": "u", "status": "active"}).json()["id"]
            reader.join(20)
            assert [(e["type"], e["data"]["chunk_id"], e["data"]["agent_id"], e["data"]["data"]["watch_id"])
                    for e in got] == [("watch.matched", mid, "ops-bot", wid)]
            listed = h.get("/api/v1/watches").json()["watches"]
            assert [(w["id"], w["fired"]) for w in listed] == [(wid, 1)]
            lineage = h.get(f"/api/v1/memories/{mid}/lineage").json()
            assert lineage["id"] == mid and lineage["user_id"] == "u"
            assert h.delete(f"/api/v1/watches/{wid}").json() == {"id": wid, "deleted": True}
            assert h.get("/api/v1/watches").json()["watches"] == []
    finally:
        s.stop()


def test_serve_with_a_maintenance_interval_maintains_each_tenant_in_the_background(tmp_path):
    s = start_server(ServerConfig(tmp_path, {ADMIN: "acme"}, embedder=EMBEDDER, maintain_interval=0.05))
    try:
        with s.http(ADMIN) as h:
            ids = [h.post("/api/v1/memories", json={"content": "dark mode in the editor please", "user_id": "u",
                                                    "status": "active"}).json()["id"] for _ in range(2)]
        svc = s.app.state.stores.opened()["acme"]
        schedule = svc.memory.parts.lifecycle.schedule
        runs = schedule.runs
        assert schedule.running and schedule.wait_runs(runs + 2, timeout=30) and schedule.errors == 0
        assert sorted(c.status.value for c in svc.memory.get_many(ids)) == ["active", "merged"]
    finally:
        s.stop()
    assert not schedule.running


def test_a_maintenance_interval_must_be_positive(tmp_path):
    for bad in (0, -1, True, float("inf")):
        with pytest.raises(InvalidInputError, match="maintain_interval"):
            ServerConfig(tmp_path, {ADMIN: "acme"}, maintain_interval=bad)
