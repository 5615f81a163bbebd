"""SSE fan-out costs a write O(1) however many clients listen (issue 47, item 7): every append
woke every listener, and each re-read the SQLite log under its lock in the shared thread pool
(50 clients: 300 writes 9.1 s instead of 1.2). Now a write wakes each event loop at most once
and listeners copy new events from the shared ring of recent events; the durable log is read
only by a listener that fell behind the ring, or to see another process's appends.
Counts, not timings (the timings are in benchmarks/sse_fanout.py)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import httpx

from beeweave_core.events import EventType, MemoryEvent
from beeweave_core.server import ServerConfig
from beeweave_core.server.event_log import EventFilter, EventLog
from beeweave_core.server.fanout import GAP, follow
from tests.service.service_support import EMBEDDER, start_server

ADMIN = "admin-key-of-acme"


def _event(i: int, user: str = "u") -> MemoryEvent:
    return MemoryEvent(EventType.CREATED, chunk_id=f"m{i}", user_id=user, tags=("t",), data={"i": i})


class CountingLog(EventLog):
    """Counts the durable (SQLite) reads."""

    durable_reads = 0

    def read(self, after: int, flt: EventFilter, limit: int = 500) -> Any:
        self.durable_reads += 1
        return super().read(after, flt, limit)


async def _collect(log: EventLog, start: int, want: int, out: list[int]) -> None:
    async def gone() -> bool:
        return len(out) >= want

    end = asyncio.get_running_loop().time() + 30  # a bound for a broken build, not a timing
    async for batch in follow(log, start, EventFilter(), gone=gone, end=end):
        for ev, text in batch:
            assert json.loads(text) == ev
            out.append(ev["seq"])


def _append_from_a_thread(log: EventLog, events: list[MemoryEvent], pause: float = 0.0) -> threading.Thread:
    def run() -> None:
        for ev in events:
            log.append(ev)
            if pause:
                time.sleep(pause)

    t = threading.Thread(target=run)
    t.start()
    return t


def test_a_write_wakes_once_however_many_listen_and_nobody_rereads_the_log():
    n_listeners, n_events = 30, 120
    log = CountingLog(None)

    async def run() -> list[list[int]]:
        got: list[list[int]] = [[] for _ in range(n_listeners)]
        tasks = [asyncio.create_task(_collect(log, 0, n_events, g)) for g in got]
        while log.durable_reads < n_listeners:  # each has started (its first read: the ring is empty)
            await asyncio.sleep(0.01)
        writer = await asyncio.to_thread(_append_from_a_thread, log, [_event(i) for i in range(n_events)], 0.001)
        await asyncio.gather(*tasks)
        await asyncio.to_thread(writer.join)
        return got

    got = asyncio.run(run())
    assert all(g == list(range(1, n_events + 1)) for g in got)  # every event, in order, to everyone
    assert log.wakeups.scheduled <= n_events  # not n_listeners per append
    # The first read of each listener, and one idle poll each at most: none per append.
    assert log.durable_reads <= 2 * n_listeners, log.durable_reads
    log.close()


def test_a_listener_behind_the_ring_catches_up_from_the_durable_log_in_order():
    log = CountingLog(None, recent=8)
    for i in range(50):  # nobody consumes meanwhile: the writer never waits for a listener
        log.append(_event(i))
    got: list[int] = []
    asyncio.run(_collect(log, 3, 47, got))
    assert got == list(range(4, 51)) and log.durable_reads >= 1
    log.close()


def test_events_another_process_appended_fill_the_hole_in_the_ring(tmp_path):
    path = tmp_path / "t.db.events"
    mine, other = EventLog(path), EventLog(path)  # two server processes on one store
    mine.append(_event(1))
    other.append(_event(2))
    mine.append(_event(3))
    got: list[int] = []
    asyncio.run(_collect(mine, 0, 3, got))
    assert got == [1, 2, 3]
    mine.close()
    other.close()


def test_a_forgotten_users_events_leave_the_ring():
    log = EventLog(None)
    log.append(_event(1, "gone"))
    log.append(MemoryEvent(EventType.DELETED, chunk_id="m1", user_id="gone"))
    log.append(_event(3, "kept"))
    log.forget_user("gone")
    found = log.recent.after(0, 500)
    assert found is not None
    events, last = found
    assert last == 3 and [(e["type"], e["user_id"]) for e, _ in events] == [
        ("memory.deleted", "gone"), ("memory.created", "kept")]
    log.close()


def test_clients_of_a_server_do_not_reread_the_log_per_write(tmp_path, monkeypatch):
    reads = [0]
    real = EventLog.read

    def counting(self: EventLog, after: int, flt: EventFilter, limit: int = 500) -> Any:
        reads[0] += 1
        return real(self, after, flt, limit)

    monkeypatch.setattr(EventLog, "read", counting)
    n_clients, n_writes = 8, 30
    s = start_server(ServerConfig(tmp_path, {ADMIN: "acme"}, embedder=EMBEDDER))
    seen: list[list[int]] = [[] for _ in range(n_clients)]

    def listen(out: list[int]) -> None:
        with httpx.Client(base_url=s.url, headers={"X-API-Key": ADMIN}, timeout=30) as h, h.stream(
                "GET", "/api/v1/events", params={"after": 0, "max_seconds": 30, "type": "memory.created"}) as r:
            for line in r.iter_lines():
                if line.startswith("data:"):
                    out.append(json.loads(line[5:])["seq"])
                    if len(out) > n_writes:
                        return

    try:
        with s.http(ADMIN) as h:
            def write(i: int) -> None:
                r = h.post("/api/v1/memories", json={"content": f"memory number {i} of the fan-out test",
                                                     "user_id": "u", "status": "active"})
                assert r.status_code == 201, r.text

            write(0)
            threads = [threading.Thread(target=listen, args=(out,)) for out in seen]
            for t in threads:
                t.start()
            deadline = time.monotonic() + 30
            while not all(seen) and time.monotonic() < deadline:  # every client has the first event
                time.sleep(0.02)
            reads[0] = 0
            for i in range(1, n_writes + 1):
                write(i)
            for t in threads:
                t.join(30)
    finally:
        s.stop()
    assert all(len(out) == n_writes + 1 and out == sorted(out) for out in seen)
    # Today's fan-out read the log once per client per write (~n_clients * n_writes = 240).
    assert reads[0] <= 2 * n_clients, reads[0]


def test_an_events_json_is_encoded_once_with_a_nan_as_null():
    log = EventLog(None)
    log.append(MemoryEvent(EventType.UPDATED, chunk_id="m1", user_id="u", data={"score": float("nan")}))
    found = log.recent.after(0, 500)
    assert found is not None
    (ev, text), = found[0]
    assert json.loads(text)["data"] == {"score": None}  # as FastAPI sent a dict's NaN
    log.close()


def test_appends_faster_than_the_gap_share_a_wake_up_and_a_lone_one_is_not_held_back():
    n_events = 120
    log = EventLog(None)

    async def run() -> tuple[list[int], float, int]:
        got: list[int] = []
        task = asyncio.create_task(_collect(log, 0, n_events + 1, got))
        while not log.wakeups._signals:  # the listener is registered
            await asyncio.sleep(0.01)
        await asyncio.sleep(2 * GAP)
        log.append(_event(0))  # after a quiet GAP: woken at once
        while not got:
            await asyncio.sleep(0.005)
        lone = log.wakeups.postponed
        t0 = time.monotonic()
        writer = await asyncio.to_thread(_append_from_a_thread, log, [_event(i) for i in range(1, n_events + 1)],
                                         0.001)
        await asyncio.to_thread(writer.join)
        took = time.monotonic() - t0
        await task
        return got, took, lone

    got, took, lone = asyncio.run(run())
    assert got == list(range(1, n_events + 2))  # every event, in order
    assert lone == 0
    # One wake-up per GAP at most during the burst (an append per loop pass was ~n_events), plus
    # the lone one and the one that may be pending when the burst ends.
    assert log.wakeups.scheduled <= 2 + took / GAP + 1, (log.wakeups.scheduled, took)
    log.close()
