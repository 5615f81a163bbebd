"""SSE fan-out: an append costs the writer O(1) however many listeners there are.

The writer used to call every listener's wake-up, and every listener then re-read the log in
the thread pool (issue 47, item 7). Now the writer only marks the log's event loop as due
(one ``call_soon_threadsafe`` per loop, and none while one is already pending, so a burst of
appends costs one wake-up); in the loop one callback sets the event the listeners wait on,
and each copies what is new from :class:`RecentEvents` without a thread. A loop's listeners
are woken at most once per ``GAP``: each wake-up is a socket write per listener, so appends
that come faster share one.

Slow listeners never block writers: nothing waits for a listener, and no listener has a
buffer that could fill. A listener that falls behind more than the ring holds reads the
durable log from its position (what a client reconnecting with ``Last-Event-ID`` gets), as
long as the log keeps those events (``ServerConfig.max_events``).
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import aclosing, contextmanager
from typing import Any

from starlette.concurrency import run_in_threadpool

from .event_tail import Sent, wire

__all__ = ["Wakeups", "follow", "frames"]

# s between two wake-ups of one loop's listeners: appends within it reach them in the next
# wake-up's batch. Each wake-up costs a socket write per listener, and sequential writes come
# faster than one per GAP, so each write paid for every listener; an append after a quiet GAP
# still wakes them at once.
GAP = 0.025
IDLE_POLL = 1.0  # s without an append before the durable log is read (another process's events)
PING = 15.0  # s of silence before a keep-alive comment, as FastAPI's own SSE sends


class _Signal:
    """The listeners of one event loop: they wait on ``event``; ``fire`` (in the loop) sets it
    and starts a fresh one for the next append."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.event = asyncio.Event()
        self.pending = False  # a fire is scheduled and has not run yet
        self.listeners = 0
        self.fired = -math.inf  # the loop's time at the last fire


class Wakeups:
    """The wake-ups of one event log's listeners, coalesced per event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._signals: dict[asyncio.AbstractEventLoop, _Signal] = {}
        self.scheduled = 0  # wake-ups handed to event loops: at most one per append, whatever listens
        self.postponed = 0  # of them, how many waited for GAP to pass since the loop's last fire

    def notify(self) -> None:
        """After an append (any thread): wake each loop that has listeners, once."""
        with self._lock:
            due = [s for s in self._signals.values() if not s.pending]
            for s in due:
                s.pending = True
            self.scheduled += len(due)
        for s in due:
            try:
                s.loop.call_soon_threadsafe(self._due, s)
            except RuntimeError:  # the loop closed under its last listener
                pass

    def _due(self, s: _Signal) -> None:
        """In the loop: fire now, or when GAP has passed since the last fire (still pending
        until then, so the appends meanwhile schedule nothing more)."""
        wait = s.fired + GAP - s.loop.time()
        if wait > 0:
            self.postponed += 1
            s.loop.call_later(wait, self._fire, s)
        else:
            self._fire(s)

    def _fire(self, s: _Signal) -> None:
        s.fired = s.loop.time()
        with self._lock:
            s.pending = False  # an append from now on schedules another fire
        event, s.event = s.event, asyncio.Event()
        event.set()

    @contextmanager
    def listening(self) -> Iterator[_Signal]:
        """Register a listener of the running loop for the ``with`` block."""
        loop = asyncio.get_running_loop()
        with self._lock:
            s = self._signals.get(loop) or self._signals.setdefault(loop, _Signal(loop))
            s.listeners += 1
        try:
            yield s
        finally:
            with self._lock:
                s.listeners -= 1
                if not s.listeners:
                    del self._signals[loop]


Found = tuple[list[Sent], int]


async def follow(log: Any, start: int, flt: Any, *, gone: Callable[[], Awaitable[bool]],
                 end: float | None = None) -> AsyncGenerator[list[Sent], None]:
    """The events of ``log`` after ``start`` matching ``flt`` with their JSON, in batches as
    they come (an empty batch after each idle second), until ``gone()`` says the client left
    or the loop's clock passes ``end``."""
    loop = asyncio.get_running_loop()
    seq = start
    durable = False  # read the SQLite log next: after an idle wait, another process may have appended
    asked = -IDLE_POLL  # when gone() was last asked
    with log.wakeups.listening() as signal:
        while end is None or loop.time() < end:
            # Asked at most once per IDLE_POLL, not at every wake-up: Starlette's check cancels
            # a receive, which cost 50 listeners more than the rest of a write. A client that
            # leaves while events are sent ends the stream sooner: the send fails.
            if loop.time() - asked >= IDLE_POLL:
                if await gone():
                    return
                asked = loop.time()
            woken = signal.event  # taken before reading: an append during the read sets it
            recent: Found | None = None if durable else log.recent.after(seq, 500)
            if recent is None:
                read, last = await run_in_threadpool(log.read, seq, flt)
                events = [(ev, wire(ev)) for ev in read]
                durable = False
            else:
                events, last = [sent for sent in recent[0] if flt.matches(sent[0])], recent[1]
            moved, seq = last != seq, last
            if events:
                yield events
            if moved:
                continue
            wait = IDLE_POLL if end is None else max(0.0, min(IDLE_POLL, end - loop.time()))
            try:
                await asyncio.wait_for(woken.wait(), wait)
            except asyncio.TimeoutError:
                durable = True
                yield []


async def frames(batches: AsyncGenerator[list[Sent], None]) -> AsyncGenerator[bytes, None]:
    """The SSE wire format of :func:`follow`'s batches: one chunk (one socket write) per batch,
    and a ``: ping`` comment after PING seconds without one (proxies drop silent streams).
    Written here rather than by FastAPI's SSE support, whose tasks and per-event encoding
    cost each listener work per event: with many listeners, more than the write itself."""
    loop = asyncio.get_running_loop()
    sent = loop.time()
    async with aclosing(batches):
        async for batch in batches:
            if batch:
                yield "".join(f"event: {ev['type']}\ndata: {text}\nid: {ev['seq']}\n\n"
                              for ev, text in batch).encode()
                sent = loop.time()
            elif loop.time() - sent >= PING:
                yield b": ping\n\n"
                sent = loop.time()
