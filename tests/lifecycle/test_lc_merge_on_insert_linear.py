"""Merge-on-insert is linear in the batch (issue 47, item 8): one event with N tool calls whose
outputs a model calls alike but whose words differ read ~N²/2 memories (each looked "as far as
the batch is long" and loaded every near-duplicate). Now each memory is read at most once per
call, and the fast path folds exactly what the old, obvious one did on small batches, copies
of one memory past ``merge_candidates`` included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from beeweave_core.filters import build_filter
from beeweave_core.lifecycle.maintenance import Maintenance
from beeweave_core.lifecycle.merge import dedupable, plan_groups, primary_key
from tests.lifecycle.lifecycle_support import DIM, unit


def reference_merge_new(self: Maintenance, chunks: Any, *, same_words: float | None = None) -> None:
    """The old merge-on-insert, the slow obvious reference: every memory looks as far as the
    batch is long and reads every near-duplicate it finds."""
    cfg = self.ctx.config
    tok = self.ctx.shared.tokenizer
    with self.ctx.changes() as box:
        now = self.ctx.now()
        done: set[str] = set()
        for c in chunks:
            if c.id in done or not dedupable(c):
                continue
            vec = self.ctx.backend.get_vectors([c.id]).get(c.id)
            if vec is None:
                continue
            wide = max(cfg.merge_candidates, len(chunks)) + 1
            found = self.ctx.backend.vector_search(vec, build_filter(None, user_id=c.user_id), wide)
            ids = [o for o, sim in found if sim >= cfg.merge_threshold and o not in done]
            group = [g for g in self.ctx.backend.get(ids).values() if dedupable(g)]
            if same_words is not None:
                mine = set(tok(c.content))
                group = [g for g in group if g.id == c.id or _jaccard(mine, set(tok(g.content))) >= same_words]
            if len(group) < 2 or c.id not in {g.id for g in group}:
                continue
            vecs = self.ctx.backend.get_vectors([g.id for g in group])
            ordered = sorted(group, key=lambda g: primary_key(g, now, self.ctx.shared.scoring))

            def neighbours(p: Any, vecs: Any = vecs, ordered: Any = ordered) -> list[tuple[str, float]]:
                return [(g.id, float(np.dot(vecs[p.id], vecs[g.id]))) for g in ordered if g.id in vecs]

            for primary, members in plan_groups(ordered, neighbours, cfg.merge_threshold):
                self._merge(primary, members, now, box)
                done.update(m.id for m, _ in members)
                done.add(primary.id)


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _near(axis: int, jitter: float, seed: int) -> list[float]:
    """A unit vector close to axis ``axis`` (cosine with it about 1 - jitter²/2)."""
    rng = np.random.default_rng(seed)
    v = np.zeros(DIM, np.float32)
    v[axis] = 1.0
    v[40:] += rng.normal(0, jitter / np.sqrt(DIM - 40), DIM - 40).astype(np.float32)
    return [float(x) for x in v / np.linalg.norm(v)]


def _record(cid: str, content: str, vec: list[float], *, tool: bool, **extra: Any) -> dict[str, Any]:
    md = {"ingest": {"role": "tool"}} if tool else {}
    return {"chunk_id": cid, "content": content, "user_id": "u", "embedding": vec, "metadata": md, **extra}


def _batches(tool: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(stored first, then the batch): copies of one memory past merge_candidates, small groups
    of near variants (one word changed), alike-but-different pairs, and duplicates of memories
    stored before the batch."""
    earlier = [_record(f"old-{i}", "The staging deploy runs every Friday at five in the afternoon",
                       _near(3, 0.05, 100 + i), tool=tool, tags=[f"old{i}"]) for i in range(2)]
    batch = [_record(f"copy-{i}", "The office wifi password is written on the fridge door",
                     _near(1, 0.02, i), tool=tool, tags=[f"t{i % 4}"], weight=1.0 + (0.5 if i == 7 else 0.0))
             for i in range(12)]
    for i, word in enumerate(["kitchen", "bedroom", "garage"]):
        batch.append(_record(f"var-{i}", f"Turn off the heating and the radio in the {word} every night before "
                             "midnight, then lock the back door please",
                             _near(2, 0.1, 50 + i), tool=tool))
    batch.append(_record("tea", "Alice drinks green tea every morning", _near(4, 0.05, 70), tool=tool))
    batch.append(_record("coffee", "Bob brews black coffee after lunch", _near(4, 0.05, 71), tool=tool))
    batch.append(_record("new-deploy", "The staging deploy runs every Friday at five in the afternoon today",
                         _near(3, 0.05, 103), tool=tool, tags=["new"]))
    batch.append(_record("alone", "Lunch is at noon", unit(0, 0, 0, 0, 0, 1), tool=tool))
    return earlier, batch


def _state(mem: Any) -> dict[str, Any]:
    out = {}
    for c in mem.backend.scan(build_filter({"status": ["active", "merged"]})):
        out[c.id] = (c.status.value, c.metadata.get("merged_into"), sorted(c.tags),
                     sorted(m["id"] for m in c.metadata.get("merged_from", [])))
    return out


@pytest.mark.parametrize("mode", ["all", "ingested"])
def test_the_fast_path_merges_what_the_reference_merges(make, monkeypatch, mode) -> None:
    tool = mode == "ingested"  # ingested memories also need the same words (same_words=0.8)
    earlier, batch = _batches(tool)
    options = dict(merge_on_insert=mode, merge_candidates=3)
    slow = make(**options)
    monkeypatch.setattr(Maintenance, "merge_new", reference_merge_new)
    slow.add_many(earlier)
    slow.add_many(batch)
    monkeypatch.undo()
    fast = make(**options)
    fast.add_many(earlier)
    fast.add_many(batch)

    expected = _state(slow)
    assert _state(fast) == expected
    # The case is not trivial: the twelve copies folded into one primary past merge_candidates,
    # the heavier copy kept; the alike pair stayed apart only when words count.
    assert expected["copy-7"][0] == "active" and len(expected["copy-7"][3]) == 11
    assert {expected[f"var-{i}"][0] for i in range(3)} == {"active", "merged"}
    assert expected["old-0"][1] == "new-deploy"  # the longer newcomer absorbs the stored one
    assert (expected["tea"][0] == "merged" or expected["coffee"][0] == "merged") is (not tool)


def test_an_event_of_alike_tool_outputs_reads_each_memory_a_bounded_number_of_times(make, monkeypatch) -> None:
    n = 150
    mem = make(merge_on_insert="ingested")
    # Every output near one direction (cosine about 0.98 with every other), as a model calls
    # tool outputs of one kind alike; the words differ, so none of them merges.
    batch = [_record(f"tool-{i}", " ".join(f"w{i}x{j}" for j in range(7)), _near(0, 0.15, i), tool=True)
             for i in range(n)]
    loaded = []
    real_get = type(mem.backend).get

    def counting_get(self: Any, ids: Any) -> Any:
        got = real_get(self, ids)
        loaded.append(len(got))
        return got

    monkeypatch.setattr(type(mem.backend), "get", counting_get)
    mem.add_many(batch)
    monkeypatch.undo()
    # Nothing merges (the words differ), but every memory was a near-duplicate of every other:
    # the old lookup read ~n²/2 = 11,250 memories here.
    assert all(c.status.value == "active" for c in mem.backend.get([f"tool-{i}" for i in range(n)]).values())
    assert sum(loaded) <= 4 * n, sum(loaded)
