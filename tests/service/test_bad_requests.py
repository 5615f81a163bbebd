"""Bad input gets a 4xx that says what is wrong, never a 500, and changes nothing."""

from __future__ import annotations

import json
from urllib.parse import quote

import httpx
import pytest

from tests.service.service_support import ACME_KEY, event

LONE = '"\\ud800"'  # a lone surrogate, as JSON can carry it (escaped)


@pytest.fixture(scope="module")
def h(live, acme):
    acme.ingest(event("alice", "What is the deploy command?", "Run make deploy.", session_id="s1", id="ev-1"))
    assert acme.flush(20)
    with live.http(ACME_KEY) as client:
        yield client


def _raw(h: httpx.Client, method: str, path: str, body: str | bytes, ctype: str = "application/json") -> httpx.Response:
    return h.request(method, path, content=body.encode() if isinstance(body, str) else body,
                     headers={"Content-Type": ctype})


def _error(r: httpx.Response, status: int, *words: str) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert set(body) >= {"error", "detail"}
    for w in words:
        assert w in body["detail"], (w, body)
    return body


def test_malformed_json(h):
    _error(_raw(h, "POST", "/api/v1/search", '{"query": "deploy", "k": 3'), 422, "malformed JSON")
    _error(_raw(h, "POST", "/api/v1/ingest", "{'user_id': 'x'}"), 422, "malformed JSON")
    _error(_raw(h, "POST", "/api/v1/search", b'{"query": "\xff\xfe"}'), 400, "UTF-8")
    _error(_raw(h, "POST", "/api/v1/search", "[" * 100_000), 413)  # body limit first
    _error(_raw(h, "POST", "/api/v1/search", "[" * 20_000 + "]" * 20_000), 400)  # too deep for the parser


def test_wrong_shapes_and_types(h):
    _error(_raw(h, "POST", "/api/v1/search", '["deploy"]'), 422)
    _error(_raw(h, "POST", "/api/v1/search", '"deploy"'), 422)
    _error(_raw(h, "POST", "/api/v1/search", ""), 422, "needs a JSON object")
    _error(h.post("/api/v1/search", json={"query": "deploy", "k": "five"}), 422, "k:")
    _error(h.post("/api/v1/search", json={"query": "deploy", "k": -1}), 422, "k:")
    _error(h.post("/api/v1/search", json={"query": 5}), 422, "query:")
    _error(h.post("/api/v1/search", json={"query": "deploy", "k": 101}), 400, "at most 100")
    _error(h.post("/api/v1/search", json={"query": "deploy", "mmr": 2}), 422, "mmr:")
    _error(h.post("/api/v1/search", json={"query": "deploy", "fusion": "best"}), 422, "fusion:")
    _error(h.post("/api/v1/search", json={"query": "   "}), 400, "query is empty")
    _error(h.post("/api/v1/search", json={"query": "d", "query_embedding": [0.0] * 64}), 400, "all zeros")
    _error(h.post("/api/v1/search", json={"query": "d", "query_embedding": [1.0] * 3}), 400, "(64,)")
    _error(_raw(h, "POST", "/api/v1/search", '{"query": "deploy", "min_score": NaN}'), 422, "min_score:")
    _error(_raw(h, "POST", "/api/v1/search", '{"query": "deploy", "min_score": 1e999}'), 422, "min_score:")
    _error(_raw(h, "POST", "/api/v1/search", '{"query": "deploy", "k": 1' + "0" * 5000 + "}"), 400)
    _error(h.post("/api/v1/search", json={"query": "deploy"}, headers={"Content-Type": "text/plain"}), 422)
    _error(h.post("/api/v1/feedback", json={"chunk_ids": ["ev-1@alice:0"], "signal": "love"}), 422, "signal:")
    _error(h.post("/api/v1/feedback", json={"chunk_ids": [], "signal": "up"}), 422, "chunk_ids:")
    _error(h.post("/api/v1/review/resolve", json={"chunk_id": "ev-1@alice:0", "decision": "maybe"}), 422, "decision:")
    _error(h.get("/api/v1/review/pending", params={"limit": -5}), 422, "limit:")
    _error(h.get("/api/v1/stats", params={"top": "many"}), 422, "top:")
    _error(h.post("/api/v1/flush", params={"timeout": -1}), 422, "timeout:")
    _error(h.post("/api/v1/flush", params={"timeout": "soon"}), 422, "timeout:")
    assert h.post("/api/v1/flush", params={"timeout": 1e9}).json()["drained"]  # a long wait is capped, not refused


def test_unknown_fields_and_filter_keys(h):
    # An undeclared metadata field: the engine's error, with the keys it knows.
    _error(h.post("/api/v1/search", json={"query": "deploy", "filters": {"colour": "red"}}), 400,
           "unknown filter key(s) ['colour']; known keys: user_id")
    _error(h.post("/api/v1/search", json={"query": "deploy", "topk": 3}), 422, "topk")
    _error(h.post("/api/v1/search", json={"query": "deploy", "filters": {"status": "deleted"}}), 422, "status")
    _error(h.post("/api/v1/search", json={"query": "deploy", "filters": {"since": "some day"}}), 400,
           "time phrase")
    _error(h.post("/api/v1/search", json={"query": "d", "filters": {"since": "2030-01-01", "until": "2020-01-01"}}),
           400, "after")
    _error(h.post("/api/v1/search", json={"query": "deploy", "filters": {"ids": []}}), 400, "empty")
    _error(h.post("/api/v1/search", json={"query": "deploy", "expand": {"hops": 9}}), 422, "expand")
    _error(h.post("/api/v1/ingest", json={**event("alice", "q", "r"), "colour": "red"}), 422, "colour")


def test_bad_events_are_refused_and_not_queued(h):
    _error(h.post("/api/v1/ingest", json={"query": "q", "response": "r"}), 422, "user_id: Field required")
    _error(h.post("/api/v1/ingest", json=event("alice", "", "")), 400, "nothing to remember")
    _error(h.post("/api/v1/ingest", json=event("alice", "q", "r", timestamp="soon")), 400, "ISO 8601")
    _error(h.post("/api/v1/ingest", json=event("alice", "q", "r", timestamp=1e20)), 400, "out of range")
    _error(h.post("/api/v1/ingest", json=event("alice", "q", "r", intermediate_steps=[{"tool": ""}])), 422)
    _error(_raw(h, "POST", "/api/v1/ingest", json.dumps(event("alice", "q", "r"))[:-1] + ', "metadata": {"x": NaN}}'),
           400, "metadata")
    assert h.post("/api/v1/flush").json()["pending"] == 0


def test_oversized_bodies_get_413(h):
    big = json.dumps(event("alice", "q", "x" * 70_000))
    _error(_raw(h, "POST", "/api/v1/ingest", big), 413, "larger than the limit of 65536 bytes")

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(20):
            yield b" " * 8192

    r = h.post("/api/v1/search", content=chunks(), headers={"Content-Type": "application/json"})
    _error(r, 413, "65536")


def test_lone_surrogates_are_refused(h):
    for path, body in [
        ("/api/v1/search", '{"query": ' + LONE + "}"),
        ("/api/v1/search", '{"query": "deploy", "user_id": ' + LONE + "}"),
        ("/api/v1/search", '{"query": "deploy", "filters": {"tags": [' + LONE + "]}}"),
        ("/api/v1/search", '{"query": "deploy", "filters": {' + LONE + ': "x"}}'),
        ("/api/v1/ingest", '{"user_id": "alice", "query": "q", "response": ' + LONE + "}"),
        ("/api/v1/ingest", '{"user_id": "alice", "query": "q", "response": "r", "metadata": {"a": [[' + LONE + "]]}}"),
        ("/api/v1/feedback", '{"chunk_ids": [' + LONE + '], "signal": "up"}'),
        ("/api/v1/review/approve", '{"ids": [' + LONE + "]}"),
        ("/api/v1/review/reject", '{"ids": ["ev-1@alice:0"], "reason": ' + LONE + "}"),
    ]:
        r = _raw(h, "POST", path, body)
        _error(r, 422, "surrogate")
        r.content.decode("ascii")  # the reply escapes whatever it echoes


def test_ids_that_look_like_paths_are_just_ids(live, h):
    for user in ("../../etc/passwd", "..", "a/../../b", "%2e%2e", "C:\\Windows\\win.ini", "alice\x00"):
        r = h.get(f"/api/v1/users/{quote(user, safe='')}/export")
        assert r.status_code in (400, 404, 422), (user, r.status_code)  # 400: a control character
    r = h.get("/api/v1/users/..%2F..%2Fetc%2Fpasswd/export")
    _error(r, 404, "no data of user '../../etc/passwd'")
    r = h.delete("/api/v1/users/..%2Facme")
    assert r.status_code == 200 and r.json()["deleted"] == 0
    assert h.get("/api/v1/sessions/..%2F..%2Fs1/trace").json()["chunks"] == []
    assert [c["id"] for c in h.get("/api/v1/sessions/s1/trace").json()["chunks"]] == ["ev-1@alice:0"]
    # Only the configured tenants' files exist (the server opens every tenant at start).
    assert {p.name.split(".")[0] for p in live.root.iterdir()} <= {"acme", "beta"}


def test_unknown_routes_and_methods_are_json(h):
    _error(h.get("/api/v1/nothing-here"), 404)
    _error(h.get("/api/v1/search"), 405)
    _error(h.put("/api/v1/ingest", json={}), 405)
