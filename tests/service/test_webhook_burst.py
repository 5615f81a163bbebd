"""A webhook survives a burst while its receiver fails (issue 47, item 3): the delivery thread
put due retries back into its own full queue with a blocking ``put()`` while it was the queue's
only consumer, and stopped for good (0 of 1,992 delivered after the receiver recovered).
Now retries wait in a heap the thread owns; every notification is delivered or counted as
dropped in ``/metrics``; the thread is alive afterwards and delivers what comes next."""

from __future__ import annotations

import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from beeweave_core.server import ServerConfig
from tests.service.service_support import EMBEDDER, start_server

ADMIN = "admin-key-of-acme"
QUEUE = 8  # ServerConfig.webhook_queue: the burst is many times larger


def _metric(text: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def _dropped(text: str) -> float:
    return sum(float(v) for v in re.findall(r"^beeweave_webhook_dropped_total\{[^}]*\} (\S+)$", text, re.M))


def test_a_burst_past_the_queue_with_a_failing_then_recovering_receiver(tmp_path):
    received: set[str] = set()
    failing = threading.Event()
    failing.set()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            ok = not failing.is_set()
            if ok:
                received.add(self.headers["X-BeeWeave-Delivery"])
            self.send_response(204 if ok else 503)
            self.end_headers()

        def log_message(self, *a):
            pass

    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    s = start_server(ServerConfig(tmp_path, {ADMIN: "acme"}, embedder=EMBEDDER, webhook_queue=QUEUE, webhooks=[
        {"url": f"http://127.0.0.1:{receiver.server_port}/hook", "secret": "s3cret-hook", "max_attempts": 4,
         "first_delay": 0.05}]))
    try:
        with s.http(ADMIN) as h:
            for i in range(60):  # events keep coming while the receiver fails
                r = h.post("/api/v1/memories", json={"content": f"burst memory number {i} for the hook",
                                                     "user_id": "u", "status": "active"})
                assert r.status_code == 201, r.text
            assert h.delete("/api/v1/users/u").status_code == 200  # one more burst: a deletion per memory
            time.sleep(0.5)  # retries come due while the queue is full
            failing.clear()  # the receiver recovers

            sender = s.app.state.webhooks
            thread = sender._threads[0]
            log = s.app.state.stores.opened()["acme"].event_log
            total = log.last_seq()
            assert total > 10 * QUEUE
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                text = h.get("/metrics").text
                if _metric(text, "beeweave_webhook_delivered_total") + _dropped(text) >= total:
                    break
                time.sleep(0.1)
            delivered, dropped = _metric(text, "beeweave_webhook_delivered_total"), _dropped(text)
            assert delivered + dropped == total, (delivered, dropped, total)
            assert delivered == len(received) and dropped > 0
            assert _metric(text, "beeweave_webhook_dropped_total", '{reason="queue_full"}') > 0
            assert thread.is_alive()

            # the sender goes on: the next event reaches the recovered receiver
            mid = h.post("/api/v1/memories", json={"content": "after the burst, a memory the hook must get",
                                                   "user_id": "v", "status": "active"}).json()["id"]
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and f"acme:{log.last_seq()}" not in received:
                time.sleep(0.05)
            assert f"acme:{log.last_seq()}" in received, mid
    finally:
        s.stop()
        receiver.shutdown()
