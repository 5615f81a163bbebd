"""The storage-backend conformance suite, split by the roles of the contract (store/roles.py).

Every ``StoreBackend`` must pass it. To run it against a backend, subclass
:class:`BackendConformance` in a ``test_conformance_<name>.py`` module and provide one
fixture:

* ``backend_factory``: a callable ``(index_config=None) -> backend`` returning a new,
  empty, open backend (built with that ``IndexConfig``, or the default one).

and, if the backend persists, override a second one:

* ``reopen``: a callable taking an open backend, closing it and returning a new
  backend over the same storage (default ``None``: persistence tests are skipped).

Each role's tests are a class of their own (``TestRecords``, ``TestSearchIndex``,
``TestEdges``...) nested in ``BackendConformance``, so a failure's test id names the
backend and the role, e.g. ``TestSQLiteFile::TestEdges::test_edges_in_both_directions``.
Everything there talks to the protocol directly (ChunkRow in, ids and scores out), never
through ``BeeWeave``, so it checks exactly what the engine relies on; ``TestNoLostUpdates``
(conformance_lost_updates.py) then runs the engine's read-then-write paths over the same
backend. docs/backends.md is the page a backend author reads.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from beeweave_core import IndexConfig
from beeweave_core.filters import build_filter
from beeweave_core.store.base import Capabilities, StoreBackend
from tests.conformance_data import DIM, EVERY_STATUS, PLAIN, WORLD, Reference
from tests.conformance_edges import EdgesConformance
from tests.conformance_lifecycle import IntegrityConformance, LifecycleConformance
from tests.conformance_lost_updates import LostUpdateConformance
from tests.conformance_records import MetaConformance, RecordsConformance
from tests.conformance_search import SearchIndexConformance
from tests.conformance_state import KeyValueConformance, LogConformance, UsersConformance

# DIM and Reference stay importable from here: other suites check the PostgreSQL store's
# answers against the same reference model.
__all__ = ["DIM", "BackendConformance", "Reference"]


class ContractConformance:
    """The contract as a whole: every role present, and the optional roles a backend
    declares in its ``Capabilities`` doing what they promise."""

    def test_is_a_store_backend(self, backend) -> None:
        assert isinstance(backend, StoreBackend)

    def test_declares_its_capabilities(self, backend) -> None:
        caps = backend.capabilities
        assert isinstance(caps, Capabilities)
        assert not caps.read_only, "the suite writes: run it on a backend that takes writes"
        if caps.file is not None:
            assert caps.file.exists() and caps.durable

    def test_declared_term_searches_equal_one_search_each(self, world) -> None:
        one_trip = world.capabilities.term_searches
        if one_trip is None:
            pytest.skip("this backend does not declare SearchesTermsInOneTrip")
        queries = [{"apple": 1}, {"grape": 2}, {"nothing": 1}, {"banana": 1, "date": 1}]
        for flt in (build_filter(None), build_filter({"user_id": ["ann", "bob"], **EVERY_STATUS})):
            for k, include in ((1, ()), (3, ("w2", "w5", "nope"))):
                assert one_trip.lexical_searches(queries, flt, k, include=include) == \
                    [world.lexical_search(q, flt, k, include=include) for q in queries]
        assert one_trip.lexical_searches([], build_filter(None), 1) == []

    def test_declared_retrieval_equals_the_separate_calls(self, world) -> None:
        one_trip = world.capabilities.retrieval
        if one_trip is None:
            pytest.skip("this backend does not declare RetrievesInOneTrip")
        flt = build_filter({"user_id": ["ann", "bob"]})
        terms, query = {"apple": 1, "cherry": 1}, WORLD[1].vector
        got = one_trip.retrieve(terms, query, flt, 10)
        lexical = dict(world.lexical_search(terms, flt, 10))
        vector = world.vector_scores(query, got.ids)
        assert set(lexical) <= set(got.ids)
        for i, cid in enumerate(got.ids):
            assert got.lexical[i] == pytest.approx(lexical.get(cid, 0.0), abs=1e-5), cid
            assert got.vector[i] == pytest.approx(vector[cid], abs=1e-5), cid
        assert got.fields == world.rank_fields(got.ids)
        assert got.records(got.ids[:3]) == world.get(got.ids[:3])
        # the evidence of calibrated relevance carries the terms' idf, as ``term_idf`` gives it
        got = one_trip.retrieve(terms | {"unknown": 1}, query, flt, 10, evidence=["apple", "cherry", "unknown"])
        got.records(got.ids[:3])
        assert got.evidence is not None
        idf, rare = world.term_idf(["apple", "cherry", "unknown"])
        assert got.evidence.idf == pytest.approx(idf, abs=1e-12) and set(got.evidence.idf) == {"apple", "cherry"}
        assert got.evidence.rare == pytest.approx(rare, abs=1e-12)


class BackendConformance:
    """Behaviour every StoreBackend must show, one nested class per role. See the module
    docstring to use it."""

    @pytest.fixture
    def reopen(self) -> Callable[[StoreBackend], StoreBackend] | None:
        return None

    @pytest.fixture
    def make(self, backend_factory):
        """Open more backends (e.g. with another IndexConfig); all closed at teardown."""
        opened: list[StoreBackend] = []

        def make(index_config: IndexConfig | None = None) -> StoreBackend:
            opened.append(backend_factory(index_config=index_config))
            return opened[-1]

        yield make
        for b in opened:
            b.close()

    @pytest.fixture
    def backend(self, make):
        return make()

    @pytest.fixture
    def world(self, make):
        """WORLD in a backend without session context, so plain BM25 semantics hold."""
        b = make(PLAIN)
        b.insert(WORLD)
        return b

    TestContract = ContractConformance
    TestMeta = MetaConformance
    TestRecords = RecordsConformance
    TestSearchIndex = SearchIndexConformance
    TestEdges = EdgesConformance
    TestKeyValue = KeyValueConformance
    TestLog = LogConformance
    TestUsers = UsersConformance
    TestIntegrity = IntegrityConformance
    TestLifecycle = LifecycleConformance
    TestNoLostUpdates = LostUpdateConformance
