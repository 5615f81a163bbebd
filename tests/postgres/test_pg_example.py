"""The two-agents example runs offline, end to end, against the test server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.postgres.pg_support import pg_url  # noqa: F401  (pg_url is a fixture)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_two_agents_share_one_memory(pg_url) -> None:  # noqa: F811
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "postgres_two_agents.py"), pg_url],
                          capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.count("[planner] heard memory.created from scout") == 4
    assert "A: Rolling back the deploy at 10:05 brought checkout latency back to normal. (learned by scout" in out
    assert "A: Database connections from checkout hit the pool limit of 20" in out
    assert "the shared memory now holds 5 memories" in out
