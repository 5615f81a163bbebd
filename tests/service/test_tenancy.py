"""API keys and tenant isolation: a key reads and writes only its tenant's store.

Both tenants have a user "alice", a session "s1" and a pending memory; tenant beta tries
every route, filter and expansion that could reach acme's data.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from beeweave_core import ExpandOptions, InvalidInputError, NotFoundError
from beeweave_core.client import AuthenticationError
from beeweave_core.server import ServerConfig, TenantStores, load_api_keys, parse_api_keys
from beeweave_core.server.config import keys_from_env
from tests.service.service_support import ACME_KEY, ACME_KEY2, BETA_KEY, event

SECRET = "The launch code of acme is tangerine-7."


@pytest.fixture(scope="module")
def two_tenants(acme, beta):
    acme.ingest(event("alice", "What is the launch code?", SECRET, session_id="s1", id="acme-1"))
    acme.ingest(event("alice", "Who holds the launch code?", "Acme's launch code is held by the CTO.",
                      session_id="s1", id="acme-2"))
    acme.ingest(event("alice", "vpn?", "on", id="acme-short"))  # pending review (too short; not small talk)
    beta.ingest(event("alice", "What is the lunch menu?", "Beta's lunch menu is tangerine salad.",
                      session_id="s1", id="beta-1"))
    beta.ingest(event("alice", "hm", "yes", id="beta-short"))
    assert acme.flush(20) and beta.flush(20)
    return {"acme": ["acme-1@alice:0", "acme-2@alice:0"], "beta": ["beta-1@alice:0"]}


def _operations(live):
    with live.http() as h:
        spec = h.get("/openapi.json").json()
    for path, ops in spec["paths"].items():
        for method in ops:
            if path.startswith("/api/v1"):
                yield method.upper(), path.replace("{session_id}", "s1").replace("{user_id}", "alice")


def test_every_route_needs_a_known_key(live, two_tenants):
    ops = list(_operations(live))
    assert len(ops) >= 14
    with live.http() as anon, live.http("not-a-key-at-all") as wrong:
        for method, path in ops:
            r = anon.request(method, path, json={})
            assert r.status_code == 401, (method, path)
            assert r.json()["error"] == "Unauthorized" and "X-API-Key" in r.json()["detail"]
            assert r.headers["www-authenticate"] == "Bearer"
            r = wrong.request(method, path, json={})
            assert r.status_code == 403, (method, path)
            assert r.json() == {"error": "Forbidden", "detail": "API key not recognised"}


def test_bearer_and_rotated_keys_reach_the_same_tenant(live, two_tenants):
    with live.http() as h:
        r = h.post("/api/v1/search", json={"query": "launch code", "k": 5},
                   headers={"Authorization": f"Bearer {ACME_KEY2}"})
    assert r.status_code == 200
    assert {x["chunk"]["id"] for x in r.json()["hits"]} == set(two_tenants["acme"])
    with live.client("wrong-key-123") as c, pytest.raises(AuthenticationError):
        c.search("launch")


def test_search_never_crosses_tenants(beta, two_tenants):
    acme_ids = two_tenants["acme"]
    probes = [
        dict(k=10),
        dict(user_id="alice", k=10),
        dict(filters={"user_id": ["alice", "bob", "acme/alice"]}, k=10),
        dict(filters={"ids": acme_ids}, k=10),
        dict(filters={"ids": acme_ids, "status": ["active", "pending", "archived", "merged", "expired"]}, k=10),
        dict(filters={"session_id": "s1"}, k=10, expand=ExpandOptions(hops=3, limit=50)),
        dict(k=10, expand=True, loosen=True, filters={"tags": ["launch"]}),
    ]
    for kw in probes:
        for query in ("launch code tangerine", SECRET):
            hits = beta.search(query, **kw)
            assert all(h.id not in acme_ids and "acme" not in h.chunk.raw_content.lower() for h in hits), kw
    assert [h.id for h in beta.search("launch code", filters={"ids": acme_ids}, k=10)] == []
    assert [h.id for h in beta.search("tangerine", k=10)] == ["beta-1@alice:0"]  # beta's own data is found


def test_every_other_route_stays_in_its_tenant(live, acme, beta, two_tenants):
    acme_ids = two_tenants["acme"]
    assert [c.id for c in beta.trace("s1")] == ["beta-1@alice:0"]
    assert [c.id for c in beta.trace("s1", user_id="alice")] == ["beta-1@alice:0"]
    exported = beta.export_user("alice")
    assert {c["id"] for c in exported["chunks"]} == {"beta-1@alice:0", "beta-short@alice:0"}
    assert SECRET not in str(exported)
    assert [c.id for c in beta.pending()] == ["beta-short@alice:0"]
    for call in (lambda: beta.feedback(acme_ids, "down"), lambda: beta.approve(["acme-short@alice:0"]),
                 lambda: beta.reject(["acme-short@alice:0"]), lambda: beta.resolve_review(acme_ids[0], "delete")):
        with pytest.raises(NotFoundError):
            call()
    s = beta.stats()
    assert s["total"] == 2 and SECRET[:20] not in str(s)
    assert beta.forget_user("alice") == 2
    # acme's alice is untouched by beta forgetting its own alice.
    assert {c.id for c in acme.trace("s1")} == set(acme_ids)
    assert [c.id for c in acme.pending()] == ["acme-short@alice:0"]
    assert acme.search("launch code", user_id="alice", k=1)[0].chunk.raw_content.endswith(SECRET)
    files = sorted(p.name for p in live.root.iterdir())
    assert {"acme.db", "beta.db"} <= set(files) and all(f.split(".")[0] in ("acme", "beta") for f in files)


def test_key_configuration():
    assert parse_api_keys("k-aaaaaaaa:acme, k-bbbbbbbb:beta-2") == {"k-aaaaaaaa": "acme", "k-bbbbbbbb": "beta-2"}
    assert keys_from_env({"BEEWEAVE_API_KEYS": "k-aaaaaaaa:acme"}) == {"k-aaaaaaaa": "acme"}
    assert keys_from_env({}) is None
    for bad in ("short:acme", "k-aaaaaaaa", "k-aaaaaaaa:../etc", "k-aaaaaaaa:a/b", "k-aaaaaaaa:", "",
                "k-aaaaaaaa:acme,k-aaaaaaaa:beta", "k aaaaaaaa:acme"):
        with pytest.raises(InvalidInputError):
            parse_api_keys(bad)
    with pytest.raises(InvalidInputError):
        ServerConfig(None, {"k-aaaaaaaa": ".hidden"})


def test_key_files(tmp_path):
    js = tmp_path / "keys.json"
    js.write_text('{"keys": {"k-aaaaaaaa": "acme"}}')
    toml = tmp_path / "keys.toml"
    toml.write_text('[keys]\n"k-bbbbbbbb" = "beta"\n')
    assert load_api_keys(js) == {"k-aaaaaaaa": "acme"}
    assert load_api_keys(toml) == {"k-bbbbbbbb": "beta"}
    assert keys_from_env({"BEEWEAVE_API_KEYS_FILE": str(toml)}) == {"k-bbbbbbbb": "beta"}
    (tmp_path / "bad.json").write_text("{not json")
    for path in (tmp_path / "bad.json", tmp_path / "missing.json"):
        with pytest.raises(InvalidInputError):
            load_api_keys(path)


def test_where_each_tenant_store_is(tmp_path):
    opened = []

    def opener(store, tenant=None):
        opened.append((store, tenant))
        return object()

    one = TenantStores(tmp_path / "one.db", ["acme"], opener=opener)
    one.get("acme")
    many = TenantStores(tmp_path / "stores", ["acme", "beta"], opener=opener)
    many.get("beta")
    many.get("beta")  # opened once
    assert opened == [(tmp_path / "one.db", None), (tmp_path / "stores", "beta")]
    with pytest.raises(InvalidInputError, match="one store"):
        TenantStores(tmp_path / "one.db", ["acme", "beta"])
    with pytest.raises(InvalidInputError):
        TenantStores(tmp_path, ["../up"])
    with pytest.raises(InvalidInputError):
        many.get("gamma")


def test_keys_are_hashed_not_kept(live):
    ring = live.app.state.keyring
    assert BETA_KEY not in repr(vars(ring))


def test_concurrent_clients_of_two_tenants(live):
    """Tenant stores open lazily under a lock; parallel writers and readers get no 5xx and no mix-up."""
    def work(i: int) -> list[int]:
        key, tenant = (ACME_KEY, "acme") if i % 2 else (BETA_KEY, "beta")
        codes = []
        with live.http(key) as h:
            for j in range(5):
                codes.append(h.post("/api/v1/ingest", json=event(f"load-{tenant}", f"note {i}-{j} of {tenant}?",
                                                                   f"This note {i}-{j} belongs to {tenant}.")).status_code)
                r = h.post("/api/v1/search", json={"query": f"note of {tenant}", "k": 5})
                codes.append(r.status_code)
                other = "beta" if tenant == "acme" else "acme"
                assert all(other not in x["chunk"]["raw_content"] for x in r.json()["hits"])
            codes.append(h.get("/api/v1/stats").status_code)
        return codes

    with ThreadPoolExecutor(8) as pool:
        codes = [c for batch in pool.map(work, range(8)) for c in batch]
    assert set(codes) <= {200, 202} and codes.count(202) == 40
