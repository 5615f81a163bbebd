"""The complete memory service (issue 20): per-memory routes, the design document's contract,
user-scoped keys, events over HTTP (SSE across a restart, signed webhooks), request ids,
metrics, and a client that never blocks an agent on a stalled server."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import socket
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beeweave_core.client import BeeWeaveClient
from beeweave_core.server import ServerConfig
from tests.service.service_support import EMBEDDER, start_server

ADMIN, ALICE, BOB = "admin-key-0001", "alice-key-0001", "bob-key-00001"
KEYS = {ADMIN: "acme", ALICE: {"tenant": "acme", "users": ["alice"]}, BOB: {"tenant": "acme", "users": ["bob"]}}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    root = tmp_path_factory.mktemp("svc")
    s = start_server(ServerConfig(root, KEYS, embedder=EMBEDDER))
    yield s
    s.stop()


def _h(srv, key):
    return srv.http(key)


def test_memory_crud_list_and_redaction(srv):
    with _h(srv, ADMIN) as h:
        r = h.post("/api/v1/memories", json={"content": "Call me at alice@example.com about the nginx deploy",
                                             "user_id": "alice", "tags": ["nginx"], "pinned": True,
                                             "metadata": {"category": "ops"}, "status": "active"})
        assert r.status_code == 201, r.text
        m = r.json()
        assert "alice@example.com" not in m["raw_content"] and m["pinned"] and m["tags"] == ["nginx"]
        mid = m["id"]
        r = h.patch(f"/api/v1/memories/{mid}", json={"tags": ["nginx", "prod"], "confidence": 0.5,
                                                     "expires_at": "2999-01-01T00:00:00Z"})
        assert r.status_code == 200 and r.json()["tags"] == ["nginx", "prod"] and r.json()["confidence"] == 0.5
        assert h.get(f"/api/v1/memories/{mid}").json()["expires_at"].startswith("2999-01-01")
        assert h.get(f"/api/v1/memories/{mid}/relationships").json()["relationships"] == []
        for i in range(7):
            assert h.post("/api/v1/memories", json={"content": f"listing item number {i} for pagination tests",
                                                    "user_id": "carol", "timestamp": 1_700_000_000 + i // 2,
                                                    "status": "active"}).status_code == 201
        seen, cursor = [], None
        while True:
            page = h.get("/api/v1/memories", params={"user_id": "carol", "limit": 3,
                                                     **({"cursor": cursor} if cursor else {})}).json()
            seen += [c["id"] for c in page["memories"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == len(set(seen)) == 7
        got = h.get("/api/v1/memories", params={"metadata": json.dumps({"category": "ops"})}).json()["memories"]
        assert [c["id"] for c in got] == [mid]
        assert h.delete(f"/api/v1/memories/{mid}").json() == {"id": mid, "deleted": True}
        assert h.get(f"/api/v1/memories/{mid}").status_code == 404
        # The spec mismatch of old: this is no route, not a user named "0/export".
        assert h.delete("/api/v1/users/0/export").status_code in (404, 405)
        assert h.get("/api/v1/dead-letters").json() == {"dead_letters": []}
        assert h.post("/api/v1/dead-letters/retry", json={}).json() == {"retried": 0}
        assert h.get("/api/v1/users/alice/facts").json()["facts"] == {}


def test_the_design_documents_client_runs(srv):
    """The design's payloads, as its client sends them (with an API key header)."""
    headers = {"X-API-Key": ADMIN}
    payload = {"session_id": "sess-1", "user_id": "dave", "query": "How do I reload nginx without downtime?",
               "agent_response": "Run nginx -s reload; it re-reads the config gracefully.",
               "intermediate_steps": [[{"tool": "shell", "tool_input": "nginx -t", "log": "check"},
                                       "nginx: configuration file /etc/nginx/nginx.conf test is successful"]],
               "metadata": {"timestamp": datetime.now().isoformat(), "tags": ["nginx"]}}
    r = httpx.post(f"{srv.url}/api/v1/ingest", json=payload, headers=headers, timeout=5)
    assert r.status_code == 202, r.text
    assert httpx.post(f"{srv.url}/api/v1/flush", params={"timeout": 20}, headers=headers, timeout=30).json()["drained"]
    r = httpx.post(f"{srv.url}/api/v1/search/semantic", json={"query": "reload nginx", "session_id": "sess-1",
                                                               "top_k": 3, "tags": ["nginx"]},
                   headers=headers, timeout=5)
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert results and results[0]["query"] == payload["query"]
    assert results[0]["agent_response"] == payload["agent_response"] and results[0]["score"] > 0
    assert all("nginx" in x["tags"] and x["tags"][0] == "nginx" for x in results)  # the caller's tag first


def test_request_id_and_metrics(srv):
    with _h(srv, ADMIN) as h:
        r = h.post("/api/v1/search", json={"query": "nginx"}, headers={"X-Request-ID": "req-123"})
        assert r.headers["x-request-id"] == "req-123"
        assert len(h.get("/healthz").headers["x-request-id"]) == 32
        text = h.get("/metrics").text
    assert re.search(r'beeweave_http_request_duration_seconds_bucket\{[^}]*route="/api/v1/search"', text)
    assert 'beeweave_memories{tenant="acme"}' in text and 'beeweave_ingest_queue_depth{tenant="acme"}' in text


ROUTES = ["get", "patch", "delete", "history", "relationships", "list", "export", "forget", "trace", "search",
          "semantic", "feedback", "facts", "stats", "dead", "retry", "pending", "approve", "reject", "resolve",
          "queue", "maintain", "hot", "ingest", "add", "relate", "events"]


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(target=st.sampled_from(["bob", "eve", "alice ", "Alice", "alice/x"]))
def test_a_user_scoped_key_never_touches_another_users_memories(srv, route, target):
    """Every route, with alice's key, against another user's memory (ids that look like alice's too)."""
    with _h(srv, ADMIN) as admin, _h(srv, ALICE) as h:
        mid = admin.post("/api/v1/memories", json={"content": f"{target}'s secret plan about the nginx cluster",
                                                   "user_id": target, "session_id": "shared",
                                                   "status": "active"}).json()["id"]
        calls = {
            "get": lambda: h.get(f"/api/v1/memories/{mid}"),
            "patch": lambda: h.patch(f"/api/v1/memories/{mid}", json={"pinned": True}),
            "delete": lambda: h.delete(f"/api/v1/memories/{mid}"),
            "history": lambda: h.get(f"/api/v1/memories/{mid}/history"),
            "relationships": lambda: h.get(f"/api/v1/memories/{mid}/relationships"),
            "list": lambda: h.get("/api/v1/memories", params={"user_id": target}),
            "export": lambda: h.get(f"/api/v1/users/{quote(target, safe='')}/export"),
            "forget": lambda: h.delete(f"/api/v1/users/{quote(target, safe='')}"),
            "trace": lambda: h.get("/api/v1/sessions/shared/trace"),
            "search": lambda: h.post("/api/v1/search", json={"query": "secret plan nginx", "k": 50}),
            "semantic": lambda: h.post("/api/v1/search/semantic", json={"query": "secret plan", "top_k": 50}),
            "feedback": lambda: h.post("/api/v1/feedback", json={"chunk_ids": [mid], "signal": "up"}),
            "facts": lambda: h.get(f"/api/v1/users/{quote(target, safe='')}/facts"),
            "stats": lambda: h.get("/api/v1/stats", params={"user_id": target}),
            "dead": lambda: h.get("/api/v1/dead-letters", params={"user_id": target}),
            "retry": lambda: h.post("/api/v1/dead-letters/retry", json={}),
            "pending": lambda: h.get("/api/v1/review/pending", params={"user_id": target}),
            "approve": lambda: h.post("/api/v1/review/approve", json={"ids": [mid]}),
            "reject": lambda: h.post("/api/v1/review/reject", json={"ids": [mid]}),
            "resolve": lambda: h.post("/api/v1/review/resolve", json={"chunk_id": mid, "decision": "delete"}),
            "queue": lambda: h.get("/api/v1/review/queue", params={"user_id": target}),
            "maintain": lambda: h.post("/api/v1/maintain", params={"user_id": target}),
            "hot": lambda: h.get("/api/v1/patterns/hot", params={"user_id": target}),
            "ingest": lambda: h.post("/api/v1/ingest", json={"user_id": target, "query": "q?", "response": "a."}),
            "add": lambda: h.post("/api/v1/memories", json={"content": "planted", "user_id": target}),
            "relate": lambda: h.post("/api/v1/relationships", json={"source_id": mid, "target_id": mid,
                                                                    "type": "related"}),
            "events": lambda: h.get("/api/v1/events", params={"after": 0, "max_seconds": 0.3}),
        }
        r = calls[route]()
        assert r.status_code in (200, 403, 404), (route, r.status_code, r.text)
        assert f"{target}'s secret" not in r.text, route
        assert r.status_code != 200 or mid not in r.text, route  # an error may echo the id it was asked for
        assert admin.get("/api/v1/memories", params={"user_id": target}).json()["memories"][-1]["id"] == mid
        after = admin.get(f"/api/v1/memories/{mid}").json()
        assert after["id"] == mid and not after["pinned"] and after["weight"] == 1.0, route
        admin.delete(f"/api/v1/memories/{mid}")


def _sse(url, key, params, last_id, want, timeout=20.0):
    """Read SSE events until ``want`` arrived; returns [(id, type, data)]."""
    out = []
    headers = {"X-API-Key": key, **({"Last-Event-ID": last_id} if last_id else {})}
    with httpx.stream("GET", f"{url}/api/v1/events", params=params, headers=headers, timeout=timeout) as r:
        assert r.status_code == 200
        ev = {}
        for line in r.iter_lines():
            if line.startswith("id:"):
                ev["id"] = line[3:].strip()
            elif line.startswith("event:"):
                ev["type"] = line[6:].strip()
            elif line.startswith("data:"):
                ev["data"] = json.loads(line[5:].strip())
            elif not line and "data" in ev:
                out.append(ev)
                ev = {}
                if len(out) >= want:
                    break
    return out


def test_sse_filtered_by_tag_across_a_restart(tmp_path):
    cfg = ServerConfig(tmp_path, {ADMIN: "acme"}, embedder=EMBEDDER)
    s = start_server(cfg)
    got: list = []
    reader = threading.Thread(target=lambda: got.extend(_sse(s.url, ADMIN, {"tag": "deploy"}, "0", 2)))
    reader.start()
    time.sleep(0.5)
    with s.http(ADMIN) as h:
        mid = h.post("/api/v1/memories", json={"content": "deploy with make deploy on the staging cluster",
                                               "user_id": "u", "tags": ["deploy"], "status": "active"}).json()["id"]
        h.post("/api/v1/memories", json={"content": "unrelated memory about lunch at noon today",
                                         "user_id": "u", "tags": ["food"], "status": "active"})
        h.patch(f"/api/v1/memories/{mid}", json={"pinned": True})
    reader.join(20)
    assert [e["type"] for e in got] == ["memory.created", "memory.updated"]
    assert all(e["data"]["chunk_id"] == mid for e in got)
    last = got[-1]["id"]
    s.stop()
    s = start_server(cfg)  # restart: the event log is on disk beside the store
    try:
        with s.http(ADMIN) as h:
            h.delete(f"/api/v1/memories/{mid}")
        rest = _sse(s.url, ADMIN, {"tag": "deploy"}, last, 1)
        assert [e["type"] for e in rest] == ["memory.deleted"] and rest[0]["data"]["chunk_id"] == mid
        assert int(rest[0]["id"]) > int(last)
    finally:
        s.stop()


def test_webhooks_are_signed_and_delivered(tmp_path):
    received: list = []

    class Hook(BaseHTTPRequestHandler):
        fails = 1  # the first delivery fails: it must be retried

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if Hook.fails:
                Hook.fails -= 1
                self.send_response(500)
                self.end_headers()
                return
            received.append((dict(self.headers), body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass

    hook = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    secret = "s3cret-hook"
    s = start_server(ServerConfig(tmp_path, {ADMIN: "acme"}, embedder=EMBEDDER, webhooks=[
        {"url": f"http://127.0.0.1:{hook.server_port}/hook", "secret": secret, "types": ["memory.created"],
         "first_delay": 0.1}]))
    try:
        with s.http(ADMIN) as h:
            mid = h.post("/api/v1/memories", json={"content": "a memory that a webhook must hear about",
                                                   "user_id": "u", "status": "active"}).json()["id"]
            h.delete(f"/api/v1/memories/{mid}")  # not a subscribed type
        deadline = time.monotonic() + 10
        while not received and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
    finally:
        s.stop()
        hook.shutdown()
    assert len(received) == 1
    headers, body = received[0]
    mac = hmac.new(secret.encode(), headers["X-BeeWeave-Timestamp"].encode() + b"." + body, hashlib.sha256)
    assert headers["X-BeeWeave-Signature"] == "sha256=" + mac.hexdigest()
    assert json.loads(body)["chunk_id"] == mid and headers["X-BeeWeave-Event"] == "memory.created"


@pytest.mark.slow
def test_a_stalled_server_costs_an_agent_at_most_two_seconds(tmp_path):
    """A server that accepts and never answers: the LangChain callback over BeeWeaveClient
    returns at once; the events are delivered once a real server answers on that port."""
    from langchain_core.runnables import RunnableLambda

    from beeweave_langchain import BeeWeaveCallbackHandler

    stall = socket.socket()
    stall.bind(("127.0.0.1", 0))
    stall.listen(64)
    port = stall.getsockname()[1]
    client = BeeWeaveClient(f"http://127.0.0.1:{port}", ADMIN)
    handler = BeeWeaveCallbackHandler(memory=client, user_id="agent-user")
    chain = RunnableLambda(lambda q: f"The answer to {q} is to restart the nginx service gracefully")
    t0 = time.perf_counter()
    for i in range(3):
        chain.invoke(f"question number {i} about nginx restarts", config={"callbacks": [handler]})
    took = time.perf_counter() - t0
    assert took <= 2.0, took
    t0 = time.perf_counter()
    with pytest.raises(Exception) as err:
        client.search("nginx", user_id="agent-user")
    assert time.perf_counter() - t0 <= 2.0 and "cannot reach" in str(err.value)
    assert client.pending_events() == 3
    stall.close()  # the stalled server goes; a real one comes up on the same port
    import uvicorn

    from beeweave_core.server import create_app

    app = create_app(ServerConfig(tmp_path, {ADMIN: "acme"}, embedder=EMBEDDER))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert client.flush(30)
        stored = client.list_memories(user_id="agent-user", limit=100).items
        events = {c.metadata.get("ingest", {}).get("event_id") for c in stored} - {None}
        assert len(events) == 3, [(c.raw_content[:60], c.metadata) for c in stored]
    finally:
        client.close()
        server.should_exit = True
        thread.join(10)


def test_the_server_resumes_queued_events_at_start(tmp_path):
    """Events a process left queued are stored when the server starts, before any request of
    the tenant (``/metrics`` needs no key and reports only opened tenants)."""
    from beeweave_core import BeeWeave
    from beeweave_core.ingest import IngestConfig
    from beeweave_core.store.sqlite import SQLiteStore

    (tmp_path / "t").mkdir()
    m = BeeWeave(backend=SQLiteStore(tmp_path / "t" / "acme.db"), embedder=EMBEDDER,
                 ingest=IngestConfig(autostart=False))
    for i in range(5):
        m.ingest({"user_id": "u", "query": f"left queued question {i} about deploys",
                  "response": f"answer {i}: deploy with make deploy"})
    assert m.pending_events() == 5
    m.close()
    s = start_server(ServerConfig(tmp_path / "t", {ADMIN: "acme"}, embedder=EMBEDDER))
    try:
        deadline = time.monotonic() + 20
        stored = -1.0
        while time.monotonic() < deadline:
            text = httpx.get(f"{s.url}/metrics", timeout=5).text
            found = re.search(r'^beeweave_memories\{tenant="acme"\} (\S+)$', text, re.M)
            stored = float(found.group(1)) if found else -1.0
            if stored >= 5 and 'beeweave_ingest_queue_depth{tenant="acme"} 0.0' in text:
                break
            time.sleep(0.1)
        assert stored >= 5  # the 5 turns (and a hot-pattern memory: the questions recur)
    finally:
        s.stop()


def test_dates_at_the_calendars_edge_are_400(srv):
    edge = "9999-12-31T23:59:59-12:00"  # its UTC time is past year 9999
    with _h(srv, ADMIN) as h:
        for method, path, body in [
            ("POST", "/api/v1/memories", {"content": "an edge date memory", "user_id": "u", "timestamp": edge}),
            ("POST", "/api/v1/memories", {"content": "an edge date memory", "user_id": "u", "expires_at": edge}),
            ("POST", "/api/v1/ingest", {"user_id": "u", "query": "q?", "response": "a.", "timestamp": edge}),
            ("POST", "/api/v1/ingest", {"user_id": "u", "query": "q?", "response": "a.", "expires_at": edge}),
            ("POST", "/api/v1/search", {"query": "edge", "filters": {"since": edge}}),
        ]:
            r = h.request(method, path, json=body)
            assert r.status_code == 400, (path, body, r.status_code, r.text)
        r = h.get("/api/v1/memories", params={"until": edge})
        assert r.status_code == 400, r.text


def test_each_request_is_logged_with_its_id_parameters_and_result_count(srv):
    import logging

    from beeweave_core.server.observe import JSONFormatter

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    log = logging.getLogger("beeweave.server.requests")
    handler, level, disabled = Keep(), log.level, log.disabled
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.disabled = False  # an earlier test's logging.config.dictConfig may have disabled existing loggers

    def mine() -> list[logging.LogRecord]:
        return [r for r in records if getattr(r, "request_id", None) == "trace-77"]

    try:
        with _h(srv, ADMIN) as h:
            h.post("/api/v1/search", json={"query": "nginx reload", "k": 3}, headers={"X-Request-ID": "trace-77"})
        # The line is written once the response is sent, so the client can have it first.
        deadline = time.monotonic() + 10
        while not mine() and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.disabled = disabled
    assert len(mine()) == 1
    line = json.loads(JSONFormatter().format(mine()[0]))
    assert line["route"] == "/api/v1/search" and line["status"] == 200 and line["tenant"] == "acme"
    assert line["p_k"] == 3 and isinstance(line["p_results"], int) and line["p_model"] == EMBEDDER


def test_the_async_client(srv):
    import asyncio

    from beeweave_core.async_client import AsyncBeeWeaveClient

    async def run():
        async with AsyncBeeWeaveClient(srv.url, ADMIN) as c:
            eid = await c.ingest({"user_id": "async-user", "query": "Which port does the api use?",
                                  "response": "The api listens on port 8443 behind the load balancer."})
            assert await c.flush(20)
            hits = await c.search("api port", user_id="async-user")
            assert hits and hits[0].chunk.id == f"{eid}@async-user:0"
            res = await c.search_semantic("api port", user_id="async-user")
            assert res[0]["agent_response"].startswith("The api listens on port 8443")
            mid = await c.add("async added memory about the staging database", user_id="async-user")
            assert (await c.get(mid)).user_id == "async-user" and await c.delete(mid)

    asyncio.run(run())


def test_user_defined_relationships(srv):
    with _h(srv, ADMIN) as h:
        a = h.post("/api/v1/memories", json={"content": "the api gateway routes traffic to the billing service",
                                             "user_id": "rel", "status": "active"}).json()["id"]
        b = h.post("/api/v1/memories", json={"content": "billing service owns the invoices database",
                                             "user_id": "rel", "status": "active"}).json()["id"]
        r = h.post("/api/v1/relationships", json={"source_id": a, "target_id": b, "type": "causes",
                                                  "weight": 0.8, "note": "from the architecture review"})
        assert r.status_code == 201, r.text
        assert r.json()["source_id"] == a and r.json()["target_id"] == b and r.json()["type"] == "causes"
        out = h.get(f"/api/v1/memories/{a}/relationships", params={"direction": "out"}).json()["relationships"]
        assert {"source_id": a, "target_id": b, "type": "causes"}.items() <= next(
            e for e in out if e["type"] == "causes").items()
        assert h.post("/api/v1/relationships", json={"source_id": a, "target_id": "nope",
                                                     "type": "causes"}).status_code == 404
    with _h(srv, ALICE) as h:  # alice's key cannot link rel's memories
        assert h.post("/api/v1/relationships", json={"source_id": a, "target_id": b,
                                                     "type": "x"}).status_code == 404


def test_a_hanging_webhook_receiver_does_not_hold_up_the_others():
    # A trial saw a receiver that hangs until the timeout delay every other webhook by ~5 s per
    # event (one delivery thread for all of them).
    from beeweave_core.server.event_log import Webhook, WebhookSender

    got: list = []
    release = threading.Event()

    class Hanging(BaseHTTPRequestHandler):
        def do_POST(self):
            release.wait(10)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass

    class Healthy(BaseHTTPRequestHandler):
        def do_POST(self):
            got.append((time.monotonic(), json.loads(self.rfile.read(int(self.headers["Content-Length"])))["seq"]))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a):
            pass

    servers = [ThreadingHTTPServer(("127.0.0.1", 0), cls) for cls in (Hanging, Healthy)]
    for srv in servers:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    sender = WebhookSender([Webhook(f"http://127.0.0.1:{srv.server_port}/hook", "s3cret-hook") for srv in servers],
                           timeout=3.0)
    try:
        sent = time.monotonic()
        for seq in range(1, 4):
            sender.submit("acme", {"seq": seq, "type": "memory.created"})
        deadline = time.monotonic() + 10
        while len(got) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [seq for _, seq in got] == [1, 2, 3]
        assert got[-1][0] - sent < 2.0  # not behind the hanging receiver's 3 s timeouts
    finally:
        release.set()
        sender.close()
        for srv in servers:
            srv.shutdown()
