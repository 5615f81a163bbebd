"""A client-only install (``pip install "beeweave-memory[client]"``: httpx) gives a working
``BeeWeaveClient``: it imports without FastAPI, uvicorn, Prometheus, Starlette or pydantic
and talks to a running server (issue 46, item 6)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import tomllib

from tests.service.service_support import ACME_KEY, LiveServer

ROOT = Path(__file__).resolve().parents[2]
SERVER_ONLY = ("fastapi", "uvicorn", "prometheus_client", "starlette", "pydantic", "sse_starlette")


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    blocked = f"import sys\nSERVER_ONLY = {SERVER_ONLY!r}\nfor _m in SERVER_ONLY:\n    sys.modules[_m] = None  # import fails\n"
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    return subprocess.run([sys.executable, "-c", blocked + textwrap.dedent(code), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_client_extra_is_declared() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [d.split(">")[0] for d in extras["client"]] == ["httpx"]


def test_the_client_works_without_the_server_dependencies(live: LiveServer) -> None:
    out = _run("""
        import sys
        from beeweave_core import BeeWeaveClient
        from beeweave_core.async_client import AsyncBeeWeaveClient

        with BeeWeaveClient(sys.argv[1], sys.argv[2]) as memory:
            mid = memory.add("The client-only install talks to the server.", user_id="carol")
            assert [h.id for h in memory.search("client-only install", user_id="carol", k=3)] == [mid]
            page = memory.list_memories(user_id="carol")  # the one method that reads a server type
            assert [c.id for c in page.items] == [mid], page
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in SERVER_ONLY and sys.modules[m] is not None)
        assert not loaded, loaded
        print("ok")
        """, live.url, ACME_KEY)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_the_hint_names_the_client_extra() -> None:
    out = _run("""
        sys.modules["httpx"] = None
        from beeweave_core.client import BeeWeaveClient
        from beeweave_core.errors import MissingDependencyError
        try:
            BeeWeaveClient("http://127.0.0.1:1", "key-01234567")
        except MissingDependencyError as exc:
            print(exc)
        """)
    assert 'pip install "beeweave-memory[client]"' in out.stdout, out.stderr
