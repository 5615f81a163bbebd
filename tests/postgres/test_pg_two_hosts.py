"""Two hosts on one tenant through the shared ingest queue in PostgreSQL: events accepted
by ``beeweave serve`` on host A, A killed with SIGKILL mid-work and its queue directory
deleted, and host B (another ``beeweave serve``) stores every event exactly once; then a
standalone ``beeweave worker`` drains what a third host accepted."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from beeweave_core import BeeWeave, ChunkStatus
from beeweave_core.filters import build_filter
from beeweave_core.store.postgres import PostgresStore
from tests.postgres.pg_support import fresh_schema, schema_url, server_url

EMBEDDER = "beeweave:hashing-64"
KEY = "two-hosts-key-0001"
TENANT = "acme"
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _events(start: int, n: int) -> list[dict]:
    return [{"id": f"ev{i}", "user_id": f"user{i % 3}", "session_id": f"s{i % 5}",
             "query": f"where does service {i} run?",
             "response": f"Service {i} runs on cluster {i % 7}, owned by team {i % 4}."} for i in range(start, start + n)]


def _env() -> dict[str, str]:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    return env


def _serve(url: str, keys: Path, queue_dir: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "beeweave_core.cli", "--store", url, "--embedder", EMBEDDER,
                             "serve", "--port", str(port), "--api-keys", str(keys), "--queue-dir", str(queue_dir),
                             "--log-level", "warning"],
                            env=_env(), stdout=log.open("w"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return proc, base
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"beeweave serve did not start:\n{log.read_text()}")
        time.sleep(0.3)


def _memories(url: str) -> list[tuple[str, str]]:
    """Every memory of the tenant (a detected pattern's text depends on which events came first: its id only)."""
    store = PostgresStore(url, tenant=TENANT, pool_size=1)
    try:
        every = build_filter({"status": [s.value for s in ChunkStatus]})
        return sorted((c.id, "" if c.id.startswith("pattern:") else c.content) for c in store.scan(every))
    finally:
        store.close()


def _pending(url: str) -> int:
    store = PostgresStore(url, tenant=TENANT, pool_size=1)
    try:
        return store.ingest_queue().pending_count()
    finally:
        store.close()


def _reference(tmp: Path, events: list[dict]) -> list[tuple[str, str]]:
    ref = BeeWeave(str(tmp / "reference.db"), embedder=EMBEDDER)
    try:
        for e in events:
            ref.ingest(e)
        assert ref.flush(timeout=120)
        every = build_filter({"status": [s.value for s in ChunkStatus]})
        return sorted((c.id, "" if c.id.startswith("pattern:") else c.content) for c in ref.backend.scan(every))
    finally:
        ref.close()


@pytest.mark.slow
def test_a_host_killed_mid_work_loses_nothing_and_another_stores_each_event_once(tmp_path) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({KEY: TENANT}))
    with fresh_schema("hosts") as schema:
        url = schema_url(server_url(), schema) + "&ingest_lease=3"
        a_dir, b_dir = tmp_path / "queue-a", tmp_path / "queue-b"
        a, a_url = _serve(url, keys, a_dir, tmp_path / "a.log")
        b, b_url = _serve(url, keys, b_dir, tmp_path / "b.log")
        procs = [a, b]
        try:
            headers = {"X-API-Key": KEY}
            events = _events(0, 100)
            with httpx.Client(base_url=a_url, headers=headers, timeout=30) as host_a:
                for e in events:
                    r = host_a.post("/api/v1/ingest", json=e)
                    assert r.status_code == 202, r.text
            # Every 202 is in the database, whatever A does next: A dies mid-work, and its disk with it.
            a.send_signal(signal.SIGKILL)
            a.wait(30)
            shutil.rmtree(a_dir, ignore_errors=True)
            left = _pending(url)  # what A accepted and never finished (leased or not yet taken)
            with httpx.Client(base_url=b_url, headers=headers, timeout=60) as host_b:
                deadline = time.monotonic() + 180
                while True:
                    r = host_b.post("/api/v1/flush", params={"timeout": 10})
                    assert r.status_code == 200, r.text
                    if r.json()["drained"] and _pending(url) == 0:
                        break
                    assert time.monotonic() < deadline, (left, r.json())
            assert _memories(url) == _reference(tmp_path, events)  # each event's memories, exactly once

            # A third host accepts more events and dies before its worker runs; a standalone
            # worker (no API) drains them.
            c, c_url = _serve(url, keys, tmp_path / "queue-c", tmp_path / "c.log")
            procs.append(c)
            more = _events(100, 30)
            with httpx.Client(base_url=c_url, headers=headers, timeout=30) as host_c:
                for e in more:
                    assert host_c.post("/api/v1/ingest", json=e).status_code == 202
            c.send_signal(signal.SIGKILL)
            c.wait(30)
            b.terminate()  # B's worker is not the one that drains these
            b.wait(30)
            worker = subprocess.Popen([sys.executable, "-m", "beeweave_core.cli", "--store", url, "--embedder",
                                       EMBEDDER, "worker"], env=_env(), stdout=subprocess.DEVNULL,
                                      stderr=(tmp_path / "worker.log").open("w"))
            procs.append(worker)
            deadline = time.monotonic() + 180
            while _pending(url) and time.monotonic() < deadline:
                time.sleep(0.5)
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0, (tmp_path / "worker.log").read_text()
            assert _pending(url) == 0
            assert _memories(url) == _reference(tmp_path, events + more)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(30)
