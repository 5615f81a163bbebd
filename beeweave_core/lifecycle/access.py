"""Access tracking: search hits update ``access_count`` and ``last_accessed`` in the store.

Writing a record at every search would put a write transaction on the read path, so
accesses wait in memory and are written in batches: when ``batch`` memories wait,
``interval`` seconds after the first of them (a timer thread), and at ``flush()`` /
``close()``. A write re-reads each record and adds the counts, so it never undoes a
change made in between (feedback, an update). Until then ``get()`` shows the last
written counts; a crash loses at most ``interval`` seconds of access counts, never
a memory.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from datetime import datetime

from ..errors import StoreClosedError

__all__ = ["AccessRecorder", "Pending"]

logger = logging.getLogger(__name__)

Pending = dict[str, tuple[int, datetime]]  # id -> (accesses, latest access)


class AccessRecorder:
    def __init__(self, write: Callable[[Pending], None], *, batch: int, interval: float,
                 write_lock: threading.RLock | None = None) -> None:
        self._write = write
        self._batch = batch
        self._interval = interval
        self._pending: Pending = {}
        self._lock = threading.Lock()  # guards _pending and _timer
        # One write at a time; close() waits for it. The owner passes its own lock when the
        # write takes it anyway: one lock, so no lock-order deadlock is possible.
        self._write_lock = write_lock or threading.RLock()
        self._timer: threading.Timer | None = None
        self._closed = False

    def record(self, ids: Iterable[str], now: datetime) -> None:
        with self._lock:
            if self._closed:
                return
            for cid in ids:
                n, last = self._pending.get(cid, (0, now))
                self._pending[cid] = (n + 1, max(last, now))
            due = self._interval == 0 or len(self._pending) >= self._batch
            if not due and self._timer is None and self._pending:
                self._timer = threading.Timer(self._interval, self._on_timer)
                self._timer.daemon = True
                self._timer.start()
        if due:
            self.flush()

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def waiting(self, cid: str) -> int:
        """Accesses of memory ``cid`` recorded but not written yet. Read under the owner's write
        lock (which ``flush()`` holds while it writes), this plus the stored ``access_count`` is
        every recorded access, each counted once."""
        with self._lock:
            entry = self._pending.get(cid)
            return entry[0] if entry is not None else 0

    def flush(self, timeout: float | None = None) -> bool:
        """Write the pending counts; False if the write lock was not free within ``timeout``:
        a long write holds it (a big batch merging) and the counts wait for the next flush,
        the timer or close(), so that ``flush(timeout)`` returns in time (issue 47, item 8)."""
        if not self._write_lock.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)):
            return False
        try:
            with self._lock:
                pending, self._pending = self._pending, {}
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
            if not pending:
                return True
            try:
                self._write(pending)
            except StoreClosedError:
                raise
            except BaseException:
                with self._lock:  # keep the counts for the next attempt
                    for cid, (n, last) in pending.items():
                        m, later = self._pending.get(cid, (0, last))
                        self._pending[cid] = (n + m, max(last, later))
                raise
            return True
        finally:
            self._write_lock.release()

    def _on_timer(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        except Exception:  # a background write must not kill the process; the next flush retries
            logger.exception("BeeWeave: writing access counts failed")

    def close(self) -> None:
        """Write what is pending and stop the timer; later accesses are ignored."""
        try:
            self.flush()
        finally:
            with self._lock:
                self._closed = True
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
