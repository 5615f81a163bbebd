"""An optimistic local-index search (``LocalIndex.retrieve(optimistic=True)``, what the engine
asks): when the last search found the index current and the store has not written since,
the search ranks first and checks the change log in the statement that reads its records.
One statement per search then; a write by another store, before the search or between its
ranking and its records, is never missed: the search ranks again."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.store.postgres import local as pg_local
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)


@contextmanager
def _two(url: str) -> Iterator[tuple[BeeWeave, BeeWeave]]:
    """A memory searching through a local index and another writing the same tenant."""
    tenant = new_tenant()
    reader = BeeWeave.from_url(url + "&local_index=true", embedder=HashingEmbedder(64), tenant=tenant)
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
    memory.add_many([{"content": f"note {i} about the garden and the weather", "user_id": "u"} for i in range(30)],
                    link=False)


def test_a_search_with_nothing_new_is_one_statement(pg_url, statements) -> None:  # noqa: F811
    # (with the query's vector given: otherwise the engine first counts the store's records,
    # so as not to embed a query for an empty store)
    with _two(pg_url) as (reader, writer):
        _filler(writer)
        vec = HashingEmbedder(64).embed_query("garden weather")
        first = reader.search("garden weather", user_id="u", k=3, query_embedding=vec)
        statements.clear()
        again = reader.search("garden weather", user_id="u", k=3, query_embedding=vec)
        assert [h.id for h in again] == [h.id for h in first]
        assert len(statements) == 1 and "changes" in statements[0], statements
        reader.add("the garden shed was painted blue", user_id="u")  # its own write: checked first
        statements.clear()
        assert reader.search("garden shed painted", user_id="u", k=1)[0].chunk.content.startswith("the garden shed")
        assert len(statements) > 1


def test_another_stores_write_before_the_search_is_seen(pg_url) -> None:  # noqa: F811
    with _two(pg_url) as (reader, writer):
        _filler(writer)
        reader.search("garden weather", user_id="u", k=3)
        reader.search("garden weather", user_id="u", k=3)  # trusted from here
        new = writer.add("a heron visited the pond this morning", user_id="u")
        assert reader.search("heron pond morning", user_id="u", k=1)[0].id == new
        gone = reader.search("heron pond", user_id="u", k=5)
        writer.delete(new)
        assert new in {h.id for h in gone} and new not in {h.id for h in reader.search("heron pond", user_id="u", k=5)}


def test_a_write_between_the_ranking_and_the_records_is_seen(pg_url, monkeypatch) -> None:  # noqa: F811
    with _two(pg_url) as (reader, writer):
        _filler(writer)
        reader.search("garden weather", user_id="u", k=3)
        written: list[str] = []
        plain = pg_local.records_with_rivals

        def late(store, ids, *, seen=None):
            if not written:  # once: after this search ranked, before its records are read
                written.append(writer.add("a heron visited the pond this morning", user_id="u"))
            return plain(store, ids, seen=seen)

        monkeypatch.setattr(pg_local, "records_with_rivals", late)
        hits = reader.search("heron pond morning", user_id="u", k=1)
        assert written and hits[0].id == written[0]
