"""The moving parts of ingestion: the queue, the bound, and the background worker.

``ingest()`` inserts the event into the queue (:mod:`.queue`: a table of the store's own
file, or the PostgreSQL store's own queue) and returns once it is committed; the worker
takes batches from the queue and processes them.

Exactly once: an event stays ``pending`` in the queue until its memories are stored;
their ids derive from the event id, so if the process dies between storing and
``done``, the next worker finds the ids already stored, skips them, and only then marks
the event done. Pattern sightings carry the event id, so they are not counted twice
either.

An event's own rating (``KnowledgeEvent.feedback``: > 0 ``up``, < 0 ``down``) acts on the
memories it stored through the lifecycle's ``feedback``, as the same signal given to
``feedback()`` would, once per memory: each memory carries the rating it was stored with
(``metadata["ingest"]["feedback"]``) and is marked ``metadata["ingest"]["rated"]`` in the write
that rates it, so a retried batch or the same event sent again rates nothing twice (and a
rating sent only with a repeated event id is not applied: the event is not processed again).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from ..errors import DuplicateIdError, EmbedderChangedError, ModelLoadError, StoreClosedError, StoreUnavailableError
from ..ids import event_key, legacy_event_memory_id
from ..lifecycle.config import FeedbackSignal
from ..lifecycle.timeline import stated_fact
from ..records import KnowledgeChunk
from ..store.base import StoreBackend
from .config import IngestConfig, PatternScope, QueueFullPolicy
from .errors import QueueFullError
from .patterns import NAMESPACE, HotPattern, PatternTracker
from .pipeline import Pipeline, Prepared
from .queue import DeadRow, EventQueue, QueuedEvent, SQLiteEventQueue, StoredEvent, UserEvents, holds_events

__all__ = ["IngestRuntime", "REJECTED"]

logger = logging.getLogger(__name__)

REJECTED = "ingest.rejected"  # kv: ids of rejected memories, never stored again -> {"at", "reason", "user_id"}
_SWEEP_EVERY = timedelta(hours=1)
SHARED_NAMESPACE = NAMESPACE + ".shared"  # the shared pattern tracker's keys
# Failures that are not the events' fault: the batch stays pending and is retried with backoff
# (a store that is down, an embedding model that could not be loaded yet) instead of dead-lettering.
# A store another process moved to another model is one too: this worker's vectors would be the
# old model's, so it stores nothing, and the events wait for a BeeWeave opened on the new model
# (this one, reopened, or another process's worker).
_TRANSIENT = (StoreUnavailableError, ModelLoadError, EmbedderChangedError)
_FIRST_RETRY = 0.5  # seconds before the first retry of a batch the store could not take
_LINGER = 0.05  # seconds a short batch waits for more events when a model extracts (a call is slow: more per batch pays)


class _RetriedFailure:
    """How a failure the worker retries is logged: with its traceback the first time, then one
    line without it at most every ``every`` seconds (the rest at DEBUG), and once when it is over.

    A store that is down (a full disk, a database outage) fails every retry the same way: a
    traceback on each would bury the log. A failure of another exception type logs its
    traceback once too."""

    def __init__(self, what: str, every: float = 60.0) -> None:
        self.what = what
        self.every = every
        self.failures = 0
        self._since = 0.0
        self._said_at = 0.0
        self._kinds: set[type[BaseException]] = set()

    def failed(self, exc: BaseException, retry: str = "retrying shortly") -> None:
        now = time.monotonic()
        if not self.failures:
            self._since = now
        self.failures += 1
        if type(exc) not in self._kinds:
            self._kinds.add(type(exc))
            self._said_at = now
            level = logging.WARNING if isinstance(exc, _TRANSIENT) else logging.ERROR
            logger.log(level, "BeeWeave ingest: %s failed; %s", self.what, retry, exc_info=exc)
        elif now - self._said_at >= self.every:
            self._said_at = now
            logger.warning("BeeWeave ingest: %s still failing (%d times in %.0f s; %s): %s: %s", self.what,
                           self.failures, now - self._since, retry, type(exc).__name__, exc)
        else:
            logger.debug("BeeWeave ingest: %s failed again: %s: %s", self.what, type(exc).__name__, exc)

    def succeeded(self) -> None:
        if self.failures:
            logger.info("BeeWeave ingest: %s works again (after %d failures in %.0f s)", self.what,
                        self.failures, time.monotonic() - self._since)
            self.failures = 0
            self._kinds.clear()


def rating_signal(feedback: Any) -> FeedbackSignal | None:
    """The feedback signal of an event's rating: > 0 ``up``, < 0 ``down``, else none."""
    if isinstance(feedback, bool) or not isinstance(feedback, (int, float)) or not feedback:
        return None
    return FeedbackSignal.UP if feedback > 0 else FeedbackSignal.DOWN


def _mark_rated(signal: FeedbackSignal, chunk: KnowledgeChunk) -> KnowledgeChunk | None:
    """``chunk`` marked as rated by its event, or None when it was rated already or was not
    stored with this rating (its event's rating is the one it was stored with)."""
    info = chunk.metadata.get("ingest")
    if not isinstance(info, dict) or "rated" in info or rating_signal(info.get("feedback")) is not signal:
        return None
    return chunk.copy(metadata={**chunk.metadata, "ingest": {**info, "rated": signal.value}}, relationships=[])


def store_file(backend: StoreBackend) -> Path | None:
    """The file of a file store (its queue is a table in it); None when the store has no file."""
    return backend.capabilities.file


class IngestRuntime:
    """One BeeWeave's queue and worker, writing through an ``IngestSink`` (backend, tokenizer, clock, add_many)."""

    def __init__(self, memory: Any, config: IngestConfig) -> None:
        self.memory = memory
        self.config = config
        self.pipeline = Pipeline(config)
        self.patterns = PatternTracker(memory.backend, memory.tokenizer, config.patterns, memory.clock,
                                       admission=config.admission)
        # Per-user patterns, and beside them everyone's questions counted together: a question
        # several users ask becomes a pattern in the shared scope (see ingest/patterns.py).
        self.shared_patterns = None
        if config.patterns.scope is PatternScope.USER and config.patterns.shared_users:
            self.shared_patterns = PatternTracker(
                memory.backend, memory.tokenizer, replace(config.patterns, scope=PatternScope.GLOBAL), memory.clock,
                admission=config.admission, namespace=SHARED_NAMESPACE)
        self.trackers = [t for t in (self.patterns, self.shared_patterns) if t is not None]
        self._queue: EventQueue | None = None
        self._shared: EventQueue | None = None  # the store's own queue (see _shared_queue)
        self._shared_made = False
        self._lock = threading.Lock()  # queue creation, worker start, close
        self._cond = threading.Condition()  # the bound: callers wait here for room, flush() for an empty queue
        self._wake = threading.Event()
        self._retry_now = threading.Event()  # cuts a wait for an unavailable store short (flush, close)
        self._inflight: set[str] = set()
        # A user's forget and the worker storing a batch take turns: the users forgotten since
        # the batch was taken have their events dropped from it, so a forget that comes while
        # the worker holds their events is not undone by the batch (see forget_events).
        self._store_lock = threading.RLock()
        self._forgotten: set[str] = set()
        # The queue's pending count as last read, plus the events put since: the bound is checked
        # against it, so a put is one statement (each SQLite call releases the GIL, and getting it
        # back from a busy worker is what a caller waits for). Read again after every batch.
        self._estimate = 0
        self._thread: threading.Thread | None = None
        self._stop = False
        self._closed = False
        self._last_sweep: datetime | None = None
        # Retried failures, each logged with a traceback once (see _RetriedFailure).
        self._read_failure = _RetriedFailure("the worker reading the queue")
        self._batch_failure = _RetriedFailure("the worker processing a batch")
        self._pattern_failure = _RetriedFailure("pattern detection")

    # -- the queue --------------------------------------------------------------------------
    def _target(self) -> tuple[Path | None, Path | None, bool]:
        """The file the queue table is in, where the queue's files were before it was a table
        (moved in when it opens), and whether the file was asked for explicitly."""
        if self.config.queue_path is not None:
            explicit = Path(self.config.queue_path)
            return explicit, explicit, True
        path = store_file(self.memory.backend)
        return path, None if path is None else path.with_name(path.name + ".queue"), False

    def open(self) -> None:
        """At start-up: open the queue when it holds events (left by an earlier process, or put by
        another process on the store) and resume them. A store that never ingested gets no
        queue lock file."""
        path, old, explicit = self._target()
        left = path is not None and holds_events(path, old)
        if self.config.queue is not None or explicit or left or self._shared_queue() is not None:
            self.queue()
            # A shared queue's worker runs from the start: other hosts' events arrive there.
            if self.config.autostart and (self._shared is not None or self.pending_count()):
                self.start()

    def _opened(self) -> EventQueue | None:
        """The queue if it is open, or opened now when the store's file holds events (or the
        queue files of an older version) that another process left since this one started.

        The table is every process's: a process that had not ingested yet has no queue open,
        and must not report nothing pending (nor let ``flush()`` return at once) while events
        another process acknowledged, then closed or was killed before storing, wait there."""
        if self._queue is None and not self._closed and self.config.queue is None:
            path, old, _ = self._target()
            if path is not None and holds_events(path, old):
                self.queue()
        return self._queue

    def queue(self) -> EventQueue:
        if self._queue is None:
            with self._lock:
                if self._closed:
                    raise StoreClosedError("the store is closed")
                if self._queue is None:
                    self._queue = self._make_queue()
        return self._queue

    def _shared_queue(self) -> EventQueue | None:
        """The store's own queue, if it has one (PostgreSQL: in its database, shared by every
        host, so it wins over a SQLite queue); it is made once."""
        if not self._shared_made:
            own = self.memory.backend.capabilities.queue
            self._shared = None if own is None else own.ingest_queue()
            self._shared_made = True
        return self._shared

    def _make_queue(self) -> EventQueue:
        if self.config.queue is not None:
            return self.config.queue
        shared = self._shared_queue()
        if shared is not None:
            return shared  # callers write to it directly: a put is committed in the database
        path, old, _ = self._target()
        backend = self.memory.backend
        if path is None and backend.capabilities.durable:
            logger.warning("%s has no file: ingested events are kept in memory until processed (set "
                           "IngestConfig.queue_path to make them durable)", type(backend).__name__)
        return SQLiteEventQueue(path, fsync=self.config.fsync, old_base=old)

    def put(self, text: str) -> None:
        """Queue one validated event (its JSON ``text``) under the bound; durable when it returns.

        The bound is checked without a lock, against the estimate (exact once it is reached):
        concurrent callers, or other processes on the store, may pass it by one event each.
        """
        q = self.queue()
        cfg = self.config
        if self._closed:
            raise StoreClosedError("the store is closed")
        if self._estimate >= cfg.max_pending and self.pending_count() >= cfg.max_pending:
            with self._cond:
                if self.pending_count() >= cfg.max_pending:
                    self._make_room(q)
        body = json.loads(text)
        if q.put(event_key(body["id"], body["user_id"]), body["user_id"], text):
            self._estimate += 1
        if cfg.autostart:
            self.start()
        self._wake.set()

    def _make_room(self, q: EventQueue) -> None:
        """Called holding ``_cond`` with a full queue: apply the full-queue policy."""
        cfg = self.config
        full = (f"the ingest queue holds {self.pending_count()} events (IngestConfig.max_pending="
                f"{cfg.max_pending}); the worker is behind")
        if cfg.when_full is QueueFullPolicy.RAISE:
            raise QueueFullError(full)
        if cfg.when_full is QueueFullPolicy.DROP_OLDEST:
            if q.drop_oldest(set(self._inflight), "dropped: queue full") is not None:
                logger.warning("ingest queue full: the oldest event moved to the dead letters")
            return  # every waiting event is in the worker's hands: go over the bound by at most a batch
        if cfg.autostart:
            self.start()
        if not self._cond.wait_for(lambda: self.pending_count() < cfg.max_pending or self._closed, cfg.full_timeout):
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
        try:
            self._loop(q)
        finally:
            with self._cond:
                self._cond.notify_all()

    def _loop(self, q: EventQueue) -> None:
        delay = 0.0  # > 0 while the store is unavailable: the wait before the next retry
        while not self._stop:
            self._wake.clear()  # before take(): a put after this sets it again, so no wake-up is lost
            with self._store_lock:
                self._forgotten.clear()  # before take(): a forget after it is seen by the batch
            try:
                batch = q.take(self.config.batch_size)
                if 0 < len(batch) < self.config.batch_size and self.pipeline.concurrent:
                    # A burst of events arrives one call at a time: a moment's wait lets them share
                    # the model's concurrency, instead of a first batch of one holding up the rest.
                    time.sleep(_LINGER)
                    batch = q.take(self.config.batch_size)
            except StoreClosedError:
                break
            except Exception as exc:  # e.g. a full disk: the events stay in the queue
                self._read_failure.failed(exc)
                time.sleep(0.5)
                continue
            self._read_failure.succeeded()
            if not batch:
                with self._cond:
                    self._cond.notify_all()
                self._idle(q)
                # A shared queue is polled: other hosts put events there, and a dead
                # worker's lease runs out there.
                self._wake.wait(getattr(q, "poll_interval", None))
                continue
            try:
                self._process(q, batch)
                if not self.pending_count():
                    q.checkpoint()  # before flush() returns: the queue's WAL no longer holds the raw events
                if delay:
                    logger.info("BeeWeave ingest worker: the store is back; the queued events are being stored")
                delay = 0.0
                self._batch_failure.succeeded()
            except StoreClosedError:
                break
            except _TRANSIENT as exc:
                # Not the events' fault: they stay pending and are retried until the store is back.
                self._postpone(q, batch, exc, first=not delay)
                delay = min(max(2 * delay, _FIRST_RETRY), max(self.config.retry_max_delay, _FIRST_RETRY))
            except Exception as exc:  # a bug here must not kill the worker: the batch stays pending
                self._batch_failure.failed(exc)
                time.sleep(0.5)
            finally:
                with self._cond:
                    self._inflight.clear()
                    self._cond.notify_all()
            if delay and not self._stop:
                self._retry_now.wait(delay)
                self._retry_now.clear()

    def _postpone(self, q: EventQueue, batch: list[QueuedEvent], exc: Exception, *, first: bool) -> None:
        error = f"{type(exc).__name__}: {exc}"
        if first and isinstance(exc, EmbedderChangedError):
            logger.warning("BeeWeave ingest worker: the store moved to another embedding model (%s); %d queued "
                           "events stay pending until a BeeWeave opened on it stores them: open the store again",
                           error, self.pending_count())
        elif first:
            logger.warning("BeeWeave ingest worker: the store is unavailable (%s); %d queued events stay pending "
                           "and are retried until it is back", error, self.pending_count())
        postpone = getattr(q, "postpone", None)
        if postpone is not None:
            try:
                postpone([e.id for e in batch], error[:2000])
            except StoreClosedError:
                pass
            except Exception:  # counting attempts is a nicety; the events are pending either way
                logger.debug("BeeWeave ingest worker: could not count the attempt", exc_info=True)

    def _idle(self, q: EventQueue) -> None:
        q.checkpoint()
        now = self.memory.clock()
        if self._last_sweep is None or now - self._last_sweep >= _SWEEP_EVERY:
            self._last_sweep = now
            try:
                for tracker in self.trackers:
                    tracker.sweep()
            except StoreClosedError:
                pass
            except Exception:
                logger.exception("BeeWeave ingest worker: sweeping old pattern counts failed")

    def _process(self, q: EventQueue, batch: list[QueuedEvent]) -> None:
        with self._cond:
            self._inflight = {e.id for e in batch}
        # A model extractor prepares the batch's events side by side, and the first ones are
        # stored (in queue order, each group done once stored) while the model still reads the
        # rest; with the offline extractor the batch is one group, one embedding call.
        step = self.config.max_concurrency if self.pipeline.concurrent else len(batch)
        prepared = self.pipeline.prepare_many([qe.body for qe in batch])
        try:
            pairs = zip(batch, prepared)
            while group := list(itertools.islice(pairs, step)):
                self._finish(q, group)
        finally:
            prepared.close()  # a failed group: the model calls not started yet are cancelled

    def _finish(self, q: EventQueue, group: list[tuple[QueuedEvent, tuple[dict[str, Any], Prepared | Exception]]]) -> None:
        """Store the memories of a group of prepared events, apply their ratings, facts and
        pattern sightings, and mark them done; a failing event goes to the dead letters alone."""
        ready: list[tuple[QueuedEvent, Prepared]] = []
        for qe, (body, got) in group:
            if isinstance(got, Exception):
                self._fail(q, qe, got, body)
            else:
                ready.append((qe, got))
        with self._store_lock:
            gone = [qe.id for qe, p in ready if p.event.user_id in self._forgotten]
            if gone:  # their user was forgotten since the batch was taken: nothing of them is stored
                ready = [(qe, p) for qe, p in ready if qe.id not in gone]
                q.done(gone)
            self._store(q, ready)

    def _store(self, q: EventQueue, ready: list[tuple[QueuedEvent, Prepared]]) -> None:
        try:
            self.store_new([c for _, p in ready for c in p.chunks])
        except (StoreClosedError, *_TRANSIENT):
            raise  # the whole batch stays pending
        except Exception:
            # One bad event must not sink the batch: store event by event to find it.
            kept = []
            for qe, p in ready:
                try:
                    self.store_new(p.chunks)
                    kept.append((qe, p))
                except (StoreClosedError, *_TRANSIENT):
                    raise  # those stored so far are skipped when the batch is retried
                except Exception as exc:
                    self._fail(q, qe, exc, p.event.to_dict())
            ready = kept
        for _, p in ready:
            self._rate(p)
        self._reconcile([c for _, p in ready for c in p.chunks])
        for _, p in ready:
            if p.sighting is not None:
                try:
                    for tracker in self.trackers:
                        det = tracker.observe(p.sighting)
                        if det is not None:
                            tracker.publish(self.memory, det, agent_id=p.event.agent_id)
                    self._pattern_failure.succeeded()
                except StoreClosedError:
                    raise
                except Exception as exc:  # the memories are stored; a pattern problem is not the event's failure
                    self._pattern_failure.failed(exc, f"event {p.event.id} is not counted")
        q.done([qe.id for qe, _ in ready])

    def _rate(self, p: Prepared) -> None:
        """Apply the event's own rating to the memories it stored (once each: see the module)."""
        signal = rating_signal(p.event.feedback)
        rate = getattr(self.memory, "feedback", None)
        if signal is None or rate is None or not p.chunks:
            return
        try:
            rate([c.id for c in p.chunks], signal, once=partial(_mark_rated, signal))
        except (StoreClosedError, *_TRANSIENT):
            raise  # the batch stays pending; the memories rated so far are marked
        except Exception:  # the memories are stored; a rating problem is not the event's failure
            logger.exception("BeeWeave ingest: applying the rating of event %s failed", p.event.id)

    def _reconcile(self, chunks: list[KnowledgeChunk]) -> None:
        """Put the facts the batch's memories state on their timelines (a new value supersedes
        the old). Before ``done``: a retried batch reconciles again, and that adds nothing twice."""
        reconcile = getattr(self.memory, "reconcile", None)
        stated = [c for c in chunks if stated_fact(c.metadata) is not None]
        if reconcile is None or not stated:
            return
        try:
            reconcile(self.memory.get_many([c.id for c in stated]))  # as stored (admission may hold one back)
        except (StoreClosedError, *_TRANSIENT):
            raise
        except Exception:  # the memories are stored; a timeline problem is not the events' failure
            logger.exception("BeeWeave ingest: reconciling the facts of %d memories failed", len(stated))

    def store_new(self, chunks: list[KnowledgeChunk], *, batch_size: int | None = None,
                  show_progress: bool = False) -> None:
        """Store the chunks not stored yet (e.g. before a crash: exactly once) and never rejected."""
        if not chunks:
            return
        backend = self.memory.backend
        skip = backend.contains([c.id for c in chunks]) | self._stored_before_user_ids(chunks)
        if skip:
            # A stored id is this event's memory stored before a crash, or the memory of another
            # user's event that reused the id: that one must fail (dead letter), not vanish.
            stored = backend.get(list(skip))
            for c in chunks:
                other = stored.get(c.id)
                if other is not None and other.user_id != c.user_id:
                    raise DuplicateIdError(f"the memory id {c.id!r} belongs to another user: an event id "
                                           "is one event, give this one its own id")
        new = [c for c in chunks if c.id not in skip and backend.kv_get(REJECTED, c.id) is None]
        if new:
            self.memory.add_many(new, show_progress=show_progress, batch_size=batch_size or len(new))

    def _stored_before_user_ids(self, chunks: list[KnowledgeChunk]) -> set[str]:
        """The ids of ``chunks`` whose memory a store written before ids carried the user holds
        under the old id (``<event id>:<n>``) for the same user: an event queued or retried
        across the upgrade is stored once. Several users' events of one id share the old id."""
        old: dict[str, list[KnowledgeChunk]] = {}
        for c in chunks:
            event_id = (c.metadata.get("ingest") or {}).get("event_id")
            n = c.id.rpartition(":")[2]
            if isinstance(event_id, str) and n.isascii() and n.isdigit():
                old.setdefault(legacy_event_memory_id(event_id, int(n)), []).append(c)
        if not old:
            return set()
        held = self.memory.backend.get(sorted(old))  # ids not stored are simply absent
        return {c.id for i, h in held.items() for c in old[i] if h.user_id == c.user_id}

    def _fail(self, q: EventQueue, qe: QueuedEvent, exc: Exception, body: dict[str, Any]) -> None:
        error = f"{type(exc).__name__}: {exc}"
        logger.warning("BeeWeave ingest: event %s failed and went to the dead letters: %s", qe.id, error)
        q.fail(qe.id, error[:2000], body=json.dumps(body, ensure_ascii=False, default=str))

    # -- waiting and stopping --------------------------------------------------------------------
    def flush(self, timeout: float | None) -> bool:
        q = self._opened()
        if q is None:
            return True
        if threading.current_thread() is self._thread:
            return self.pending_count() == 0  # a subscriber on the worker thread cannot wait for itself
        if self.pending_count():
            self.start()
            self._wake.set()
            self._retry_now.set()
        thread = self._thread

        def drained() -> bool:
            return self.pending_count() == 0 or self._closed or thread is None or not thread.is_alive()

        with self._cond:
            self._cond.wait_for(drained, timeout)
        return self.pending_count() == 0

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            queue, thread = self._queue, self._thread
        if queue is not None and not queue.durable and self.pending_count():
            # A queue in memory would lose what is left: process it first.
            if not self.flush(self.config.close_timeout):
                logger.warning("BeeWeave closed with %d ingested events unprocessed (the queue was in memory)",
                               self.pending_count())
        with self._cond:
            self._closed = True
            self._stop = True
            self._cond.notify_all()
        self._wake.set()
        self._retry_now.set()
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

    def forget_user(self, user_id: str) -> None:
        """A user's forget: their questions leave the shared pattern counts too."""
        for tracker in self.trackers:
            tracker.forget(user_id)

    # -- a user's events (export, import, forget) --------------------------------------------------
    def _existing_queue(self) -> EventQueue | None:
        """``_opened``'s queue, or the queue named for the store (a caller's, an explicit
        path, the PostgreSQL store's table) that may hold events; a store that never ingested
        gets none made (no lock file)."""
        q = self._opened()
        if q is None:
            _, _, explicit = self._target()
            if self.config.queue is not None or explicit or self._shared_queue() is not None:
                return self.queue()
        return q

    def events_of(self, user_id: str) -> list[StoredEvent]:
        """The user's pending and dead events, oldest first."""
        q = self._existing_queue()
        if q is None:
            return []
        if isinstance(q, UserEvents):
            return q.of_user(user_id)
        logger.warning("%s cannot list a user's pending events: only the dead letters are exported",
                       type(q).__name__)
        return [StoredEvent(r.id, r.user_id, json.dumps(r.body, ensure_ascii=False, default=str), "dead", r.attempts,
                            r.error, r.failed_at, r.failed_at) for r in q.dead() if r.user_id == user_id]

    def queue_users(self) -> list[str]:
        """The users the queue holds events of, pending or dead."""
        q = self._existing_queue()
        if q is None:
            return []
        if isinstance(q, UserEvents):
            return q.users()
        return sorted({r.user_id for r in q.dead()})

    def restore_events(self, events: Sequence[StoredEvent]) -> int:
        """Put a user's exported events back (pending ones are processed once, by the worker);
        an event the queue holds already is left as it is. Return how many were new."""
        if not events:
            return 0
        q = self.queue()
        if isinstance(q, UserEvents):
            n = q.restore(events)
        else:  # a queue of the caller's: pending, then dead by failing them
            n = 0
            for e in events:
                if q.put(e.id, e.user_id, e.body):
                    n += 1
                    if e.state == "dead":
                        q.fail(e.id, e.error or "", body=None)
        if any(e.state == "pending" for e in events):
            self.pending_count()
            if self.config.autostart:
                self.start()
            self._wake.set()
        return n

    def forget_events(self, user_id: str) -> int:
        """Delete the user's events from the queue, pending and dead (part of a user's forget,
        before their memories go): none of them brings the user back. This process's worker
        drops the user's events from the batch it holds, or, storing it now, finishes first
        (and the forget then deletes what it stored). A worker of another process stores a
        batch it took before the forget (``MemoryService.forget_user`` processes the queue
        first)."""
        q = self._existing_queue()
        if q is None:
            return 0
        with self._store_lock:
            self._forgotten.add(user_id)
            if isinstance(q, UserEvents):
                return q.forget_user(user_id)
        logger.warning("%s cannot delete a user's pending events: only their dead letters are deleted",
                       type(q).__name__)
        return self.discard_of(user_id)

    def hot_patterns(self, user_id: str | None) -> list[HotPattern]:
        """The hot patterns of ``user_id`` (every user's when None) and the shared ones,
        which every user sees."""
        found = self.patterns.hot(user_id)
        if self.shared_patterns is not None:
            found += self.shared_patterns.hot(None)
        return found

    def pending_count(self) -> int:
        """Events waiting in the queue (every process's, on a shared store)."""
        q = self._opened()
        self._estimate = 0 if q is None else q.pending_count()
        return self._estimate

    def wake(self) -> None:
        self.start()
        self._wake.set()

    # -- dead letters ----------------------------------------------------------------------------
    def dead(self, limit: int | None) -> list[DeadRow]:
        q = self._opened()
        return [] if q is None else q.dead(limit)

    def revive(self, ids: Sequence[str] | None) -> int:
        keys = None if ids is None else self._keys(ids)
        q = self._opened()
        n = 0 if q is None or keys == [] else q.revive(keys)
        if n:
            self.wake()
        return n

    def discard(self, ids: Sequence[str]) -> int:
        keys = self._keys(ids)
        return self._queue.discard(keys) if self._queue is not None and keys else 0

    def discard_of(self, user_id: str | None) -> int:
        """Delete the dead events of ``user_id`` (every user's when None); not another user's
        event of the same id."""
        q = self._opened()
        if q is None:
            return 0
        keys = [r.id for r in q.dead() if user_id is None or r.user_id == user_id]
        return q.discard(keys) if keys else 0

    def _keys(self, ids: Sequence[str]) -> list[str]:
        """The queue keys of dead events named by event id (``<event id>@<user>``, or the bare id
        of an event queued before keys carried the user) or by key."""
        q = self._opened()
        if q is None:
            return []
        wanted = set(ids)
        return [r.id for r in q.dead() if r.id in wanted or r.body.get("id") in wanted]

    def mark_rejected(self, chunks: Sequence[KnowledgeChunk], reason: str | None) -> None:
        at = self.memory.clock().isoformat()
        for c in chunks:
            self.memory.backend.kv_put(REJECTED, c.id, {"at": at, "reason": reason, "user_id": c.user_id},
                                       user_id=c.user_id)

    def unmark_rejected(self, ids: Sequence[str]) -> None:
        for cid in ids:
            self.memory.backend.kv_delete(REJECTED, cid)
