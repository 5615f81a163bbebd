"""An optimistic local-index search (``LocalIndex.retrieve(optimistic=True)``, what the engine
asks): when the last search found the index current and the store has not written since,
the search ranks first and checks the change log in the statement that reads its records.
One statement per search then; a write by another store, before the search or between its
ranking and its records, is never missed: the search ranks again."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.errors import InvalidInputError
from beeweave_core.store.base import StaleCandidates
from beeweave_core.store.postgres import local as pg_local
from beeweave_core.store.postgres import store as pg_store
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)

pytestmark = pytest.mark.slow


@contextmanager
def _two(url: str) -> Iterator[tuple[BeeWeave, BeeWeave]]:
    """A memory searching through its local index and another writing the same tenant."""
    tenant = new_tenant()
    reader = BeeWeave.from_url(url, embedder=HashingEmbedder(64), tenant=tenant)
    writer = BeeWeave.from_url(url, embedder=HashingEmbedder(64), tenant=tenant)
    try:
        yield reader, writer
    finally:
        reader.close()
        writer.close()


@pytest.fixture
def statements(monkeypatch) -> list[str]:
    """The statements every connection of this process runs, from now on."""
    seen: list[str] = []
    plain = psycopg.Connection.execute

    def execute(self, query, *args, **kw):
        seen.append(str(query))
        return plain(self, query, *args, **kw)

    monkeypatch.setattr(psycopg.Connection, "execute", execute)
    return seen


def _filler(memory: BeeWeave) -> None:
    memory.add_many([{"content": f"note {i} about the garden and the weather", "user_id": "u",
                      "metadata": {"project": f"p{i % 2}"}} for i in range(30)], link=False)


def _trusted(reader: BeeWeave, **kw) -> list:
    """Two searches: the first builds the index, the second finds it current (``trusted``)."""
    reader.search("garden weather", user_id="u", k=3, **kw)
    hits = reader.search("garden weather", user_id="u", k=3, **kw)
    assert reader.backend.local.trusted
    return hits


def test_a_search_with_nothing_new_is_one_statement(pg_url, statements) -> None:  # noqa: F811
    # (with the query's vector given: otherwise the engine first counts the store's records,
    # so as not to embed a query for an empty store)
    with _two(pg_url) as (reader, writer):
        _filler(writer)
        vec = HashingEmbedder(64).embed_query("garden weather")
        first = _trusted(reader, query_embedding=vec)
        statements.clear()
        again = reader.search("garden weather", user_id="u", k=3, query_embedding=vec)
        assert [h.id for h in again] == [h.id for h in first]
        assert len(statements) == 1 and "changes" in statements[0], statements
        # Its own write, taken into the index from memory: the add checks nothing first and the
        # next search is one statement again.
        statements.clear()
        reader.add("the garden shed was painted blue", user_id="u")
        assert statements[0] == "BEGIN" and statements.count("BEGIN") == 1, statements  # one transaction
        statements.clear()
        shed = HashingEmbedder(64).embed_query("garden shed painted")
        assert reader.search("garden shed painted", user_id="u", k=1,
                             query_embedding=shed)[0].chunk.content.startswith("the garden shed")
        assert len(statements) == 1, statements
        writer.add("the garden gate was painted green", user_id="u")  # another store's: checked
        statements.clear()
        assert reader.search("garden gate painted", user_id="u", k=1,
                             query_embedding=HashingEmbedder(64).embed_query("garden gate painted")
                             )[0].chunk.content.startswith("the garden gate")
        assert len(statements) > 1


def test_another_stores_write_before_the_search_is_seen(pg_url) -> None:  # noqa: F811
    with _two(pg_url) as (reader, writer):
        _filler(writer)
        _trusted(reader)
        new = writer.add("a heron visited the pond this morning", user_id="u")
        assert reader.search("heron pond morning", user_id="u", k=1)[0].id == new
        gone = reader.search("heron pond", user_id="u", k=5)
        writer.delete(new)
        assert new in {h.id for h in gone} and new not in {h.id for h in reader.search("heron pond", user_id="u", k=5)}


def test_a_write_between_the_ranking_and_the_records_is_seen(pg_url, monkeypatch) -> None:  # noqa: F811
    with _two(pg_url) as (reader, writer):
        _filler(writer)
        _trusted(reader)
        written: list[str] = []
        plain = pg_local.records_with_rivals

        def late(store, ids, *, seen=None, **kw):
            if not written:  # once: after this search ranked, before its records are read
                written.append(writer.add("a heron visited the pond this morning", user_id="u"))
            return plain(store, ids, seen=seen, **kw)

        monkeypatch.setattr(pg_local, "records_with_rivals", late)
        hits = reader.search("heron pond morning", user_id="u", k=1)
        assert written and hits[0].id == written[0]


def test_a_stale_search_tries_again_once_and_checks_first(pg_url, monkeypatch) -> None:  # noqa: F811
    """Even when another thread's check marks the index current again before the retry, and
    another host writes before every check, a search goes stale at most once."""
    with _two(pg_url) as (reader, writer):
        _filler(writer)
        _trusted(reader)
        stale: list[int] = []
        plain = pg_local.LocalIndex._records

        def racing(self, ids, hoped, meanwhile):
            if hoped is None or len(stale) > 5:
                return plain(self, ids, hoped, meanwhile)
            writer.add(f"a heron visited the pond, visit {len(stale)}", user_id="u")
            try:
                return plain(self, ids, hoped, meanwhile)
            except StaleCandidates:
                stale.append(1)
                self.trusted = True  # as if another thread's search had just found it current
                raise

        monkeypatch.setattr(pg_local.LocalIndex, "_records", racing)
        hits = reader.search("heron pond visit", user_id="u", k=3)
        assert len(stale) == 1 and hits and "heron" in hits[0].chunk.content


def test_searches_after_every_foreign_write_check_first(pg_url, statements) -> None:  # noqa: F811
    """A check that found the index behind is not trusted: the next search checks first
    rather than ranking twice."""
    with _two(pg_url) as (reader, writer):
        _filler(writer)
        vec = HashingEmbedder(64).embed_query("garden weather")
        reader.search("garden weather", user_id="u", k=3, query_embedding=vec)
        for i in range(3):
            writer.add(f"note {i} on the weather", user_id="u")
            statements.clear()
            reader.search("garden weather", user_id="u", k=3, query_embedding=vec)
            assert sum("@" not in s and "f.high" in s for s in statements) == 0, statements


# -- a write between the ranking and the check, across the engine's kinds of search ---------
# (from a review of the change: each search must see the write)


def _late(monkeypatch, action):
    """Run ``action`` once, after the next optimistic ranking and before its check; count stales."""
    done: list[object] = []
    stale = [0]
    plain = pg_local.records_with_rivals

    def late(store, ids, *, seen=None, **kw):
        if seen is not None and not done:
            done.append(action())
        try:
            return plain(store, ids, seen=seen, **kw)
        except StaleCandidates:
            stale[0] += 1
            raise

    monkeypatch.setattr(pg_local, "records_with_rivals", late)
    return done, stale


def test_no_candidates(pg_url, monkeypatch) -> None:  # noqa: F811
    with _two(pg_url) as (reader, writer):
        _filler(writer)
        _trusted(reader)
        done, stale = _late(monkeypatch, lambda: writer.add("a heron by the pond", user_id="newcomer"))
        hits = reader.search("heron pond", user_id="newcomer", k=3, query_embedding=HashingEmbedder(64).embed_query("heron pond"))
        assert stale[0] == 1 and [h.id for h in hits] == done


def test_multi_question_loosen_time_phrase(pg_url, monkeypatch) -> None:  # noqa: F811
    with _two(pg_url) as (reader, writer):
        _filler(writer)
        for query, kw in (("where is the heron? what about the pond?", {}),
                          ("heron pond", {"loosen": True, "filters": {"tags": ["nothing"]}}),
                          ("last week heron pond", {})):
            _trusted(reader)
            done, stale = _late(monkeypatch, lambda: writer.add("a heron by the pond", user_id="u"))
            hits = reader.search(query, user_id="u", k=3, **kw)
            assert stale[0] >= 1 and done[0] in {h.id for h in hits}, query
            writer.delete(done[0])


def test_declared_field_filter(pg_url, monkeypatch) -> None:  # noqa: F811
    with _two(pg_url) as (reader, writer):
        _filler(writer)
        writer.declare_fields({"project": "str"})
        _trusted(reader, filters={"project": "p1"})
        done, stale = _late(monkeypatch, lambda: writer.add("a heron by the pond", user_id="u",
                                                             metadata={"project": "p1"}))
        hits = reader.search("heron pond", user_id="u", k=3, filters={"project": "p1"})
        assert stale[0] == 1 and done[0] == hits[0].id


@pytest.mark.parametrize("how", ["forget", "prune"])
def test_rebuild_between_ranking_and_check(pg_url, monkeypatch, how) -> None:  # noqa: F811
    with _two(pg_url) as (reader, writer):
        _filler(writer)
        gone = writer.add("a heron by the pond, soon forgotten", user_id="v")
        _trusted(reader)
        loads = reader.backend.local.loads

        def act():
            if how == "forget":
                writer.backend.delete_user("v")
            else:
                monkeypatch.setattr(pg_store, "CHANGES_KEEP", 1)
                monkeypatch.setattr(pg_store, "CHANGES_PRUNE_EVERY", 0.5)
                writer.add_many([{"content": f"pruning {i}", "user_id": "x"} for i in range(3)], link=False)
                writer.delete(gone)
            reader.backend.local.refresh()  # and another thread of the reader catches up meanwhile
            return True

        done, stale = _late(monkeypatch, act)
        hits = reader.search("heron pond", user_id="v", k=3, query_embedding=HashingEmbedder(64).embed_query("heron pond"))
        assert done and stale[0] == 1 and hits == [] and reader.backend.local.loads > loads


def test_threads_searching_a_small_pool_while_another_store_writes(pg_url) -> None:  # noqa: F811
    """Searches in six threads share two pooled connections while another store writes, so
    some check first (holding the index lock, waiting for a connection) while others read
    their records (holding a connection, scoring relevance under the lock): every search
    ends well inside the pool's timeout, none fails, and each sees what was written before it."""
    import threading
    import time

    tenant = new_tenant()
    emb = HashingEmbedder(64)
    reader = BeeWeave(backend=pg_store.PostgresStore(pg_url, tenant=tenant, pool_size=2,
                                                     timeout=10), embedder=emb)
    writer = BeeWeave.from_url(pg_url, embedder=emb, tenant=tenant)
    errors: list[BaseException] = []
    slowest: list[float] = []
    try:
        _filler(writer)
        reader.search("garden weather", user_id="u", k=3)

        def search(n: int) -> None:
            try:
                for i in range(12):
                    start = time.perf_counter()
                    hits = reader.search(f"garden weather note {n} {i}", user_id="u", k=5)
                    slowest.append(time.perf_counter() - start)
                    assert hits and all(h.relevance is not None for h in hits)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=search, args=(n,)) for n in range(6)]
        for th in threads:
            th.start()
        for i in range(10):
            writer.add(f"garden weather note written {i}", user_id="u")
        for th in threads:
            th.join(60)
        assert not errors, errors[0]
        assert len(slowest) == 72 and max(slowest) < 5  # a lock-order deadlock waits out the 10 s pool timeout
        last = writer.add("a kingfisher in the garden weather", user_id="u")
        assert reader.search("kingfisher garden weather", user_id="u", k=1)[0].id == last
    finally:
        reader.close()
        writer.close()


# -- the records' statement and the evidence scored meanwhile (records_with_rivals) ---------


@contextmanager
def _slow_records(pg_url: str, monkeypatch) -> Iterator[tuple[pg_store.PostgresStore, list[str]]]:  # noqa: F811
    """A local-index store of a few records whose records' statement sleeps 0.6 s on the server."""
    memory = BeeWeave(backend=pg_store.PostgresStore(pg_url, tenant=new_tenant()),
                      embedder=HashingEmbedder(64))
    try:
        ids = memory.add_many([{"content": f"note {i} about the garden", "user_id": "u"} for i in range(5)],
                              link=False)
        slow = pg_local.GET_WITH_RIVALS_SQL.replace(
            "WHERE c.tenant = %(t)s AND", "WHERE c.tenant = %(t)s AND (SELECT pg_sleep(0.6)::text) IS NOT NULL AND")
        assert slow != pg_local.GET_WITH_RIVALS_SQL
        monkeypatch.setattr(pg_local, "GET_WITH_RIVALS_SQL", slow)
        yield memory.backend, ids[:3]
    finally:
        memory.close()


def _sleeping_statements(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                            "AND query LIKE '%pg_sleep(0.6)%' AND pid <> pg_backend_pid()").fetchone()[0]


def test_the_evidence_is_scored_while_the_server_reads_the_records(pg_url, monkeypatch) -> None:  # noqa: F811
    """``meanwhile`` runs after the statement is sent (the server is running it) and holds the
    index lock (no catch-up can change the index under it), and the lock is free again before
    the rows come back."""
    with _slow_records(pg_url, monkeypatch) as (store, ids):
        lock = store.local._lock
        seen: dict[str, object] = {}
        got_lock = threading.Event()

        def meanwhile() -> None:
            seen["running"] = _sleeping_statements(store.url)
            seen["locked"] = lock.locked()

            def other() -> None:
                with lock:
                    got_lock.set()

            threading.Thread(target=other).start()

        chunks, _ = pg_local.records_with_rivals(store.db, ids, meanwhile=meanwhile, lock=lock)
        assert set(chunks) == set(ids)
        assert seen == {"running": 1, "locked": True}
        assert got_lock.wait(5)
        # the other thread took the lock while this one awaited the rows (0.6 s of them)
        assert seen and _sleeping_statements(store.url) == 0


def test_a_failure_meanwhile_frees_the_lock_at_once_and_is_reported(pg_url, monkeypatch) -> None:  # noqa: F811
    with _slow_records(pg_url, monkeypatch) as (store, ids):
        lock = store.local._lock
        freed_while_running: list[int] = []

        def meanwhile() -> None:
            def other() -> None:
                with lock:  # before the 0.6 s statement is done
                    freed_while_running.append(_sleeping_statements(store.url))

            threading.Thread(target=other).start()
            raise KeyError("scoring failed")

        with pytest.raises(KeyError, match="scoring failed"):
            pg_local.records_with_rivals(store.db, ids, meanwhile=meanwhile, lock=lock)
        assert not lock.locked()
        for _ in range(100):
            if freed_while_running:
                break
            threading.Event().wait(0.05)
        assert freed_while_running == [1]
        monkeypatch.undo()
        assert set(pg_local.records_with_rivals(store.db, ids, lock=lock)[0]) == set(ids)  # the pool works on


def test_a_search_scores_its_evidence_holding_the_index_lock(pg_url, monkeypatch) -> None:  # noqa: F811
    """Without it, a catch-up in another thread could change the index under the scoring."""
    with _two(pg_url) as (reader, writer):
        _filler(writer)
        held: list[bool] = []
        plain = pg_local.LocalIndex._evidence

        def checked(self, *args):
            held.append(self._lock.locked())
            return plain(self, *args)

        monkeypatch.setattr(pg_local.LocalIndex, "_evidence", checked)
        for _ in range(2):  # checking first, then optimistic
            assert reader.search("garden weather", user_id="u", k=3)
        assert held == [True, True]


@contextmanager
def _round_trips(store: pg_store.PostgresStore, tmp_path) -> Iterator[list[int]]:
    """How many round trips the store's connections make in the block, from libpq's trace:
    a run of client messages the server then answers is one."""
    from psycopg import pq

    trace = tmp_path / "wire.trace"
    db = store.db
    plain = type(db).conn
    out: list[int] = []

    @contextmanager
    def traced(*a, **kw):
        with plain(db, *a, **kw) as conn, open(trace, "a") as f:
            conn.pgconn.trace(f.fileno())
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
            try:
                yield conn
            finally:
                conn.pgconn.untrace()

    db.conn = traced  # type: ignore[method-assign]
    try:
        yield out
    finally:
        del db.conn
    sides = [line.split("\t")[0] for line in trace.read_text().splitlines() if "\t" in line]
    out.append(sum(1 for a, b in zip(sides, sides[1:], strict=False) if (a, b) == ("F", "B")))


def test_a_search_after_another_stores_write_makes_three_round_trips(pg_url, tmp_path) -> None:  # noqa: F811
    """The check; the log entries and the changed rows in one snapshot and one round trip
    (BEGIN, both reads and ROLLBACK pipelined); the records'."""
    with _two(pg_url) as (reader, writer):
        _filler(writer)
        vec = HashingEmbedder(64).embed_query("heron pond")
        reader.search("heron pond", user_id="u", k=3, query_embedding=vec)
        new = writer.add("a heron by the pond", user_id="u")
        with _round_trips(reader.backend, tmp_path) as trips:
            hits = reader.search("heron pond", user_id="u", k=3, query_embedding=vec)
        assert hits[0].id == new
        assert trips == [3]


def test_a_catch_up_whose_read_fails_leaves_the_connection_clean(pg_url, monkeypatch) -> None:  # noqa: F811
    """A statement of the one-trip catch-up fails: the error is reported, the transaction
    its pipeline opened is closed, and the next search catches up on the same pooled connection."""
    tenant = new_tenant()
    emb = HashingEmbedder(64)
    reader = BeeWeave(backend=pg_store.PostgresStore(pg_url, tenant=tenant, pool_size=1),
                      embedder=emb)
    writer = BeeWeave.from_url(pg_url, embedder=emb, tenant=tenant)
    try:
        _filler(writer)
        reader.search("garden", user_id="u", k=3)
        new = writer.add("a heron by the pond", user_id="u")
        monkeypatch.setattr(pg_local, "_CHANGED_SQL", "SELECT 1 / (SELECT count(*) - count(*) FROM @changes)")
        with pytest.raises(InvalidInputError):
            reader.search("heron pond", user_id="u", k=3)
        monkeypatch.undo()
        with reader.backend.db.conn() as conn:
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert reader.search("heron pond", user_id="u", k=3)[0].id == new
    finally:
        reader.close()
        writer.close()
