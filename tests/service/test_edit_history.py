"""Over REST, an edit of a memory's text keeps the earlier version: ``PATCH`` then ``GET .../history``."""

from __future__ import annotations

from beeweave_core.server import ServerConfig
from tests.service.service_support import EMBEDDER, start_server

KEY = "edit-key-00001"


def test_patch_then_history_returns_the_earlier_texts_oldest_first(tmp_path):
    srv = start_server(ServerConfig(tmp_path / "tenants", {KEY: "acme"}, embedder=EMBEDDER))
    try:
        with srv.http(KEY) as h:
            r = h.post("/api/v1/memories", json={"content": "Alice works at Acme", "user_id": "alice",
                                                 "status": "active"})
            assert r.status_code == 201, r.text
            mid = r.json()["id"]
            assert h.patch(f"/api/v1/memories/{mid}", json={"tags": ["job"]}).status_code == 200  # no new text
            assert h.get(f"/api/v1/memories/{mid}/history").json()["versions"] == []
            for text in ("Alice works at Initech", "Alice works at Globex"):
                r = h.patch(f"/api/v1/memories/{mid}", json={"content": text})
                assert r.status_code == 200 and r.json()["raw_content"] == text, r.text
            assert h.patch(f"/api/v1/memories/{mid}", json={"confidence": "high"}).status_code == 422
            versions = h.get(f"/api/v1/memories/{mid}/history").json()["versions"]
            assert [v["chunk"]["raw_content"] for v in versions] == ["Alice works at Acme", "Alice works at Initech"]
            assert [v["reason"] for v in versions] == ["edit", "edit"] and versions[0]["seq"] < versions[1]["seq"]
            assert versions[1]["chunk"]["tags"] == ["job"]
            edits = h.get(f"/api/v1/memories/{mid}/lineage").json()["edits"]
            assert [e["seq"] for e in edits] == [v["seq"] for v in versions]
    finally:
        srv.stop()
