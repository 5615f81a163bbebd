"""A webhook burst with a failing, then recovering receiver (issue 47, item 3's figure).

Usage:
    python benchmarks/webhook_burst.py [--memories 12000] [--fail-seconds 5] [--queue 10000]

A server (child process, 127.0.0.1, hashing embedder) has one webhook to a receiver in this
process that answers 503 to everything for ``--fail-seconds``, then 204. A user holding
``--memories`` memories (stored before the server started) is forgotten: one
``memory.deleted`` notification per memory arrives at once, more than the webhook's queue
(``--queue``, ``ServerConfig.webhook_queue``) holds while every delivery fails. When the
receiver has recovered and ``/metrics`` stops changing, the script prints what the receiver
got (distinct deliveries) and ``beeweave_webhook_delivered_total`` /
``beeweave_webhook_dropped_total`` by reason. Every notification must be delivered or counted
as dropped, and the webhook must still deliver afterwards (one more memory is added and must
arrive).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_server import TENANT, client, load_average, serve  # noqa: E402

from beeweave_core import BeeWeave, HashingEmbedder  # noqa: E402
from beeweave_core.server.stores import tenant_path  # noqa: E402


class Receiver:
    """An HTTP receiver on 127.0.0.1 that fails until ``recover()``."""

    def __init__(self) -> None:
        self.failing = threading.Event()
        self.failing.set()
        self.received: set[str] = set()
        self.refused = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                ok = not outer.failing.is_set()
                if ok:
                    outer.received.add(self.headers["X-BeeWeave-Delivery"])
                else:
                    outer.refused += 1
                self.send_response(204 if ok else 503)
                self.end_headers()

            def log_message(self, *a: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_port}/hook"


def counters(text: str) -> tuple[float, dict[str, float]]:
    delivered = re.search(r"^beeweave_webhook_delivered_total (\S+)$", text, re.M)
    dropped = {m.group(1): float(m.group(2)) for m in
               re.finditer(r'^beeweave_webhook_dropped_total\{reason="([^"]+)"\} (\S+)$', text, re.M)}
    return (float(delivered.group(1)) if delivered else 0.0), dropped


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--memories", type=int, default=12_000)
    p.add_argument("--fail-seconds", type=float, default=5.0)
    p.add_argument("--queue", type=int, default=10_000)
    args = p.parse_args()
    print(f"load average before: {load_average()}")
    root = Path(tempfile.mkdtemp(prefix="beeweave-hook-"))
    mem = BeeWeave(tenant_path(root, TENANT), embedder=HashingEmbedder(64))
    mem.add_many([{"content": f"Burst note {i} about the warehouse inventory", "user_id": "burst"}
                  for i in range(args.memories)])
    mem.close()
    rx = Receiver()
    hook = {"url": rx.url, "secret": "bench-secret", "types": ["memory.deleted", "memory.created"]}
    with serve({"store": root, "embedder": "beeweave:hashing-64", "webhooks": [hook],
                "webhook_queue": args.queue}) as url, client(url) as h:
        t0 = time.perf_counter()
        r = h.delete("/api/v1/users/burst")
        r.raise_for_status()
        deleted = r.json()["deleted"]
        forget_s = time.perf_counter() - t0
        time.sleep(max(0.0, args.fail_seconds - (time.perf_counter() - t0)))
        rx.failing.clear()  # the receiver recovers
        last, still = None, 0
        while still < 3:  # until /metrics has not changed for 3 s
            now = counters(h.get("/metrics").text)
            still = still + 1 if now == last else 0
            last = now
            time.sleep(1.0)
        delivered, dropped = last
        settled_s = time.perf_counter() - t0
        received = len(rx.received)
        h.post("/api/v1/memories", json={"content": "After the burst: the webhook still delivers",
                                         "user_id": "after", "status": "active"}).raise_for_status()
        time.sleep(2.0)
        after = counters(h.get("/metrics").text)[0] - delivered
    print(f"load average after: {load_average()}")
    total = delivered + sum(dropped.values())
    print("| notifications (memory.deleted) | receiver failing s | delivered | dropped by reason | "
          "delivered + dropped | distinct deliveries received | refused attempts | forget s | "
          "settled after s | delivered after the burst |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {deleted} | {args.fail_seconds:g} | {delivered:.0f} | "
          f"{', '.join(f'{k} {v:.0f}' for k, v in sorted(dropped.items()) if v) or 'none'} | {total:.0f} "
          f"| {received} | {rx.refused} | {forget_s:.1f} | {settled_s:.1f} | {after:.0f} of 1 |")


if __name__ == "__main__":
    main()
