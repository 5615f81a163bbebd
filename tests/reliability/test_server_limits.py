"""Server limits under abuse (issue 17), each against a real ``beeweave serve`` process on loopback.

- Slow clients: 600 connections that send half a request line and then nothing, against a
  server with ``--read-timeout 1 --max-connections 100``: a normal request still answers
  at once, the server holds at most ~100 of them, and closes each within the timeout.
- Noisy neighbour: tenant "noisy" keeps 200 searches in flight; tenant "quiet"'s median
  search latency stays within a few times its idle median.
- /flush waits do not hold worker threads: 45 concurrent ``/flush?timeout=5`` of one tenant
  leave another tenant's search fast.

Each test prints its figures (``-s`` shows them).
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
KEYS = "quiet-key-001:quiet,noisy-key-001:noisy"
QUIET, NOISY = "quiet-key-001", "noisy-key-001"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", BEEWEAVE_API_KEYS=KEYS)
    proc = subprocess.Popen([sys.executable, "-m", "beeweave_core.cli", "--store", str(tmp_path / "tenants"),
                             "--embedder", "beeweave:hashing-64", "serve", "--port", str(port),
                             "--log-level", "warning", *extra], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
        if proc.poll() is not None:
            raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "server died")
    proc.kill()
    raise RuntimeError("the server did not start")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_slow_clients_cannot_exhaust_the_server(tmp_path):
    proc, url = _serve(tmp_path, "--read-timeout", "1", "--max-connections", "100")
    slow: list[socket.socket] = []
    try:
        base_fds = _open_fds(proc.pid)
        for _ in range(600):
            s = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=5)
            s.sendall(b"GET /api/v1/stats HTTP/1.1\r\nHost: x\r\n")  # headers never finished
            slow.append(s)
        time.sleep(0.3)
        peak_fds = _open_fds(proc.pid)
        t0 = time.perf_counter()
        r = httpx.get(f"{url}/healthz", timeout=5)
        during = time.perf_counter() - t0
        assert r.status_code == 200
        time.sleep(1.6)  # the read timeout closes every slow connection
        closed = 0
        for s in slow:
            s.settimeout(0.5)
            try:
                closed += s.recv(1) == b""
            except (ConnectionResetError, BrokenPipeError):
                closed += 1
            except TimeoutError:
                pass
        after_fds = _open_fds(proc.pid)
        print(f"\nslow clients: 600 half-sent requests; server fds {base_fds} -> peak {peak_fds} -> {after_fds}; "
              f"a normal request during the flood took {during * 1000:.1f} ms; {closed}/600 closed by the server")
        assert peak_fds - base_fds <= 100 + 10
        assert closed == 600
        assert after_fds - base_fds <= 5
        assert during < 1.0
    finally:
        for s in slow:
            s.close()
        _stop(proc)


NOISE = textwrap.dedent("""
    import asyncio, sys, time
    import httpx
    url, key, seconds, inflight = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    async def worker(c, stop, counts):
        while time.monotonic() < stop:
            try:
                r = await c.post("/api/v1/search", json={"query": "deploy service cluster logs", "k": 10})
                counts[r.status_code] = counts.get(r.status_code, 0) + 1
            except httpx.HTTPError:
                counts["error"] = counts.get("error", 0) + 1
    async def main():
        counts = {}
        limits = httpx.Limits(max_connections=inflight, max_keepalive_connections=inflight)
        async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": key}, timeout=60, limits=limits) as c:
            stop = time.monotonic() + seconds
            await asyncio.gather(*(worker(c, stop, counts) for _ in range(inflight)))
        print(counts, flush=True)
    asyncio.run(main())
""")


def _fill(url: str, key: str, n: int) -> None:
    with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=30) as h:
        for i in range(n):
            r = h.post("/api/v1/memories", json={"content": f"Service {i} deploys to cluster {i % 7}; its logs are "
                                                            f"in dashboard ops/{i % 11} and alerts go to team {i % 5}",
                                                 "user_id": f"u{i % 3}", "status": "active"})
            assert r.status_code == 201, r.text


def _latencies(url: str, key: str, n: int) -> list[float]:
    out = []
    with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=30) as h:
        for i in range(n):
            t0 = time.perf_counter()
            r = h.post("/api/v1/search", json={"query": f"where are the logs of service {i % 50}", "k": 5})
            out.append((time.perf_counter() - t0) * 1000)
            assert r.status_code == 200, r.text
    return out


@pytest.mark.slow
def test_a_noisy_neighbour_cannot_starve_a_quiet_tenant(tmp_path):
    proc, url = _serve(tmp_path)
    try:
        _fill(url, QUIET, 300)
        _fill(url, NOISY, 300)
        _latencies(url, QUIET, 20)  # warm
        idle = statistics.median(_latencies(url, QUIET, 100))
        noise = subprocess.Popen([sys.executable, "-c", NOISE, url, NOISY, "12", "200"], stdout=subprocess.PIPE,
                                 env=dict(os.environ, PYTHONPATH=str(ROOT)))
        time.sleep(2.0)  # the 200 searches are in flight
        loaded = _latencies(url, QUIET, 100)
        out, _ = noise.communicate(timeout=60)
        busy = statistics.median(loaded)
        p95 = statistics.quantiles(loaded, n=20)[18]
        print(f"\nnoisy neighbour: quiet tenant search p50 idle {idle:.1f} ms, with 200 of the noisy tenant's "
              f"searches in flight {busy:.1f} ms (x{busy / idle:.1f}), p95 {p95:.1f} ms; noisy got "
              f"{out.decode().strip()}")
        # Starved, the quiet search would wait behind the noisy queue (~200 searches: seconds);
        # fairly scheduled it only shares the two cores with them. The bound tells the two apart
        # also when other jobs load the machine (x5.7 was seen under load, with fair scheduling).
        assert busy <= max(8 * idle, idle + 100), (idle, busy)
    finally:
        _stop(proc)


def test_flush_waits_do_not_hold_the_workers(tmp_path):
    proc, url = _serve(tmp_path)
    try:
        _fill(url, QUIET, 50)
        idle = statistics.median(_latencies(url, QUIET, 30))
        # Events that cannot drain quickly: a big backlog for the noisy tenant.
        with httpx.Client(base_url=url, headers={"X-API-Key": NOISY}, timeout=30) as h:
            for i in range(300):
                h.post("/api/v1/ingest", json={"user_id": "u", "query": f"question {i} about the deploy",
                                               "response": f"answer {i}: run make deploy on cluster {i % 7}"})
        results: list[int] = []

        def flush() -> None:
            with httpx.Client(base_url=url, headers={"X-API-Key": NOISY}, timeout=30) as h:
                results.append(h.post("/api/v1/flush", params={"timeout": 5}).status_code)

        threads = [threading.Thread(target=flush) for _ in range(45)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        during = statistics.median(_latencies(url, QUIET, 30))
        for t in threads:
            t.join(30)
        print(f"\nflush waits: quiet tenant search p50 idle {idle:.1f} ms, during 45 concurrent /flush of another "
              f"tenant {during:.1f} ms; flush statuses {sorted(set(results))}")
        assert set(results) == {200}
        # Held workers would make a search wait out a flush (up to its 5 s timeout); a second
        # is far from that and from the machine's load (a tighter bound failed under load).
        assert during <= idle + 1000
    finally:
        _stop(proc)
