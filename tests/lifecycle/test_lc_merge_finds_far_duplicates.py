"""Merge-on-insert looks at each new memory's ``merge_candidates`` nearest neighbours (issue 47,
item 8, linear in the batch). A near-duplicate further away than that many closer memories
that are not duplicates (alike by vector, other words; or facts, which never merge) was
missed: with ten of them the eleventh, a copy of the new memory but for one word, stayed apart.
Each case is checked against the slow obvious reference, which looks at every memory of the user."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from beeweave_core.filters import build_filter
from beeweave_core.lifecycle.maintenance import Maintenance
from beeweave_core.lifecycle.near import NearDuplicates
from tests.lifecycle.lifecycle_support import DIM
from tests.lifecycle.test_lc_merge_on_insert_linear import reference_merge_new
from tests.postgres.pg_support import new_tenant

# Twelve sentences of other words: no two share 80 % of their words, nor with the deploy note.
OTHERS = ["Alice drinks green tea every morning", "Bob brews black coffee after lunch",
          "The printer on floor two needs toner", "Carol walks her dog along the river at dawn",
          "Invoices are due on the last working day", "The lift in block C is out of order",
          "Dave plays chess online most evenings", "Parking passes renew in January",
          "The canteen serves soup on Mondays", "Erin prefers aisle seats on long flights",
          "Backups run nightly to the Frankfurt bucket", "Frank keeps spare keys in the blue drawer"]
DEPLOY = "The staging deploy runs every Friday at five in the afternoon"


def _toward(axis: int, cos: float) -> list[float]:
    """A unit vector at cosine ``cos`` with axis 3, leaning toward ``axis``."""
    v = np.zeros(DIM, np.float32)
    v[3], v[axis] = cos, np.sqrt(1 - cos * cos)
    return v.tolist()


def _record(cid: str, content: str, vec: list[float], kind: str | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"ingest": {"role": "tool"}}
    if kind:
        md["kind"] = kind
    return {"chunk_id": cid, "content": content, "user_id": "u", "embedding": vec, "metadata": md}


@pytest.fixture(params=["sqlite", "postgres"])
def fresh(request: pytest.FixtureRequest, make: Any) -> Any:
    """``fresh(**options)``: a new empty store on the backend."""
    if request.param == "sqlite":
        return lambda **options: make(**options)
    url = request.getfixturevalue("pg_url")
    return lambda **options: make(url, tenant=new_tenant("far"), **options)


def _state(mem: Any) -> dict[str, Any]:
    return {c.id: (c.status.value, c.metadata.get("merged_into"))
            for c in mem.backend.scan(build_filter({"status": ["active", "merged"]}))}


@pytest.mark.parametrize("mode, kind", [("ingested", None), ("all", "fact")])
def test_a_duplicate_behind_more_than_merge_candidates_closer_memories_is_merged(fresh, monkeypatch, mode, kind):
    # The duplicate stored earlier is at cosine 0.92 with the new memory; twelve others at 0.97
    # (each 0.89 from the duplicate): all twelve are nearer than it.
    earlier = [_record("dup", DEPLOY, _toward(5, 0.92))]
    earlier += [_record(f"other-{i}", text, _toward(10 + i, 0.97), kind) for i, text in enumerate(OTHERS)]
    new = _record("new", DEPLOY + " today", _toward(4, 1.0))
    states = []
    # The reference looks at every memory of the user (merge_candidates above their number).
    for merge, candidates in ((reference_merge_new, 100), (Maintenance.merge_new, 10)):
        monkeypatch.setattr(Maintenance, "merge_new", merge)
        mem = fresh(merge_on_insert=mode, merge_candidates=candidates)
        mem.add_many(earlier)
        mem.add_many([new])
        states.append(_state(mem))
    expected, got = states
    assert {expected["dup"][0], expected["new"][0]} == {"active", "merged"}  # the reference merges them
    assert got == expected


def test_the_lookup_by_words_stays_linear_in_the_batch(fresh, monkeypatch):
    """A batch of alike-but-different memories (every lookup finds only duplicates by vector):
    at most one lexical lookup per memory, and each memory read at most once."""
    seen: list[NearDuplicates] = []
    real = NearDuplicates.__init__

    def keep(self: NearDuplicates, *args: Any, **kw: Any) -> None:
        real(self, *args, **kw)
        seen.append(self)

    monkeypatch.setattr(NearDuplicates, "__init__", keep)
    n = 150
    batch = [_record(f"alike-{i}", f"Ticket {i} was escalated to team {i * 7 % 13} by agent {i * 11 % 17}",
                     _toward(10 + i, 0.97)) for i in range(n)]
    mem = fresh(merge_on_insert="ingested")
    mem.add_many(batch)
    near, = seen
    assert 0 < near.word_lookups <= n and near.lookups <= 2 * n  # the lookup by words ran, once at most
    assert near.loaded <= n
