"""Several processes read and write one embedded store file at once (the multi-process
contract in store/sqlite.py: every process sees every other's commits; one queue and one
intake file per process): two and four real processes ingest, add, update, delete and search
for a bounded time, then another process reopens the store. Every acknowledged event and
every add is stored exactly once, deleted memories are gone, nothing is dead or pending, no
error outside BeeWeaveError was raised, verify() passes, and every search for another
process's last committed add found it."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from rel_support import all_chunks, assert_consistent, child, env_number, open_file_store

SECONDS = env_number("BEEWEAVE_MULTIPROC_SECONDS", 8)


def _run(tmp_path: Path, n: int) -> list[list[str]]:
    db = tmp_path / "shared.db"
    names = [f"w{k}" for k in range(n)]
    procs = [child("multiproc_worker.py", json.dumps({"path": str(db), "dir": str(tmp_path), "name": name,
                                                      "peers": names, "seconds": SECONDS}))
             for name in names]
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=SECONDS + 240)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        assert p.returncode == 0, err[-3000:]
        outs.append(out.splitlines())
    return outs


@pytest.mark.parametrize("n", [2, 4])
def test_processes_sharing_one_store_lose_nothing_and_see_each_other(tmp_path: Path, n: int) -> None:
    outs = _run(tmp_path, n)
    lines = [s for out in outs for s in out]
    errors = [s for s in lines if s.startswith("ERROR")]
    assert errors == [], errors[:5]
    assert all(out[-1] == "done" and "flushed True" in out for out in outs), [out[-3:] for out in outs]
    acked = [s.split()[1] for s in lines if s.startswith("acked")]
    added = {s.split()[1] for s in lines if s.startswith("added")}
    deleted = {s.split()[1] for s in lines if s.startswith("deleted")}
    searches = Counter(s.split()[2] for s in lines if s.startswith("search"))
    assert len(acked) >= 5 * n and len(added) >= 5 * n
    assert searches["seen"] >= n and searches["missed"] == 0, [s for s in lines if "missed" in s][:5]
    with open_file_store(tmp_path / "shared.db") as m:  # another process, after them
        assert m.flush(120)
        assert m.dead_letters() == [] and m.pending_events() == 0
        chunks = all_chunks(m.backend)
        turns = Counter(cid[: -len(":0")] for cid in chunks if cid.endswith(":0"))
        assert set(acked) <= set(turns), sorted(set(acked) - set(turns))[:10]
        assert max(turns.values()) == 1
        assert added - deleted <= set(chunks), sorted((added - deleted) - set(chunks))[:10]
        assert not deleted & set(chunks)
        assert_consistent(m)
        for cid in sorted(added - deleted)[:20]:  # each found by its marker word
            word = chunks[cid].content.split()[0]
            assert cid in [h.chunk.id for h in m.search(word, user_id="shared", k=3)]
    leftovers = [p.name for p in tmp_path.iterdir() if ".queue." in p.name and p.name.split(".")[-1].isdigit()]
    assert leftovers == [], "a process's queue file outlived it unadopted"
