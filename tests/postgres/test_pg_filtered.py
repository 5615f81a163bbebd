"""Filtered searches on PostgreSQL where the filter is selective (a session, a tag, an
agent, a time range): the store's local index gives what the embedded backend and the
slow Reference give — every match, the same scores."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pytest

from beeweave_core import ChunkStatus, IndexConfig, KnowledgeChunk
from beeweave_core.filters import build_filter
from beeweave_core.store.base import ChunkRow
from beeweave_core.store.postgres import PostgresStore
from beeweave_core.store.sqlite import SQLiteStore
from tests.conformance import DIM, Reference
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)
from tests.support import WORDS, dt, matches, sentence, term_counts, unit_vectors

pytestmark = pytest.mark.slow

N = 600
SESSIONS = [f"s{i}" for i in range(30)]  # ~20 records each
CFG = IndexConfig()  # session context on: a record also matches its neighbours' terms

# Selective filters, each with a user or without, and one that nothing passes.
FILTERS: list[dict] = [
    {"user_id": "ann", "session_id": "s3"},
    {"user_id": "bob", "session_id": ["s1", "s2"], "agent_id": "a2"},
    {"user_id": "ann", "tags": "t2"},
    {"tags_all": ["t1", "t4"]},
    {"agent_id": "a1"},
    {"user_id": "bob", "agent_id": "a0", "status": ["active", "archived"]},
    {"session_id": "s7", "since": dt(2024, 1, 1) + timedelta(hours=100)},
    {"user_id": "ann", "session_id": "nowhere"},
]

def make_rows(seed: int) -> list[ChunkRow]:
    rnd, rng = random.Random(seed), np.random.default_rng(seed)
    vecs = unit_vectors(rng, N, DIM)
    rows = []
    for i in range(N):
        text = sentence(rnd, 2, 10, WORDS[:50])
        chunk = KnowledgeChunk(
            raw_content=text, id=f"m{i}", user_id=rnd.choice(["ann", "bob"]), session_id=rnd.choice(SESSIONS),
            agent_id=f"a{rnd.randrange(6)}", tags=[f"t{j}" for j in rnd.sample(range(10), rnd.randint(0, 2))],
            timestamp=dt(2024, 1, 1) + timedelta(hours=rnd.randint(0, 200)),
            status=rnd.choice([ChunkStatus.ACTIVE] * 5 + [ChunkStatus.ARCHIVED]))
        rows.append(ChunkRow(chunk, vecs[i], text.split()))
    return rows


@pytest.fixture(scope="module")
def stores(pg_url):  # noqa: F811
    rows = make_rows(21)
    pg = PostgresStore(pg_url, index_config=CFG, tenant=new_tenant())
    lite = SQLiteStore(None, index_config=CFG)
    ref = Reference(CFG)
    for start in range(0, N, 150):
        pg.insert(rows[start : start + 150])
        lite.insert(rows[start : start + 150])
    ref.insert(rows)
    yield pg, lite, ref, rows
    pg.close()
    lite.close()


def test_filtered_lexical_equals_sqlite_and_the_reference(stores) -> None:
    pg, lite, ref, rows = stores
    rnd = random.Random(4)
    for flt in FILTERS:
        f = build_filter(flt)
        found = 0
        for _ in range(6):
            q = term_counts(sentence(rnd, 1, 5, WORDS[:55]).split())
            want = ref.lexical(q, flt)
            got = pg.lexical_search(q, f, N)
            found += len(got)
            assert {i for i, _ in got} == set(want), (flt, q)  # every match, none outside the filter
            for i, s in got:
                assert s == pytest.approx(want[i], abs=1e-6)
            for k in (1, 5):
                top, lite_top = pg.lexical_search(q, f, k), lite.lexical_search(q, f, k)
                assert [i for i, _ in top] == [i for i, _ in lite_top], (flt, q, k)
                np.testing.assert_allclose([s for _, s in top], [s for _, s in lite_top], rtol=0, atol=1e-6)
        # the queries match something wherever a record passes the filter
        assert (found > 0) == any(matches(r.chunk, flt) for r in rows), flt


def test_filtered_retrieve_equals_the_separate_calls(stores) -> None:
    pg, lite, _, rows = stores
    _check_retrieve(pg, lite, rows)


def test_many_term_searches_in_one_trip_equal_the_separate_calls(stores) -> None:
    """lexical_searches (one catch-up, what calibrated relevance asks per query term) gives
    exactly what each lexical_search gives, with the filter, k and include applied."""
    pg, _, _, rows = stores
    rnd = random.Random(12)
    for flt in [*FILTERS, {"user_id": "ann"}]:
        f = build_filter(flt)
        queries = [{w: 1} for w in rnd.sample(WORDS[:55], 6)] + [term_counts(sentence(rnd, 2, 4, WORDS[:55]).split())]
        include = [r.chunk.id for r in rnd.sample(rows, 12)]
        for k in (1, 5):
            got = pg.lexical_searches(queries, f, k, include=include)
            assert got == [pg.lexical_search(q, f, k, include=include) for q in queries], (flt, k)
    assert pg.lexical_searches([], build_filter({}), 3) == []


def _check_retrieve(pg, lite, rows) -> None:
    rng = np.random.default_rng(9)
    rnd = random.Random(9)
    for flt in FILTERS:
        f = build_filter(flt)
        passing = [r for r in rows if matches(r.chunk, flt)]
        q = term_counts(sentence(rnd, 1, 5, WORDS[:55]).split())
        qvec = unit_vectors(rng, 1, DIM)[0]
        got = pg.retrieve(q, qvec, f, 8)
        top = pg.vector_search(qvec, f, 8)
        assert len(top) == min(8, len(passing)), flt
        lexical = pg.lexical_search(q, f, 8, include=[i for i, _ in top])
        assert got.ids == [i for i, _ in lexical], flt
        np.testing.assert_allclose(got.lexical, [s for _, s in lexical], rtol=0, atol=1e-9)
        assert set(got.ids) <= {r.chunk.id for r in passing}
        assert [i for i, _ in top] == [i for i, _ in lite.vector_search(qvec, f, 8, exact=True)], flt
