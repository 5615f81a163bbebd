"""Conformance of the ``KeyValue``, ``Log`` and ``Users`` roles (store/roles.py): the
engine's auxiliary state, and forgetting a user across every role."""

from __future__ import annotations

import threading

import pytest

from beeweave_core import (
    Relationship,
)
from beeweave_core.filters import build_filter
from tests.conformance_data import (
    EVERY_STATUS,
    WORLD,
    ids_of,
    row,
    vec,
)


class KeyValueConformance:
    """``KeyValue``: JSON values by namespace and key. Fixtures (``backend``, ``world``, ``make``, ``reopen``) come from
    :class:`tests.conformance.BackendConformance`, which runs this class as ``TestKeyValue``."""

    def test_kv(self, backend) -> None:
        assert backend.kv_get("ns", "missing") is None
        backend.kv_put("ns", "a", {"v": 1})
        backend.kv_put("ns", "a", {"v": 2, "nested": {"list": [1, "二", None]}})
        assert backend.kv_get("ns", "a") == {"v": 2, "nested": {"list": [1, "二", None]}}
        for key in ("b%_1", "b%_2", "bx", "c", "b"):
            backend.kv_put("ns", key, {"k": key})
        backend.kv_put("other", "a", {"v": "other namespace"})
        assert [k for k, _ in backend.kv_scan("ns")] == ["a", "b", "b%_1", "b%_2", "bx", "c"]
        # Prefixes are literal: % and _ are not wildcards.
        assert [k for k, _ in backend.kv_scan("ns", "b%_")] == ["b%_1", "b%_2"]
        assert dict(backend.kv_scan("ns", "bx")) == {"bx": {"k": "bx"}}
        assert list(backend.kv_scan("empty")) == []
        assert backend.kv_delete("ns", "a") is True
        assert backend.kv_delete("ns", "a") is False
        assert backend.kv_get("ns", "a") is None
        assert backend.kv_get("other", "a") == {"v": "other namespace"}

    def test_kv_update(self, backend) -> None:
        seen = []

        def bump(cur):
            seen.append(cur)
            return {"n": (cur or {"n": 0})["n"] + 1}

        assert backend.kv_update("ns", "c", bump, user_id="u") == {"n": 1}
        assert backend.kv_update("ns", "c", bump, user_id="u") == {"n": 2}
        assert seen == [None, {"n": 1}] and backend.kv_get("ns", "c") == {"n": 2}

        def broken(cur):
            raise ValueError("no")

        with pytest.raises(ValueError):
            backend.kv_update("ns", "c", broken)
        assert backend.kv_get("ns", "c") == {"n": 2}  # a failed change changes nothing
        assert backend.kv_update("ns", "c", lambda cur: None) is None
        assert backend.kv_get("ns", "c") is None
        backend.kv_update("ns", "d", bump, user_id="gone")
        backend.delete_user("gone")  # the user given is the value's owner, as with kv_put
        assert backend.kv_get("ns", "d") is None
        threads = [threading.Thread(target=lambda: [backend.kv_update("ns", "t", bump) for _ in range(25)])
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert backend.kv_get("ns", "t") == {"n": 100}  # no increment lost


class LogConformance:
    """``Log``: append-only streams. Fixtures (``backend``, ``world``, ``make``, ``reopen``) come from
    :class:`tests.conformance.BackendConformance`, which runs this class as ``TestLog``."""

    def test_log(self, backend) -> None:
        seqs = [backend.log_append("versions", key, {"n": i}) for i, key in enumerate(["c1", "c2", "c1", "c1"])]
        assert seqs == sorted(seqs) and len(set(seqs)) == 4
        other = backend.log_append("notes", "c1", {"note": "elsewhere"})
        assert [(k, v["n"]) for _, k, v in backend.log_read("versions")] == [("c1", 0), ("c2", 1), ("c1", 2),
                                                                               ("c1", 3)]
        assert [v["n"] for _, _, v in backend.log_read("versions", "c1")] == [0, 2, 3]
        assert [s for s, _, _ in backend.log_read("versions", after=seqs[1])] == seqs[2:]
        assert [s for s, _, _ in backend.log_read("versions", limit=2)] == seqs[:2]
        assert backend.log_read("versions", "c1", after=seqs[2], limit=5) == [(seqs[3], "c1", {"n": 3})]
        assert backend.log_read("notes") == [(other, "c1", {"note": "elsewhere"})]
        assert backend.log_read("nothing") == []
        ann = backend.log_append("versions", "c9", {"n": 9}, user_id="ann")
        backend.log_append("versions", "c8", {"n": 8}, user_id="bob")
        assert backend.log_read("versions", user_id="ann") == [(ann, "c9", {"n": 9})]
        assert backend.log_read("versions", "c8", user_id="ann") == [] and backend.log_read("notes", user_id="ann") == []
        assert backend.log_delete("versions", ["c9", "c8"]) == 2
        assert backend.log_delete("versions", ["c1", "absent"]) == 3
        assert [k for _, k, _ in backend.log_read("versions")] == ["c2"]  # only that stream's c1 went
        assert backend.log_read("notes") == [(other, "c1", {"note": "elsewhere"})]
        assert backend.log_delete("versions", []) == 0


class UsersConformance:
    """``Users``: whom the store holds something for. Fixtures (``backend``, ``world``, ``make``, ``reopen``) come from
    :class:`tests.conformance.BackendConformance`, which runs this class as ``TestUsers``."""

    def test_delete_user_forgets_everything_of_theirs(self, world) -> None:
        world.add_edges([Relationship("w0", "w2", "semantic"), Relationship("w4", "w1", "entity"),
                         Relationship("w4", "w5", "tag")])
        world.kv_put("notes", "ann-1", {"x": 1}, user_id="ann")
        world.kv_put("notes", "bob-1", {"x": 2}, user_id="bob")
        world.kv_put("notes", "shared", {"x": 3})
        world.log_append("versions", "w0", {"v": 1}, user_id="ann")
        kept = world.log_append("versions", "w2", {"v": 1}, user_id="bob")
        anns = {r.chunk.id for r in WORLD if r.chunk.user_id == "ann"}
        assert world.delete_user("ann") == len(anns)
        assert world.delete_user("ann") == 0
        assert world.delete_user("nobody") == 0
        everything = build_filter(EVERY_STATUS)
        assert world.contains(list(anns)) == set()
        assert world.count(everything) == len(WORLD) - len(anns)
        assert world.count(build_filter({"user_id": "ann", **EVERY_STATUS})) == 0
        assert not set(ids_of(world.lexical_search({"apple": 1, "cherry": 1}, everything, 50))) & anns
        assert not set(ids_of(world.vector_search(vec(1), everything, 50, exact=True))) & anns
        assert {(e.source_id, e.target_id) for e in world.edges(["w2", "w4", "w5"])} == {("w4", "w5")}
        assert world.kv_get("notes", "ann-1") is None
        assert world.kv_get("notes", "bob-1") == {"x": 2} and world.kv_get("notes", "shared") == {"x": 3}
        assert world.log_read("versions") == [(kept, "w2", {"v": 1})]

    def test_a_search_of_several_owners_reads_exactly_them_and_a_users_delete_leaves_scopes(self, backend) -> None:
        # Shared scopes are owner ids (beeweave_core/scopes.py): "scope:" names with ':' and
        # '/' that one exact OR over owners must tell apart, a sub-scope from its parent too.
        owners = ["alice", "bob", "scope:tenant", "scope:project:atlas", "scope:project:atlas/module:parser",
                  "scope:project:atlas2"]
        backend.insert([row(f"o{i}", f"apple note {i}", user_id=u) for i, u in enumerate(owners)])
        read = ["alice", "scope:tenant", "scope:project:atlas"]
        want = {f"o{owners.index(u)}" for u in read}
        f = build_filter(None, user_id=read)
        assert backend.count(f) == 3 and {c.id for c in backend.scan(f)} == want
        assert set(ids_of(backend.lexical_search({"apple": 1, "note": 1}, f, 10))) == want
        for exact in (True, False):
            assert set(ids_of(backend.vector_search(vec(1), f, 10, exact=exact))) == want
        assert backend.delete_user("alice") == 1
        left = build_filter(None, user_id=owners)
        assert {c.user_id for c in backend.scan(left)} == set(owners) - {"alice"}
