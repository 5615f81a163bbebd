"""``beeweave import`` onto a full disk: one line saying the store is unavailable, no
tracebacks (issue 47, item 9: ~40 lines, the close's snapshot failure logged with its
traceback). Needs a tmpfs (skipped where it cannot be mounted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from beeweave_core import BeeWeave
from beeweave_core.server.service import MemoryService
from tests.reliability.rel_support import small_tmpfs

pytestmark = pytest.mark.slow

EMB = "beeweave:hashing-64"


def _beeweave(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BEEWEAVE_DEBUG": ""}
    return subprocess.run([sys.executable, "-m", "beeweave_core.cli", *args], capture_output=True, text=True,
                          env=env, timeout=300)


def test_an_import_onto_a_full_disk_fails_in_one_line(tmp_path: Path) -> None:
    export = tmp_path / "export.json"
    with BeeWeave(embedder=EMB) as m:
        m.add_many([{"content": f"memory {i} about the cellar, the bike and the garden " + "x" * 400,
                     "user_id": "u", "chunk_id": f"c{i}"} for i in range(3000)])
        export.write_text(json.dumps(MemoryService(m).export_user("u"), default=str))
    with small_tmpfs(tmp_path, "24m") as disk:
        store = str(disk / "d.db")
        filler = disk / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, os.urandom(64 << 10))
        except OSError:
            pass
        finally:
            os.close(fd)
        # Room for part of the memories: the insert fails, then so does the snapshot at close.
        os.truncate(filler, filler.stat().st_size - (6 << 20))
        done = _beeweave("--store", store, "--embedder", EMB, "import", str(export))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "is unavailable" in done.stderr, done.stderr
    # The error, and at most the store's one-line warning that it could not save its snapshot.
    assert len(done.stderr.strip().splitlines()) <= 2, done.stderr
