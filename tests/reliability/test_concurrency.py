"""Concurrency: many threads (embedded store) and many processes (PostgreSQL) adding,
ingesting, searching and giving feedback at once; no errors, and every count reconciles
exactly at the end.

What "reconciles" means, per the lifecycle's rules (clock fixed, so nothing decays):

* every ``add`` is stored once, every ingested event becomes its turn memory once, and
  the queue ends empty with no dead letters;
* a memory's ``metadata["feedback"]`` counts equal the feedback given to it;
* its weight is ``start + 0.5·up − 0.5·down + 0.1·used`` (bounds set out of reach);
* its ``access_count`` is the number of searches that returned it plus its ``used``
  signals (accesses are written in batches; ``flush()`` writes the rest);
* a search scoped to a user never returns another user's memory.

On PostgreSQL the soak's processes rate their own users' memories; rating one memory from
two stores, and an ``update()`` racing a ``feedback()``, are tested deterministically below:
every read-modify-write of a record (feedback, access counts, ``update()``) goes through the
backend's ``modify``, which holds the records (the lifecycle lock in one process, row locks
on PostgreSQL) from the read to the write, so no signal given meanwhile is lost.

Durations: ``BEEWEAVE_SOAK_SECONDS`` (default 20) for the threads,
``BEEWEAVE_PG_SOAK_SECONDS`` (default 10) for the processes.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.ingest import IngestConfig
from beeweave_core.lifecycle import LifecycleConfig
from beeweave_core.validation import MAX_WEIGHT  # the highest weight a memory may hold
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)
from tests.reliability.rel_support import (
    all_chunks,
    assert_consistent,
    child,
    duplicates,
    env_number,
    pg_problems,
    sentence_for,
)

pytestmark = pytest.mark.slow

SOAK_SECONDS = env_number("BEEWEAVE_SOAK_SECONDS", 20)
PG_SOAK_SECONDS = env_number("BEEWEAVE_PG_SOAK_SECONDS", 10)
PG_WORKERS = int(env_number("BEEWEAVE_PG_WORKERS", 3))
FIXED = datetime(2025, 6, 1, tzinfo=timezone.utc)
START_WEIGHT = 1000.0
DELTA = {"up": 0.5, "down": -0.5, "used": 0.1}
USERS = ("u0", "u1", "u2")


class Ledger:
    """What the threads did, kept under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.added: list[str] = []
        self.events: list[str] = []
        self.feedback: dict[str, Counter] = defaultdict(Counter)
        self.hits: Counter = Counter()
        self.ops: Counter = Counter()
        self.errors: list[str] = []


def _adder(m: BeeWeave, t: int, stop: threading.Event, book: Ledger) -> None:
    rnd, n = random.Random(f"add{t}"), 0
    while not stop.is_set():
        batch = [{"content": sentence_for(rnd), "user_id": rnd.choice(USERS), "chunk_id": f"a{t}-{n + i}",
                  "session_id": f"s{rnd.randrange(4)}", "weight": START_WEIGHT, "tags": [rnd.choice(["x", "y"])]}
                 for i in range(rnd.randint(1, 5))]
        m.add_many(batch, show_progress=False)
        n += len(batch)
        with book.lock:
            book.added += [r["chunk_id"] for r in batch]
            book.ops["add"] += len(batch)


def _ingester(m: BeeWeave, t: int, stop: threading.Event, book: Ledger) -> None:
    rnd, n = random.Random(f"ingest{t}"), 0
    while not stop.is_set():
        eid = f"e{t}-{n}"
        m.ingest({"user_id": rnd.choice(USERS), "id": eid, "session_id": f"s{rnd.randrange(4)}",
                  "query": f"question {eid}: {sentence_for(rnd)}?", "response": f"answer {eid}: {sentence_for(rnd)}."})
        n += 1
        with book.lock:
            book.events.append(eid)
            book.ops["ingest"] += 1
        while m.pending_events() > 200 and not stop.is_set():
            time.sleep(0.005)  # an agent's pace: never far ahead of the worker, so flush() ends soon


def _searcher(m: BeeWeave, t: int, stop: threading.Event, book: Ledger) -> None:
    rnd = random.Random(f"search{t}")
    while not stop.is_set():
        user = rnd.choice(USERS)
        hits = m.search(sentence_for(rnd, 2, 5), user_id=user, k=rnd.randint(1, 8),
                        filters={"tags": ["x"]} if rnd.random() < 0.3 else None)
        with book.lock:
            book.ops["search"] += 1
            for h in hits:
                book.hits[h.id] += 1
                if h.chunk.user_id != user:
                    book.errors.append(f"search for {user} returned {h.id} of {h.chunk.user_id}")


def _feedbacker(m: BeeWeave, t: int, stop: threading.Event, book: Ledger) -> None:
    rnd = random.Random(f"feedback{t}")
    while not stop.is_set():
        with book.lock:
            pool = list(book.added[-500:])
        if not pool:
            time.sleep(0.01)
            continue
        cid, signal = rnd.choice(pool), rnd.choice(["used", "up", "down"])
        m.feedback([cid], signal)
        with book.lock:
            book.feedback[cid][signal] += 1
            book.ops["feedback"] += 1


def _guard(fn, *args) -> None:
    book: Ledger = args[-1]
    try:
        fn(*args)
    except Exception as exc:
        with book.lock:
            book.errors.append(f"{fn.__name__}: {type(exc).__name__}: {exc}")


def _expected_weight(counts: Counter) -> float:
    return START_WEIGHT + sum(DELTA[s] * n for s, n in counts.items())


def test_eight_threads_on_the_embedded_store(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    m = BeeWeave(db, embedder=HashingEmbedder(32), clock=lambda: FIXED, ingest=IngestConfig(),
                 lifecycle=LifecycleConfig(max_weight=MAX_WEIGHT, min_weight=0.0, access_flush_interval=0.5))
    book, stop = Ledger(), threading.Event()
    roles = [_adder, _adder, _ingester, _ingester, _searcher, _searcher, _feedbacker, _feedbacker]
    threads = [threading.Thread(target=_guard, args=(fn, m, i, stop, book)) for i, fn in enumerate(roles)]
    try:
        for th in threads:
            th.start()
        time.sleep(SOAK_SECONDS)
        stop.set()
        for th in threads:
            th.join(120)
        assert not any(th.is_alive() for th in threads)
        assert book.errors == []
        assert m.flush(120)  # every queued event processed, pending accesses written
        print(f"\n{len(threads)} threads, {SOAK_SECONDS:.0f} s: {dict(book.ops)}")

        chunks = all_chunks(m.backend)
        assert duplicates(book.added) == [] and set(book.added) <= set(chunks)
        turn_ids = [cid for cid in chunks if cid.endswith(":0") and not cid.startswith("pattern:")]
        assert sorted(cid.rpartition("@")[0] for cid in turn_ids) == sorted(book.events)  # <event>@<user>:0
        assert m.pending_events() == 0 and m.dead_letters() == []
        assert m.count() == len([c for c in chunks.values() if c.status.value == "active"])
        for cid in book.added:
            c, fb = chunks[cid], book.feedback.get(cid, Counter())
            got = {k: v for k, v in c.metadata.get("feedback", {}).items() if k in DELTA and v}
            assert got == {k: v for k, v in fb.items() if v}, cid
            assert c.weight == pytest.approx(_expected_weight(fb), rel=1e-12, abs=1e-9), cid
            assert c.access_count == book.hits[cid] + fb["used"], cid
        for cid in turn_ids:
            assert chunks[cid].access_count == book.hits[cid], cid
        assert_consistent(m, probes=20)
    finally:
        stop.set()
        m.close()


@contextmanager
def while_held(backend, action) -> Iterator[None]:
    """Run ``action`` on another thread the first time ``backend.modify`` has read its records
    and not yet written them, i.e. inside the read-modify-write, and let the write go on after
    ``action`` ends or a second has passed (a store that holds the records makes it wait)."""
    original = backend.modify
    started: list[threading.Thread] = []

    def modify(ids, change):
        def hooked(current):
            if not started:
                th = threading.Thread(target=action)
                started.append(th)
                th.start()
                th.join(1.0)
            return change(current)

        return original(ids, hooked)

    backend.modify = modify
    try:
        yield
    finally:
        del backend.modify  # the bound method again
        for th in started:
            th.join(30)
    assert started, "modify was never called"


@pytest.mark.parametrize("changes", [{"tags": ["ops"]}, {"content": "the deploy moved to the nomad cluster"}],
                         ids=["attributes", "text"])
def test_feedback_given_while_update_runs_is_kept(changes) -> None:
    m = BeeWeave(embedder=HashingEmbedder(32))
    try:
        cid = m.add("the deploy runs on the kubernetes cluster", user_id="u")
        with while_held(m.backend, lambda: m.feedback(cid, "up")):
            m.update(cid, **changes)
        c = m.get(cid)
        assert c.metadata.get("feedback", {}).get("up") == 1 and c.weight == 1.5
        assert c.tags == changes.get("tags", []) and c.raw_content == changes.get("content", c.raw_content)
        if "content" in changes:
            assert [h.id for h in m.search("nomad", user_id="u")] == [cid]
        assert m.verify().ok
    finally:
        m.close()


def test_many_threads_updating_and_rating_one_memory_raise_nothing() -> None:
    """Updates, feedback and searches on one memory at once: nothing fails, nothing is lost."""
    m = BeeWeave(embedder=HashingEmbedder(32))
    errors: list[BaseException] = []
    hits: Counter = Counter()
    try:
        cid = m.add("the deploy runs on the kubernetes cluster", user_id="u")

        def run(fn) -> None:
            try:
                for i in range(100):
                    fn(i)
            except BaseException as exc:
                errors.append(exc)

        jobs = [lambda i: m.feedback(cid, "used"), lambda i: m.update(cid, tags=[f"t{i % 7}"]),
                lambda i: hits.update(h.id for h in m.search("kubernetes deploy", user_id="u")),
                lambda i: m.feedback(cid, "up")]
        threads = [threading.Thread(target=run, args=(fn,)) for fn in jobs]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert errors == []
        m.flush()
        c = m.get(cid)
        assert m.verify().ok and c.tags[0].startswith("t")
        assert (c.metadata["feedback"]["used"], c.metadata["feedback"]["up"]) == (100, 100)
        assert c.access_count == hits[cid] + 100
    finally:
        m.close()


def _run_pg_workers(url: str, tenant: str) -> list[dict]:
    procs = [child("pg_load_worker.py", json.dumps({"url": url, "tenant": tenant, "worker": w,
                                                    "seconds": PG_SOAK_SECONDS}))
             for w in range(PG_WORKERS)]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=PG_SOAK_SECONDS + 180)
        assert p.returncode == 0, stderr[-3000:]
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def _pg_setup(url: str) -> tuple[str, list[str]]:
    tenant = new_tenant("load")
    rnd = random.Random(3)
    with BeeWeave.from_url(url, tenant=tenant, embedder=HashingEmbedder(32), clock=lambda: FIXED) as m:
        shared = m.add_many([{"content": sentence_for(rnd), "user_id": USERS[i % 3], "chunk_id": f"shared-{i}",
                              "weight": START_WEIGHT} for i in range(8)], show_progress=False)
    return tenant, shared


def _pg_check(url: str, tenant: str, shared: list[str], results: list[dict]) -> None:
    for r in results:
        assert r["errors"] == []
    added = [cid for r in results for cid in r["added"]]
    assert duplicates(added) == []
    feedback: dict[str, Counter] = defaultdict(Counter)
    hits: Counter = Counter()
    for r in results:
        hits.update(r["hits"])
        for cid, counts in r["feedback"].items():
            feedback[cid].update(counts)
    with BeeWeave.from_url(url, tenant=tenant, embedder=HashingEmbedder(32), clock=lambda: FIXED) as m:
        chunks = all_chunks(m.backend)
        assert set(chunks) == set(added) | set(shared)
        assert m.count() == len(chunks)
        for cid in added:
            c, fb = chunks[cid], feedback.get(cid, Counter())
            assert {k: v for k, v in c.metadata.get("feedback", {}).items() if k in DELTA and v} == dict(fb), cid
            assert c.weight == pytest.approx(_expected_weight(fb), rel=1e-12, abs=1e-9), cid
            assert c.access_count == hits[cid] + fb["used"], cid
    assert pg_problems(url, tenant) == []


def test_processes_on_postgresql_reconcile_their_own_memories(pg_url) -> None:  # noqa: F811
    tenant, shared = _pg_setup(pg_url)
    results = _run_pg_workers(pg_url, tenant)
    ops = Counter()
    for r in results:
        ops.update(r["ops"])
    print(f"\n{PG_WORKERS} processes, {PG_SOAK_SECONDS:.0f} s on PostgreSQL: {dict(ops)}")
    assert ops["add"] and ops["search"] and ops["feedback"]
    _pg_check(pg_url, tenant, shared, results)


def test_two_processes_rating_one_memory_on_postgresql_lose_nothing(pg_url) -> None:  # noqa: F811
    tenant, shared = _pg_setup(pg_url)
    cid = shared[0]
    kw = dict(tenant=tenant, embedder=HashingEmbedder(32), clock=lambda: FIXED)
    with BeeWeave.from_url(pg_url, **kw) as a, BeeWeave.from_url(pg_url, **kw) as b:  # two stores: two processes
        with while_held(a.backend, lambda: b.feedback(cid, "up")):
            a.feedback(cid, "used")
        fb = a.get(cid).metadata.get("feedback", {})
        assert (fb.get("used"), fb.get("up")) == (1, 1)
        with while_held(b.backend, lambda: a.feedback(cid, "down")):
            b.update(cid, tags=["ops"])
        c = a.get(cid)
        assert c.tags == ["ops"] and c.metadata["feedback"]["down"] == 1 and c.access_count == 1
