"""Do connected SSE clients slow the server's writes? (issue 47, item 7)

Usage:
    python benchmarks/sse_fanout.py [--clients 0,50] [--writes 300] [--events 2000] [--forget 3000]

For each client count, a fresh server (child process, 127.0.0.1, hashing embedder: the time
goes to the server's own work, not to a model) with that many clients following
``GET /api/v1/events`` (threads of another child process; ``--type`` filters), then, timed:

- ``writes``: ``--writes`` sequential ``POST /memories``;
- ``drain``: ``--events`` ``POST /ingest`` (agent turns), then ``POST /flush`` until drained
  (the time from the first ingest to drained);
- ``forget``: ``DELETE /users/{id}`` of a user holding ``--forget`` memories (stored before the
  server started), one ``memory.deleted`` event per memory.

Beside each phase's wall time, the CPU seconds the server process spent on it (user + system,
from /proc): on a shared box the wall times move with other jobs' load, the server's own CPU
much less. Each client counts the events it received; the table gives the fewest and the most, which
should equal the events the phases produced. The goal: every phase with 50 clients within
1.5x of the same phase with none.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_server import ADMIN, TENANT, client, load_average, serve  # noqa: E402

from beeweave_core import BeeWeave, HashingEmbedder  # noqa: E402
from beeweave_core.server.stores import tenant_path  # noqa: E402

EMBEDDER = "beeweave:hashing-64"
ID = re.compile(rb"^id: (\d+)", re.M)


def _listen(url: str, n: int, ready: Any, stop: Any, counts: Any, types: list[str]) -> None:
    """``n`` SSE clients in threads; ``ready`` counts the connected ones; ``counts`` gets each
    client's number of events when ``stop`` is set."""
    import httpx

    got = [0] * n
    ids: list[list[int]] = [[] for _ in range(n)]

    def one(i: int) -> None:
        # Reads raw bytes and finds the ids with one regex per chunk: the clients share the
        # box's two cores with the server, so they should cost as little as they can.
        with httpx.Client(base_url=url, headers={"X-API-Key": ADMIN}, timeout=httpx.Timeout(600, connect=30)) as h:
            with h.stream("GET", "/api/v1/events", params={"max_seconds": 3600, "type": types}) as r:
                with ready.get_lock():
                    ready.value += 1
                carry = b""
                for chunk in r.iter_raw():
                    text = carry + chunk
                    cut = text.rfind(b"\n") + 1
                    carry = text[cut:]
                    found = [int(x) for x in ID.findall(text[:cut])]
                    got[i] += len(found)
                    ids[i].extend(found)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    stop.wait()
    last = -1
    while sum(got) != last:  # the last events still on their way: until none came for a second
        last = sum(got)
        time.sleep(1.0)
    # Per client: events, and the ids missing between its first and last (a lost event).
    counts.put([(len(x), (x[-1] - x[0] + 1 - len(x)) if x else 0, x[-1] if x else 0) for x in ids])


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _prepare(root: Path, forget: int) -> None:
    """The user to forget, stored before the server starts (no events for these adds)."""
    mem = BeeWeave(tenant_path(root, TENANT), embedder=HashingEmbedder(64))
    mem.add_many([{"content": f"Forgettable note number {i} about the quarterly budget review", "user_id": "f"}
                  for i in range(forget)])
    mem.close()


def run(n_clients: int, args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="beeweave-sse-"))
    _prepare(root, args.forget)
    ctx = mp.get_context("spawn")
    ready, stop, counts = ctx.Value("i", 0), ctx.Event(), ctx.Queue()
    out: dict[str, Any] = {"clients": n_clients}
    with serve({"store": root, "embedder": EMBEDDER, "max_flush_timeout": 600}) as url, client(url) as h:
        server = mp.active_children()[0].pid  # serve()'s child, the only one yet
        listeners = None
        if n_clients:
            listeners = ctx.Process(target=_listen, args=(url, n_clients, ready, stop, counts, args.type), daemon=True)
            listeners.start()
            deadline = time.monotonic() + 120
            while ready.value < n_clients and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(1.0)  # each stream has taken its position in the log
            out["connected"] = ready.value
        for i in range(20):  # warm up (first requests, the first ingest's loads), not timed
            h.post("/api/v1/memories", json={"content": f"Warm-up note {i}", "user_id": "warm", "status": "active"})
        h.post("/api/v1/ingest", json={"user_id": "warm", "query": "Where is the warm-up room?",
                                       "response": "The warm-up room is on the second floor."})
        h.post("/api/v1/flush", params={"timeout": 60})
        t0, c0 = time.perf_counter(), _cpu(server)
        for i in range(args.writes):
            r = h.post("/api/v1/memories", json={"content": f"Benchmark memory {i}: the printer on floor {i % 7} "
                                                            "needs toner", "user_id": "w", "status": "active"})
            r.raise_for_status()
        out["writes_s"], out["writes_cpu"] = time.perf_counter() - t0, _cpu(server) - c0
        t0, c0 = time.perf_counter(), _cpu(server)
        for i in range(args.events):
            h.post("/api/v1/ingest", json={
                "user_id": f"user-{i % 20}", "query": f"How do I reset the password of account {i}?",
                "response": f"Open settings, choose security, then reset the password of account {i}."
            }).raise_for_status()
        while not h.post("/api/v1/flush", params={"timeout": 60}).json()["drained"]:
            pass
        out["drain_s"], out["drain_cpu"] = time.perf_counter() - t0, _cpu(server) - c0
        t0, c0 = time.perf_counter(), _cpu(server)
        r = h.delete("/api/v1/users/f")
        r.raise_for_status()
        out["forget_s"], out["forget_cpu"] = time.perf_counter() - t0, _cpu(server) - c0
        out["deleted"] = r.json()["deleted"]
        if listeners is not None:
            stop.set()
            got = counts.get(timeout=60)
            out["events_min"], out["events_max"] = min(g[0] for g in got), max(g[0] for g in got)
            out["missing"] = sum(g[1] for g in got)
            out["last_ids"] = sorted({g[2] for g in got})
            listeners.join(10)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", default="0,50")
    p.add_argument("--writes", type=int, default=300)
    p.add_argument("--events", type=int, default=2000)
    p.add_argument("--forget", type=int, default=3000)
    p.add_argument("--type", action="append", default=[],
                   help="the event types the clients ask for (repeatable; default: all). A type no phase "
                        "produces (pattern.detected) shows the cost of waking listeners without sending")
    args = p.parse_args()
    print(f"load average before: {load_average()}")
    rows = [run(int(n), args) for n in args.clients.split(",")]
    print(f"load average after: {load_average()}")
    base = rows[0]

    def cell(r: dict[str, Any], phase: str) -> str:
        """Wall s (x the first row), server CPU s (x the first row)."""
        wall, cpu = r[f"{phase}_s"], r[f"{phase}_cpu"]
        return (f"{wall:.2f} (x{wall / base[f'{phase}_s']:.2f}), "
                f"CPU {cpu:.2f} (x{cpu / max(base[f'{phase}_cpu'], 0.01):.2f})")

    print(f"| SSE clients | {args.writes} POST /memories: s, server CPU s | {args.events} events ingested + "
          f"drained | forget {args.forget} memories | events each client got (min-max) |")
    print("|---|---|---|---|---|")
    for r in rows:
        got = (f"{r['events_min']}-{r['events_max']}, {r['missing']} missing, last ids {r['last_ids']}"
               if "events_min" in r else "-")
        print(f"| {r['clients']} | {cell(r, 'writes')} | {cell(r, 'drain')} | {cell(r, 'forget')} | {got} |")


if __name__ == "__main__":
    main()
