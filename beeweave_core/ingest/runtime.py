"""The moving parts of ingestion: the queue, the bound, and the background worker.

Exactly once: an event stays ``pending`` in the queue until its memories are stored;
their ids derive from the event id, so if the process dies between storing and
``done``, the next worker finds the ids already stored, skips them, and only then marks
the event done. Pattern sightings carry the event id, so they are not counted twice
either.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ..errors import StoreClosedError
from ..records import KnowledgeChunk
from .config import IngestConfig, QueueFullPolicy
from .errors import QueueFullError
from .patterns import PatternTracker
from .pipeline import Pipeline, Prepared, redact_event
from .queue import EventQueue, QueuedEvent, SQLiteEventQueue

__all__ = ["IngestRuntime", "REJECTED"]

logger = logging.getLogger(__name__)

REJECTED = "ingest.rejected"  # kv namespace: ids of rejected memories, never stored again
_SWEEP_EVERY = timedelta(hours=1)


class _SwitchInterval:
    """Lowers ``sys.setswitchinterval`` while any ingest worker runs; restores it after the last.

    A thread that wants the GIL while the worker runs Python code waits up to the switch
    interval (5 ms by default): that wait, not ingest()'s own work, would set its p99.
    """

    _lock = threading.Lock()
    _users = 0
    _saved: float | None = None

    @classmethod
    def acquire(cls, wanted: float | None) -> bool:
        if wanted is None:
            return False
        with cls._lock:
            if cls._users == 0:
                cls._saved = sys.getswitchinterval()
            cls._users += 1
            if wanted < sys.getswitchinterval():
                sys.setswitchinterval(wanted)
        return True

    @classmethod
    def release(cls) -> None:
        with cls._lock:
            cls._users -= 1
            if cls._users == 0 and cls._saved is not None:
                sys.setswitchinterval(cls._saved)
                cls._saved = None


def queue_path_for(backend: Any) -> Path | None:
    """``<db>.queue`` beside a file store; None when the store has no file."""
    path = getattr(backend, "path", None)
    if isinstance(path, (str, Path)):
        path = Path(path)
        return path.with_name(path.name + ".queue")
    return None


class IngestRuntime:
    """One BeeWeave's queue and worker. ``memory`` is the BeeWeave (for add_many, update...)."""

    def __init__(self, memory: Any, config: IngestConfig) -> None:
        self.memory = memory
        self.config = config
        self.pipeline = Pipeline(config)
        self.patterns = PatternTracker(memory.backend, memory.tokenizer, config.patterns, memory.clock)
        self._queue: EventQueue | None = None
        self._lock = threading.Lock()  # queue creation, worker start, close
        self._cond = threading.Condition()  # the bound: callers wait here for room, flush() for an empty queue
        self._wake = threading.Event()
        self._inflight: set[str] = set()
        self._thread: threading.Thread | None = None
        self._stop = False
        self._closed = False
        self._last_sweep: datetime | None = None
        self.processed = 0
        self.failed = 0
        self.dropped = 0

    # -- the queue --------------------------------------------------------------------------
    def _target(self) -> tuple[Path | None, bool]:
        """Where the queue lives, and whether that was asked for explicitly."""
        if self.config.queue_path is not None:
            return Path(self.config.queue_path), True
        return queue_path_for(self.memory.backend), False

    def open(self) -> None:
        """At start-up: reopen a queue left by an earlier process and resume its pending events.
        A store that never ingested gets no queue file."""
        path, explicit = self._target()
        if self.config.queue is not None or explicit or (path is not None and path.exists()):
            q = self.queue()
            if q.pending_count() and self.config.autostart:
                self.start()

    def queue(self) -> EventQueue:
        if self._queue is None:
            with self._lock:
                if self._closed:
                    raise StoreClosedError("the store is closed")
                if self._queue is None:
                    self._queue = self._make_queue()
        return self._queue

    def _make_queue(self) -> EventQueue:
        if self.config.queue is not None:
            return self.config.queue
        path, _ = self._target()
        backend = self.memory.backend
        if path is None and not hasattr(backend, "path"):
            logger.warning("%s has no file: ingested events are kept in memory until processed (set "
                           "IngestConfig.queue_path to make them durable)", type(backend).__name__)
        return SQLiteEventQueue(path, fsync=self.config.fsync)

    def put(self, event_id: str, user_id: str, text: str) -> bool:
        """Queue one validated event under the bound; True if it was new."""
        q = self.queue()
        cfg = self.config
        with self._cond:
            if self._closed:
                raise StoreClosedError("the store is closed")
            if q.pending_count() >= cfg.max_pending:
                self._make_room(q)
            added = q.put(event_id, user_id, text)
        if cfg.autostart:
            self.start()
        self._wake.set()
        return added

    def _make_room(self, q: EventQueue) -> None:
        """Called holding ``_cond`` with a full queue: apply the full-queue policy."""
        cfg = self.config
        full = (f"the ingest queue holds {q.pending_count()} events (IngestConfig.max_pending="
                f"{cfg.max_pending}); the worker is behind")
        if cfg.when_full is QueueFullPolicy.RAISE:
            raise QueueFullError(full)
        if cfg.when_full is QueueFullPolicy.DROP_OLDEST:
            if q.drop_oldest(set(self._inflight), "dropped: queue full") is not None:
                self.dropped += 1
                logger.warning("ingest queue full: the oldest event moved to the dead letters")
            return  # every waiting event is in the worker's hands: go over the bound by at most a batch
        if cfg.autostart:
            self.start()
        if not self._cond.wait_for(lambda: q.pending_count() < cfg.max_pending or self._closed, cfg.full_timeout):
            raise QueueFullError(f"{full}; waited {cfg.full_timeout} s (IngestConfig.full_timeout)")
        if self._closed:
            raise StoreClosedError("the store is closed")

    # -- the worker ------------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._lock:
            if self._closed or (self._thread is not None and self._thread.is_alive()):
                return
            if self._queue is None:
                return  # nothing was ever queued
            self._stop = False
            self._thread = threading.Thread(target=self._run, name="beeweave-ingest", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        q = self._queue
        if q is None:
            return
        lowered = _SwitchInterval.acquire(self.config.switch_interval)
        try:
            self._loop(q)
        finally:
            if lowered:
                _SwitchInterval.release()
            with self._cond:
                self._cond.notify_all()

    def _loop(self, q: EventQueue) -> None:
        while not self._stop:
            self._wake.clear()  # before take(): a put after this sets it again, so no wake-up is lost
            try:
                batch = q.take(self.config.batch_size)
            except StoreClosedError:
                break
            if not batch:
                with self._cond:
                    self._cond.notify_all()
                self._idle(q)
                self._wake.wait()
                continue
            try:
                self._process(q, batch)
            except StoreClosedError:
                break
            except Exception:  # a bug here must not kill the worker: the batch stays pending
                logger.exception("BeeWeave ingest worker: a batch failed; retrying shortly")
                time.sleep(0.5)
            finally:
                with self._cond:
                    self._inflight.clear()
                    self._cond.notify_all()

    def _idle(self, q: EventQueue) -> None:
        q.checkpoint()
        now = self.memory.clock()
        if self._last_sweep is None or now - self._last_sweep >= _SWEEP_EVERY:
            self._last_sweep = now
            try:
                self.patterns.sweep()
            except StoreClosedError:
                pass
            except Exception:
                logger.exception("BeeWeave ingest worker: sweeping old pattern counts failed")

    def _process(self, q: EventQueue, batch: list[QueuedEvent]) -> None:
        with self._cond:
            self._inflight = {e.id for e in batch}
        ready: list[tuple[QueuedEvent, Prepared]] = []
        for qe in batch:
            body = qe.body
            try:
                body, _ = redact_event(self.pipeline.redactor, body)
                ready.append((qe, self.pipeline.prepare(body)))
            except Exception as exc:
                self._fail(q, qe, exc, body)
        try:
            self._store([c for _, p in ready for c in p.chunks])
        except StoreClosedError:
            raise
        except Exception:
            # One bad event must not sink the batch: store event by event to find it.
            kept = []
            for qe, p in ready:
                try:
                    self._store(p.chunks)
                    kept.append((qe, p))
                except StoreClosedError:
                    raise
                except Exception as exc:
                    self._fail(q, qe, exc, p.event.to_dict())
            ready = kept
        for _, p in ready:
            if p.sighting is not None:
                try:
                    det = self.patterns.observe(p.sighting)
                    if det is not None:
                        self.patterns.publish(self.memory, det, agent_id=p.event.agent_id)
                except StoreClosedError:
                    raise
                except Exception:  # the memories are stored; a pattern problem is not the event's failure
                    logger.exception("BeeWeave ingest: pattern detection failed for event %s", p.event.id)
        q.done([qe.id for qe, _ in ready])
        self.processed += len(ready)

    def _store(self, chunks: list[KnowledgeChunk]) -> None:
        if not chunks:
            return
        backend = self.memory.backend
        skip = backend.contains([c.id for c in chunks])  # stored before a crash: exactly once
        new = [c for c in chunks if c.id not in skip]
        new = [c for c in new if backend.kv_get(REJECTED, c.id) is None]
        if new:
            self.memory.add_many(new, show_progress=False, batch_size=len(new))

    def _fail(self, q: EventQueue, qe: QueuedEvent, exc: Exception, body: dict[str, Any]) -> None:
        self.failed += 1
        error = f"{type(exc).__name__}: {exc}"
        logger.warning("BeeWeave ingest: event %s failed and went to the dead letters: %s", qe.id, error)
        q.fail(qe.id, error[:2000], body=json.dumps(body, ensure_ascii=False, default=str))

    # -- waiting and stopping --------------------------------------------------------------------
    def flush(self, timeout: float | None) -> bool:
        q = self._queue
        if q is None:
            return True
        if threading.current_thread() is self._thread:
            return q.pending_count() == 0  # a subscriber on the worker thread cannot wait for itself
        if q.pending_count():
            self.start()
        thread = self._thread

        def drained() -> bool:
            return q.pending_count() == 0 or self._closed or thread is None or not thread.is_alive()

        with self._cond:
            self._cond.wait_for(drained, timeout)
        return q.pending_count() == 0

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            queue, thread = self._queue, self._thread
        if queue is not None and not queue.durable and queue.pending_count():
            # A queue in memory would lose what is left: process it first.
            if not self.flush(self.config.close_timeout):
                logger.warning("BeeWeave closed with %d ingested events unprocessed (the queue was in memory)",
                               queue.pending_count())
        with self._cond:
            self._closed = True
            self._stop = True
            self._cond.notify_all()
        self._wake.set()
        if thread is not None and thread.is_alive():
            thread.join(self.config.close_timeout)
            if thread.is_alive():
                logger.warning("BeeWeave ingest worker still busy after %s s; its batch stays queued",
                               self.config.close_timeout)
        if queue is not None:
            queue.close()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def pending_count(self) -> int:
        return 0 if self._queue is None else self._queue.pending_count()

    def wake(self) -> None:
        self.start()
        self._wake.set()

    def mark_rejected(self, chunks: Sequence[KnowledgeChunk], reason: str | None) -> None:
        at = self.memory.clock().isoformat()
        for c in chunks:
            self.memory.backend.kv_put(REJECTED, c.id, {"at": at, "reason": reason}, user_id=c.user_id)
