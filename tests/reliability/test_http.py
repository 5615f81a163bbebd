"""Bad input over HTTP (a live uvicorn on 127.0.0.1), and path traversal in export paths.

Every body or path a client can send gets a 2xx or a 4xx with a JSON error, never a 5xx;
afterwards every tenant store verifies, the ingest queue drains without dead letters, and
no file outside the tenants' directory was touched. Fixed cases: a 10 MB body, JSON nested
10,000 deep, invalid UTF-8, lone surrogates, NUL, SQL-looking and path-traversal user and
session ids. The CLI's ``export -o`` writes where its user asks, and says so in one line
when it cannot.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.server import ServerConfig
from tests.reliability.fuzz_support import SQL, texts, words
from tests.reliability.rel_support import examples
from tests.service.service_support import LiveServer, start_server

pytestmark = pytest.mark.slow

KEY = "rel-key-00001"
JSON = {"content-type": "application/json"}
json_junk = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False),
              texts),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)), max_leaves=10)


def maybe(valid: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(valid, valid, json_junk)


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("http")
    (base / "sentinel.db").write_text("not a store")  # beside the tenants' directory: must stay as it is
    srv = start_server(ServerConfig(base / "tenants", {KEY: "acme"}, embedder="beeweave:hashing-32"))
    with srv.http(KEY) as h:
        for i in range(5):
            assert h.post("/api/v1/ingest", json={"user_id": "alice", "id": f"seed{i}", "session_id": "s1",
                                                  "query": f"Where do we deploy service {i}?",
                                                  "response": f"Service {i} runs on the kubernetes cluster."}
                          ).status_code == 202
        assert h.post("/api/v1/flush").json()["drained"]
    yield srv
    srv.stop()


def _send(h, method: str, path: str, body: object) -> None:
    content = json.dumps(body, ensure_ascii=True)  # lone surrogates travel as \\ud800
    r = h.request(method, path, content=content, headers=JSON)
    assert r.status_code < 500, (method, path, content[:300], r.status_code, r.text[:300])
    if r.status_code >= 400:
        assert set(r.json()) >= {"error", "detail"}


search_body = st.fixed_dictionaries({"query": maybe(texts)}, optional={
    "user_id": maybe(words), "k": maybe(st.integers(-5, 200)), "filters": maybe(st.dictionaries(
        st.sampled_from(["user_id", "tags", "ids", "since", "status", "session_id", "bogus"]), json_junk, max_size=3)),
    "fusion": maybe(st.sampled_from(["zscore", "rrf"])), "expand": maybe(st.booleans()), "mmr": json_junk,
    "min_score": json_junk, "loosen": json_junk, "query_embedding": maybe(st.lists(st.floats(-1, 1), min_size=32,
                                                                                    max_size=32))})
event_body = st.fixed_dictionaries({"user_id": maybe(words)}, optional={
    "query": maybe(texts), "response": maybe(texts), "session_id": maybe(words), "metadata": json_junk,
    "intermediate_steps": maybe(st.lists(st.fixed_dictionaries({"tool": maybe(words)}, optional={
        "input": json_junk, "output": json_junk, "error": json_junk}), max_size=2)),
    "timestamp": json_junk, "feedback": json_junk, "bogus": json_junk})


def ids_body(ids: list[str]) -> st.SearchStrategy:
    return st.fixed_dictionaries({"ids": maybe(st.lists(maybe(st.sampled_from(ids)), max_size=3))},
                                 optional={"reason": json_junk})


@settings(max_examples=examples(40), derandomize=True, database=None, deadline=None)
@given(route=st.sampled_from(["search", "ingest", "feedback", "approve", "reject", "resolve"]), data=st.data())
def _fuzz_routes(live: LiveServer, route: str, data) -> None:
    body = {"search": search_body, "ingest": event_body, "approve": ids_body(["seed0@alice:0", "seed1@alice:0", "nope"]),
            "reject": ids_body(["nope", "x:0"]),  # the seeds stay: the path test counts them
            "feedback": st.fixed_dictionaries({"chunk_ids": maybe(st.lists(st.sampled_from(["seed0@alice:0", "x"]))),
                                               "signal": maybe(st.sampled_from(["up", "down", "used"]))}),
            "resolve": st.fixed_dictionaries({"chunk_id": maybe(words), "decision": json_junk})}[route]
    path = {"approve": "/api/v1/review/approve", "reject": "/api/v1/review/reject",
            "resolve": "/api/v1/review/resolve"}.get(route, f"/api/v1/{route}")
    with live.http(KEY) as h:
        _send(h, "POST", path, data.draw(st.one_of(body, json_junk)))


def test_random_bodies_never_get_a_server_error(live) -> None:
    _fuzz_routes(live)
    with live.http(KEY) as h:
        assert h.post("/api/v1/flush", params={"timeout": 30}).json()["drained"]
    for svc in live.app.state.stores.opened().values():
        assert svc.memory.dead_letters() == []
        assert svc.memory.verify().ok


@settings(max_examples=examples(40), derandomize=True, database=None, deadline=None)
@given(segment=st.one_of(texts.filter(lambda s: s.strip()), st.sampled_from(SQL + ["../../etc/passwd", "..", "%2e%2e",
                                                                            "../tenants/acme.db", "/etc/passwd"])))
def _fuzz_paths(live: LiveServer, segment: str) -> None:
    quoted = quote(segment.encode("utf-8", "surrogatepass"), safe="")  # a surrogate: bytes that are not UTF-8
    routes = [("GET", f"/api/v1/users/{quoted}/export"), ("GET", f"/api/v1/sessions/{quoted}/trace"),
              ("DELETE", f"/api/v1/users/{quoted}")]
    if segment.isprintable() and not any(0xD800 <= ord(c) <= 0xDFFF for c in segment):
        routes.append(("GET", f"/api/v1/users/{segment}/export"))  # as typed: ../ and all
    with live.http(KEY) as h:
        for method, path in routes:
            r = h.request(method, path)
            assert r.status_code < 500, (method, path, r.status_code, r.text[:300])


def test_path_traversal_and_sql_in_ids_touch_no_file(live) -> None:
    base = live.root.parent
    before = {p: p.stat().st_mtime_ns for p in base.rglob("*") if "tenants" not in p.parts}
    _fuzz_paths(live)
    after = {p: p.stat().st_mtime_ns for p in base.rglob("*") if "tenants" not in p.parts}
    assert after == before
    assert sorted(p.name for p in (base / "tenants").iterdir() if p.name.endswith(".db")) == ["acme.db"]
    with live.http(KEY) as h:
        kept = {c["id"] for c in h.get("/api/v1/users/alice/export").json()["chunks"]}
        assert {f"seed{i}@alice:0" for i in range(5)} <= kept  # nothing of alice was forgotten
    for svc in live.app.state.stores.opened().values():
        assert svc.memory.verify().ok


@pytest.mark.parametrize("name,body,status", [
    ("10 MB body", b'{"query": "' + b"a" * 10_000_000 + b'"}', 413),
    ("JSON nested 10,000 deep", b"[" * 10_000 + b"]" * 10_000, 400),
    ("filter nested 5,000 deep", b'{"query": "x", "filters": {"tags": ' + b"[" * 5_000 + b"]" * 5_000 + b"}}", 400),
    ("invalid UTF-8", b'{"query": "\xff\xfe"}', 400),
    ("lone surrogate", b'{"query": "\\ud800"}', 422),
    ("not JSON", b"'; DROP TABLE chunks; --", 422),
])
def test_hostile_bodies(live, name: str, body: bytes, status: int) -> None:
    with live.http(KEY) as h:
        r = h.post("/api/v1/search", content=body, headers=JSON)
    assert r.status_code == status, r.text[:300]
    assert set(r.json()) >= {"error", "detail"}


def test_deeply_nested_metadata_over_http_is_a_client_error(live) -> None:
    body = '{"user_id": "a", "query": "q?", "metadata": ' + '{"a":' * 5_000 + "1" + "}" * 5_000 + "}"
    with live.http(KEY) as h:
        r = h.post("/api/v1/ingest", content=body, headers=JSON)
    assert 400 <= r.status_code < 500


# -- the CLI ------------------------------------------------------------------------------------------
def test_cli_export_to_a_traversing_path(tmp_path: Path, monkeypatch, capsys) -> None:
    from beeweave_core.cli import main

    db = tmp_path / "store" / "memory.db"
    db.parent.mkdir()
    with BeeWeave(db, embedder=HashingEmbedder(32)) as m:
        m.add("alice deploys on friday", user_id="alice")
        m.add("bob deploys on monday", user_id="bob")
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    args = ["--store", str(db), "--embedder", "beeweave:hashing-32", "export", "alice", "-o", "../../etc/x"]
    assert main(args) == 1  # tmp/etc does not exist: one line, no traceback, nothing written
    err = capsys.readouterr().err
    assert err.startswith("beeweave: error:") and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "etc").exists()
    (tmp_path / "etc").mkdir()
    assert main(args) == 0  # the CLI writes where its user asks, with the user's rights
    data = json.loads((tmp_path / "etc" / "x").read_text(encoding="utf-8"))
    assert [c["raw_content"] for c in data["chunks"]] == ["alice deploys on friday"]
    assert main([*args[:-1], str(tmp_path / "etc")]) == 1  # a directory is refused
    assert os.listdir(tmp_path / "etc") == ["x"]
