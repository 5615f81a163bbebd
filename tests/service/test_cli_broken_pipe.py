"""``beeweave ... | head``: a reader that closes the pipe early ends the command quietly, status 0
(issue 46, item 4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from beeweave_core.cli import main
from tests.service.service_support import EMBEDDER

ROOT = Path(__file__).resolve().parents[2]


def test_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    store = str(tmp_path / "team.db")
    for i in range(20):
        assert main(["--store", store, "--embedder", EMBEDDER, "memory", "add", f"Hotel {i} near the station, "
                     "booked for the offsite.", "--user-id", "alice"]) == 0
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command prints anything (as `head -c 600` once it has enough)
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    env.pop("BEEWEAVE_DEBUG", None)
    try:
        proc = subprocess.run([sys.executable, "-m", "beeweave_core.cli", "--store", store, "--embedder", EMBEDDER,
                               "search", "hotel", "--user-id", "alice", "-k", "5", "--json"],
                              stdout=write, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no "beeweave: error: Broken pipe", no "Exception ignored" at exit
