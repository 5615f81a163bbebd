"""PostgresStore against the embedded SQLiteStore on the same random data: BM25 scores
to 1e-6 (with and without session context, among turns or every memory, after deletes, moves and new text), the same
filter results everywhere, and vector search equal to an exact numpy scan."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pytest

from beeweave_core import ChunkStatus, IndexConfig, KnowledgeChunk, SessionContext
from beeweave_core.filters import build_filter
from beeweave_core.store.base import ChunkRow
from beeweave_core.store.postgres import PostgresStore
from beeweave_core.store.sqlite import SQLiteStore
from tests.conformance import Reference
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)
from tests.support import WORDS, dt, matches, sentence, term_counts, unit_vectors

pytestmark = pytest.mark.slow

DIM = 16
USERS = ["ann", "bob", "cid"]
SESSIONS = ["s1", "s2", "s3", None]
TAGS = ["x", "y", "z", "w"]
CONFIGS = {
    "plain": IndexConfig(k1=1.5, b=0.75, context_radius=0),
    "context": IndexConfig(),  # the defaults: radius 2, lexical 0.3, vector 0.3, context among turns
    "all": IndexConfig(session_context=SessionContext.ALL),  # every memory with a session has context
    "wide": IndexConfig(k1=1.2, b=0.5, context_radius=3, lexical_context_weight=0.6, vector_context_weight=0.2),
}
EVERY_STATUS = {"status": [s.value for s in ChunkStatus]}


def make_rows(rnd: random.Random, rng: np.random.Generator, n: int, start: int = 0) -> list[ChunkRow]:
    vecs = unit_vectors(rng, n, DIM)
    rows = []
    for i in range(n):
        text = sentence(rnd, 2, 12, WORDS[:40])  # a small vocabulary: many shared terms, some with df > N/2
        chunk = KnowledgeChunk(
            raw_content=text, id=f"c{start + i}", user_id=rnd.choice(USERS), session_id=rnd.choice(SESSIONS),
            agent_id=rnd.choice(["a1", "a2", None]), tags=rnd.sample(TAGS, rnd.randint(0, 2)),
            timestamp=dt(2024, 1, 1) + timedelta(hours=rnd.randint(0, 30)),  # many ties
            status=rnd.choice([ChunkStatus.ACTIVE] * 4 + [ChunkStatus.ARCHIVED]),
            entities=rnd.sample(["paris", "rome"], rnd.randint(0, 1)), metadata=_speaker(rnd))
        rows.append(ChunkRow(chunk, vecs[i], text.split()))
    return rows


def _speaker(rnd: random.Random) -> dict:
    """Most memories are conversation turns (a speaker), the rest facts in the same sessions."""
    who = rnd.choice(["ann", "bot", None])
    return {"speaker": who} if who else {}


def random_filters(rnd: random.Random) -> list[dict]:
    out: list[dict] = [{}, EVERY_STATUS, {"user_id": "ann"}, {"user_id": ["bob", "cid"], **EVERY_STATUS}]
    for _ in range(6):
        f: dict = {}
        if rnd.random() < 0.6:
            f["user_id"] = rnd.sample(USERS, rnd.randint(1, 2))
        if rnd.random() < 0.3:
            f["session_id"] = rnd.sample(["s1", "s2", "s3"], rnd.randint(1, 2))
        if rnd.random() < 0.3:
            f["tags"] = rnd.sample(TAGS, 1)
        if rnd.random() < 0.2:
            f["tags_all"] = rnd.sample(TAGS, 2)
        if rnd.random() < 0.2:
            f["agent_id"] = "a1"
        if rnd.random() < 0.2:
            f["entities"] = "paris"
        if rnd.random() < 0.3:
            f["since"] = dt(2024, 1, 1) + timedelta(hours=rnd.randint(0, 15))
        if rnd.random() < 0.3:
            f["until"] = dt(2024, 1, 1) + timedelta(hours=rnd.randint(15, 30))
        if rnd.random() < 0.3:
            f.update(EVERY_STATUS)
        out.append(f)
    return out


def queries(rnd: random.Random) -> list[dict[str, int]]:
    return [term_counts(sentence(rnd, 1, 5, WORDS[:45]).split()) for _ in range(8)]


# Scores this close are one score: the backends add a record's terms in their own orders
# (store/postgres/sql.py), so a tie of one can come out one ulp apart in the other.
TIE = 1e-9


def assert_same_lexical(pg, lite, qs, filters) -> None:
    for flt in filters:
        f = build_filter(flt)
        for q in qs:
            every = dict(lite.lexical_search(q, f, 10**6))
            for k in (5, 1000):
                got, want = pg.lexical_search(q, f, k), lite.lexical_search(q, f, k)
                assert len(got) == len(want) == len({i for i, _ in got}), (q, flt, k)
                np.testing.assert_allclose([s for _, s in got], [s for _, s in want], rtol=0, atol=1e-6)
                # The same ranking: where the ids differ, they are tied (to the last bits).
                for (gi, _), (wi, ws) in zip(got, want, strict=True):
                    assert gi == wi or abs(every.get(gi, -np.inf) - ws) <= TIE, (q, flt, k, gi, wi)


def assert_same_reads(pg, lite, filters, rng) -> None:
    q = unit_vectors(rng, 1, DIM)[0]
    for flt in filters:
        f = build_filter(flt)
        assert pg.count(f) == lite.count(f), flt
        assert [c.id for c in pg.scan(f)] == [c.id for c in lite.scan(f)], flt
        assert [c.id for c in pg.scan(f, descending=True, limit=7)] == \
            [c.id for c in lite.scan(f, descending=True, limit=7)], flt
        got, want = pg.vector_search(q, f, 10, exact=True), lite.vector_search(q, f, 10, exact=True)
        assert [i for i, _ in got] == [i for i, _ in want], flt
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-5)
    assert pg.count() == lite.count()
    ids = sorted(lite.contains([f"c{i}" for i in range(400)]))
    got, want = pg.vector_scores(q, ids), lite.vector_scores(q, ids)
    assert set(got) == set(want)
    np.testing.assert_allclose([got[i] for i in ids], [want[i] for i in ids], atol=1e-5)


@pytest.mark.parametrize("cfg_name", list(CONFIGS))
def test_bm25_and_reads_equal_the_embedded_backend(pg_url, cfg_name) -> None:  # noqa: F811
    cfg = CONFIGS[cfg_name]
    rnd, rng = random.Random(7), np.random.default_rng(7)
    pg = PostgresStore(pg_url, index_config=cfg, tenant=new_tenant())
    lite = SQLiteStore(None, index_config=cfg)
    try:
        rows = make_rows(rnd, rng, 240)
        for start in range(0, len(rows), 60):  # several batches, as add_many writes them
            pg.insert(rows[start : start + 60])
            lite.insert(rows[start : start + 60])
        qs, filters = queries(rnd), random_filters(rnd)
        assert_same_lexical(pg, lite, qs, filters)
        assert_same_reads(pg, lite, filters, rng)

        # Deletes across sessions (and a whole session of one user), then moves in time and
        # between sessions, new text for some, and new records tied in time with old ones.
        gone = rnd.sample([r.chunk.id for r in rows], 50)
        gone += [r.chunk.id for r in rows if (r.chunk.user_id, r.chunk.session_id) == ("bob", "s2")]
        assert sorted(pg.delete(gone)) == sorted(lite.delete(gone))
        alive = sorted(lite.contains([r.chunk.id for r in rows]))
        moved = []
        for cid in rnd.sample(alive, 30):
            c = lite.get([cid])[cid]
            moved.append(c.copy(timestamp=c.timestamp + timedelta(hours=rnd.randint(-5, 5)),
                                session_id=rnd.choice(["s1", "s2", "s3", "s4"]), user_id=rnd.choice(USERS),
                                tags=["moved"], status=ChunkStatus.ACTIVE, metadata=_speaker(rnd)))
        pg.update(moved)
        lite.update(moved)
        fresh = make_rows(random.Random(8), np.random.default_rng(8), 40, start=1000)
        renewed = [ChunkRow(lite.get([cid])[cid].copy(raw_content=r.chunk.raw_content), r.vector, r.terms)
                   for cid, r in zip(rnd.sample(alive, 10), fresh[:10])]
        pg.replace(renewed)
        lite.replace(renewed)
        pg.insert(fresh[10:])
        lite.insert(fresh[10:])
        filters.append({"tags": "moved"})
        assert pg.verify().ok  # the incrementally kept statistics equal a from-scratch computation
        assert_same_lexical(pg, lite, qs, filters)
        assert_same_reads(pg, lite, filters, rng)
    finally:
        pg.close()
        lite.close()


def test_leaving_a_session_drops_its_context(pg_url) -> None:  # noqa: F811
    """A memory moved out of every session is scored on its own text again (the Reference
    model of conformance.py; see the report about SQLiteStore.update here)."""
    cfg = CONFIGS["context"]
    rnd, rng = random.Random(3), np.random.default_rng(3)
    rows = make_rows(rnd, rng, 60)
    ref = Reference(cfg)
    with_session = [r for r in rows if r.chunk.session_id is not None]
    pg = PostgresStore(pg_url, index_config=cfg, tenant=new_tenant())
    try:
        pg.insert(rows)
        ref.insert(rows)
        loose = [pg.get([r.chunk.id])[r.chunk.id].copy(session_id=None) for r in with_session[:5]]
        pg.update(loose)
        ref.update(loose)
        for q in queries(rnd):
            got = dict(pg.lexical_search(q, build_filter(EVERY_STATUS), 1000))
            want = ref.lexical(q, EVERY_STATUS)
            assert set(got) == set(want)
            for i in want:
                assert got[i] == pytest.approx(want[i], abs=1e-6)
    finally:
        pg.close()


def test_vector_search_equals_exact_numpy(pg_url) -> None:  # noqa: F811
    rng = np.random.default_rng(11)
    n = 1500
    vecs = unit_vectors(rng, n, DIM)
    rows = [ChunkRow(KnowledgeChunk(raw_content=f"memory {i}", id=f"v{i}", user_id=USERS[i % 3]), vecs[i],
                     ["memory"]) for i in range(n)]
    store = PostgresStore(pg_url, tenant=new_tenant())
    try:
        store.insert(rows)
        for q in unit_vectors(rng, 10, DIM):
            truth = np.argsort(-(vecs @ q), kind="stable")[:10]
            want = [f"v{i}" for i in truth]
            for exact in (False, True):
                got = store.vector_search(q, build_filter(None), 10, exact=exact)
                assert [i for i, _ in got] == want
                np.testing.assert_allclose([s for _, s in got], (vecs @ q)[truth], atol=1e-5)
            allowed = np.arange(0, 450, 3)
            want_sel = [f"v{i}" for i in allowed[np.argsort(-(vecs[allowed] @ q), kind="stable")][:5]]
            sel = store.vector_search(q, build_filter({"ids": [f"v{i}" for i in allowed]}), 5)
            assert [i for i, _ in sel] == want_sel
            hits = store.vector_search(q, build_filter({"user_id": "ann"}), 10)
            assert len(hits) == 10 and all(int(i[1:]) % 3 == 0 for i, _ in hits)
    finally:
        store.close()


def test_filters_match_the_reference_predicate(pg_url) -> None:  # noqa: F811
    rnd, rng = random.Random(5), np.random.default_rng(5)
    rows = make_rows(rnd, rng, 120)
    pg = PostgresStore(pg_url, tenant=new_tenant())
    try:
        pg.insert(rows)
        for flt in random_filters(random.Random(6)) + [{"ids": ["c1", "c5", "nope"]}, {"type": "code"},
                                                        {"intent": "other"}, {"user_id": "nobody"}]:
            want = {r.chunk.id for r in rows if matches(r.chunk, flt)
                    and ("entities" not in flt or flt["entities"] in r.chunk.entities)}
            f = build_filter(flt)
            assert {c.id for c in pg.scan(f)} == want, flt
            assert pg.count(f) == len(want)
            assert pg.matching([r.chunk.id for r in rows] + ["nope"], f) == want
            assert {i for i, _ in pg.vector_search(rows[0].vector, f, 500)} == want
            assert {i for i, _ in pg.lexical_search(term_counts(WORDS[:40]), f, 500)} <= want
    finally:
        pg.close()


def test_retrieve_equals_the_separate_calls(pg_url) -> None:  # noqa: F811
    """One call (retrieve) answers what a search asks of the backend in five calls:
    the lexical top k with the dense top k included, both scores of each, the ranking
    fields and the records."""
    rnd, rng = random.Random(12), np.random.default_rng(12)
    pg = PostgresStore(pg_url, index_config=CONFIGS["context"], tenant=new_tenant())
    try:
        rows = make_rows(rnd, rng, 200)
        pg.insert(rows)
        pg.record_access({"c3": (2, dt(2024, 3, 1)), "c4": (1, dt(2024, 3, 2))})
        for flt in random_filters(rnd)[:6]:
            f = build_filter(flt)
            for q in queries(rnd)[:3]:
                qvec = unit_vectors(rng, 1, DIM)[0]
                got = pg.retrieve(q, qvec, f, 12)
                top = pg.vector_search(qvec, f, 12)
                lexical = pg.lexical_search(q, f, 12, include=[i for i, _ in top])
                assert got.ids == [i for i, _ in lexical], (flt, q)
                np.testing.assert_allclose(got.lexical, [s for _, s in lexical], rtol=0, atol=1e-9)
                want_vec = pg.vector_scores(qvec, got.ids)
                np.testing.assert_allclose(got.vector, [want_vec[i] for i in got.ids], rtol=0, atol=1e-6)
                assert got.fields == pg.rank_fields(got.ids)
                assert got.records(got.ids) == pg.get(got.ids)
    finally:
        pg.close()
