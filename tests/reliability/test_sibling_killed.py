"""A process killed while sharing a store file with a live one: the events it acknowledged wait
in its own intake journal or queue file, which only it held. The live process adopts them while it runs (it
looked only when opening the queue before, so the events stayed unsearchable, and its flush()
said everything was done, until some process reopened the store: found by a user trial)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from beeweave_core import BeeWeave
from beeweave_core.ingest import IngestConfig
from beeweave_core.ingest.intake import MmapJournal
from beeweave_core.ingest.queue import SQLiteEventQueue

pytestmark = pytest.mark.slow

EMB = "beeweave:hashing-64"
N = 30


def _sibling(db: Path, fsync: bool) -> subprocess.Popen[str]:
    """A process that acknowledges N events (into its intake journal, or with fsync straight
    into its queue file), never processes them, says so, and waits to be killed."""
    code = textwrap.dedent(f"""
        import sys, time
        from beeweave_core import BeeWeave
        from beeweave_core.ingest import IngestConfig
        m = BeeWeave({str(db)!r}, embedder={EMB!r}, ingest=IngestConfig(autostart=False, fsync={fsync}))
        for i in range({N}):
            m.ingest({{"id": f"sib-{{i}}", "user_id": "u", "query": f"What is code {{i}}?",
                      "response": f"The access code number {{i}} is stored in the vault."}})
        print("acked", flush=True)
        time.sleep(600)
    """)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


@pytest.mark.parametrize("fsync", [True, False], ids=["queue-file", "intake-journal"])
@pytest.mark.parametrize("first", ["sibling", "survivor"])
def test_a_live_process_stores_what_a_killed_sibling_acknowledged(tmp_path, monkeypatch, first, fsync):
    monkeypatch.setattr(SQLiteEventQueue, "ADOPT_INTERVAL", 0.2, raising=False)
    monkeypatch.setattr(MmapJournal, "ADOPT_INTERVAL", 0.2, raising=False)
    db = tmp_path / "shared.db"
    BeeWeave(str(db), embedder=EMB).close()  # the store exists before either opens it
    sib = None
    if first == "sibling":  # it holds the queue's first file; the survivor a numbered one
        sib = _sibling(db, fsync)
        assert sib.stdout is not None and sib.stdout.readline().strip() == "acked"
    m = BeeWeave(str(db), embedder=EMB, ingest=IngestConfig(fsync=fsync))
    try:
        m.ingest({"id": "own", "user_id": "u", "query": "Where is the vault?", "response": "The vault is in the cellar."})
        assert m.flush(20)
        if sib is None:
            sib = _sibling(db, fsync)
            assert sib.stdout is not None and sib.stdout.readline().strip() == "acked"
        sib.send_signal(signal.SIGKILL)
        sib.wait(10)
        time.sleep(0.3)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not m.flush(1):
            pass
        stored = {c.metadata.get("ingest", {}).get("event_id") for c in m.backend.scan(_all())}
        assert {f"sib-{i}" for i in range(N)} <= stored
        assert m.flush(1) and m.pending_events() == 0
    finally:
        if sib is not None and sib.poll() is None:
            sib.kill()
        m.close()


def _all():
    from beeweave_core.filters import build_filter

    return build_filter(None)
