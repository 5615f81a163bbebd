"""Maintenance on a schedule: ``maintain()`` every ``interval`` seconds on a daemon thread.

A pass works in small batches (see :class:`~beeweave_core.lifecycle.maintenance.Maintenance`),
so searches and writes go on while it runs; closing the store stops the thread between
batches.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ..validation import check_number
from .reports import MaintenanceReport

__all__ = ["MaintenanceSchedule"]

logger = logging.getLogger(__name__)


class MaintenanceSchedule:
    """The background maintenance of one store (``BeeWeave.maintain(interval=...)``).

    Attributes:
        interval: seconds between the end of one pass and the start of the next.
        runs: passes completed; ``last_report`` is the latest pass's report.
        errors: passes that failed (logged; the schedule goes on).
    """

    def __init__(self, run: Callable[[str | None], MaintenanceReport]) -> None:
        self._run = run
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.interval: float | None = None
        self.user_id: str | None = None
        self.runs = 0
        self.errors = 0
        self.last_report: MaintenanceReport | None = None
        self._done = threading.Condition()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, interval: float, user_id: str | None = None) -> MaintenanceSchedule:
        """Run every ``interval`` seconds from now on (a running schedule takes the new interval)."""
        check_number("interval", interval, low=0.001)
        with self._lock:
            self.interval, self.user_id = float(interval), user_id
            if self.running:
                self._wake.set()  # the sleeping loop re-reads its interval
                return self
            self._wake.clear()
            self._thread = threading.Thread(target=self._loop, name="beeweave-maintain", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop the schedule; a pass under way finishes its current batch first."""
        with self._lock:
            thread, self._thread = self._thread, None
            self.interval = None
            self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def wait_runs(self, n: int, timeout: float | None = None) -> bool:
        """Block until ``n`` passes are complete (for tests and shutdown scripts)."""
        with self._done:
            return self._done.wait_for(lambda: self.runs >= n, timeout)

    def _loop(self) -> None:
        me = threading.current_thread()
        while True:
            with self._lock:
                if self._thread is not me:
                    return
                user_id = self.user_id
            try:
                self.last_report = self._run(user_id)
            except Exception:  # a failed pass is retried at the next interval
                self.errors += 1
                logger.exception("BeeWeave background maintenance failed")
            with self._done:
                self.runs += 1
                self._done.notify_all()
            with self._lock:
                interval = self.interval
                self._wake.clear()
            if interval is None:
                return
            self._wake.wait(interval)
