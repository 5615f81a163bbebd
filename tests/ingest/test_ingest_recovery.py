"""Crash recovery: a process killed with SIGKILL after ingest() returned loses nothing, and
the next open processes each event exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.ingest import IngestConfig
from tests.ingest.ingest_support import everything

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")

ROOT = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent("""
    import os, signal, sys, time
    from beeweave_core import BeeWeave, HashingEmbedder
    from beeweave_core.ingest import IngestConfig
    from beeweave_core.ingest.queue import SQLiteEventQueue

    path, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])

    class Stuck(HashingEmbedder):
        def embed_documents(self, texts):
            time.sleep(3600)  # the worker is busy when the process dies

    if mode == "crash_before_done":
        # Die after the memories are stored, before the queue marks the event done.
        SQLiteEventQueue.done = lambda self, ids: os.kill(os.getpid(), signal.SIGKILL)
    embedder = Stuck(32) if mode == "worker_busy" else HashingEmbedder(32)
    # crash_before_done queues every event before the worker starts (flush starts it), so the
    # worker cannot take the first event alone and die before the others are queued.
    config = IngestConfig(autostart=mode not in ("worker_idle", "crash_before_done"))
    memory = BeeWeave(path, embedder=embedder, ingest=config)
    for i in range(n):
        memory.ingest({"user_id": "u", "id": f"ev{i}", "query": f"How do I reset my password? ({i})",
                       "response": f"Open Settings and click Reset, step {i}.",
                       "intermediate_steps": [{"tool": "kb", "input": "reset",
                                               "output": f"Reset lives under Settings > Security, entry {i}"}]})
    if mode == "kill_self":
        os.kill(os.getpid(), signal.SIGKILL)  # right after the last ingest returned
    print("ingested", flush=True)
    if mode == "crash_before_done":
        memory.flush()
    time.sleep(3600)
""")


def run_child(db: Path, mode: str, n: int) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(db), mode, str(n)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if mode in ("worker_idle", "worker_busy"):
            line = proc.stdout.readline()  # ingest() has returned for every event
            assert line.strip() == "ingested", proc.stderr.read()
            proc.send_signal(signal.SIGKILL)
        proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()


def reopen_and_count(db: Path, n: int) -> dict[str, int]:
    with BeeWeave(db, embedder=HashingEmbedder(32)) as m:  # resumes the queued events on open
        assert m.flush(60)
        assert m.dead_letters() == [] and m.pending_events() == 0
        ids = [c.id for c in everything(m) if not c.id.startswith("pattern:")]
        hits = [len(v["hits"]) for _, v in m.backend.kv_scan("ingest.patterns")]
    assert len(ids) == len(set(ids))
    assert sorted(ids) == sorted(f"ev{i}@u:{k}" for i in range(n) for k in (0, 1))
    return {"memories": len(ids), "pattern_sightings": sum(hits)}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["worker_idle", "worker_busy", "kill_self"])
def test_killed_after_ingest_returned_then_processed_exactly_once_on_reopen(tmp_path: Path, mode: str) -> None:
    db = tmp_path / "memory.db"
    run_child(db, mode, 5)
    assert reopen_and_count(db, 5) == {"memories": 10, "pattern_sightings": 5}
    assert reopen_and_count(db, 5) == {"memories": 10, "pattern_sightings": 5}  # and nothing more later


def test_killed_between_storing_and_marking_done(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    run_child(db, "crash_before_done", 3)
    with BeeWeave(db, embedder=HashingEmbedder(32), ingest=IngestConfig(autostart=False)) as m:
        stored = {c.id for c in everything(m)}
        assert {"ev0@u:0", "ev0@u:1"} <= stored  # the memories were committed before the crash
        assert m.pending_events() == 3  # but the events were never marked done
    assert reopen_and_count(db, 3) == {"memories": 6, "pattern_sightings": 3}
