"""The front class is composed of named parts (issue 16): no mixins, an explicit
constructor, one rule for id lists, and parts that work on their own."""

from __future__ import annotations

import inspect

import pytest

from beeweave_core import (
    BeeWeave,
    HashingEmbedder,
    InvalidInputError,
    InvalidVectorError,
    NetworkConfig,
)
from beeweave_core.engine import Graph, Records, SearchConfig, Shared
from beeweave_core.records import RelationType
from beeweave_core.scoring import ScoringConfig
from beeweave_core.store.sqlite import SQLiteStore
from beeweave_core.tokenizer import Tokenizer, TokenizerConfig

PARAMETERS = ["path", "embedder", "tokenizer", "index", "network", "lifecycle", "ingest", "scoring", "config",
              "clock", "backend", "scopes"]


def test_the_front_class_has_no_bases() -> None:
    assert BeeWeave.__mro__ == (BeeWeave, object)


def test_the_constructor_names_every_part_setting() -> None:
    assert list(inspect.signature(BeeWeave).parameters) == PARAMETERS


def test_network_config_is_a_constructor_argument() -> None:
    cfg = NetworkConfig(semantic_k=0, session_links=False, entity_links=False, tag_links=False)
    with BeeWeave(embedder=HashingEmbedder(16), network=cfg) as m:
        a = m.add("alpha beta", user_id="u", session_id="s", tags=["t"])
        m.add("alpha beta gamma", user_id="u", session_id="s", tags=["t"])
        assert m.network_config is cfg
        assert m.relationships(a) == []  # nothing mined


def test_a_setting_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="network must be a NetworkConfig"):
        BeeWeave(embedder=HashingEmbedder(16), network={"semantic_k": 1})


@pytest.fixture
def abc():
    m = BeeWeave(embedder=HashingEmbedder(16))
    for cid in ("a", "b", "abc"):
        m.add(f"memory {cid}", user_id="u", chunk_id=cid, status="pending")
    yield m
    m.close()


def test_a_bare_string_is_one_id_for_delete_many(abc) -> None:
    assert abc.delete_many("abc") == ["abc"]
    assert sorted(c.id for c in abc.get_many(["a", "b", "abc"])) == ["a", "b"]


def test_a_bare_string_is_one_id_everywhere(abc) -> None:
    assert [c.id for c in abc.get_many("abc")] == ["abc"]
    assert [c.id for c in abc.feedback("abc", "up")] == ["abc"]
    assert abc.approve("abc") == ["abc"]
    assert abc.get("a").status.value == "pending"  # "a" and "b" untouched
    assert abc.reject("b") == ["b"]
    assert [c.id for c in abc.get_many(["a", "abc"])] == ["a", "abc"]


@pytest.mark.parametrize("bad", [b"abc", {"abc": 1}, 3, ["ok", ""], ["ok", None]])
def test_what_is_not_an_id_list_is_refused_everywhere_and_changes_nothing(abc, bad) -> None:
    for call in (abc.delete_many, abc.get_many, abc.approve, lambda ids: abc.feedback(ids, "up")):
        with pytest.raises(InvalidInputError):
            call(bad)
    assert abc.count(filters={"status": "pending"}) == 3


def test_the_records_part_works_alone() -> None:
    """A part is a plain class over the shared context: usable without the front."""
    shared = Shared(SQLiteStore(None), HashingEmbedder(16), Tokenizer(TokenizerConfig()),
                    clock=lambda: __import__("datetime").datetime.now(__import__("datetime").timezone.utc),
                    config=SearchConfig(), scoring=ScoringConfig())
    seen: list[list[str]] = []
    shared.hooks.on_insert.append(lambda chunks, link: seen.append([c.id for c in chunks]))
    records = Records(shared)
    cid = records.add("a memory on its own", user_id="u", chunk_id="x")
    assert seen == [["x"]]
    assert records.get(cid).raw_content == "a memory on its own"
    assert records.delete_many("x") == ["x"]
    shared.backend.close()


def test_the_graph_part_records_logical_relations() -> None:
    with BeeWeave(embedder=HashingEmbedder(16)) as m:
        a = m.add("the backup runs at 2am", user_id="u")
        b = m.add("the backup runs at 3am", user_id="u")
        other = m.add("someone else's note", user_id="v")
        edge = m.relate(a, b, "contradicts", weight=0.8, note="two schedules")
        assert edge.type is RelationType.CONTRADICTS
        assert edge in m.relationships(b, types=["contradicts"])
        assert m.relation_note(edge) == "two schedules"
        assert isinstance(m.parts.graph, Graph)
        with pytest.raises(InvalidInputError, match="one user"):
            m.relate(a, other, "supports")
        with pytest.raises(InvalidInputError, match="type must be one of"):
            m.relate(a, b, "semantic")  # BeeWeave's own bookkeeping is not the caller's to write
        with pytest.raises(InvalidInputError):
            m.relate(a, b, "supports", weight=2.0)


@pytest.mark.parametrize("when", ["9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00+01:00"])
def test_timestamps_at_the_calendar_limits_are_invalid_input(when: str) -> None:
    with BeeWeave(embedder=HashingEmbedder(16)) as m:
        with pytest.raises(InvalidInputError):
            m.add("x", user_id="u", timestamp=when)
        with pytest.raises(InvalidInputError):
            m.add("x", user_id="u", expires_at=when)
        with pytest.raises(InvalidInputError):
            m.search("x", filters={"since": when})
        assert m.count() == 0


def test_a_memory_at_the_end_of_the_calendar_is_stored_and_its_expiry_saturates() -> None:
    with BeeWeave(embedder=HashingEmbedder(16)) as m:
        cid = m.add("the weather today is sunny", user_id="u", timestamp="9999-12-31T23:59:59+00:00")
        assert m.get(cid).expires_at is not None and m.get(cid).expires_at.year == 9999
        assert [h.id for h in m.search("weather", filters={"since": "9999-12-31T00:00:00+00:00"})] == [cid]


def test_a_vector_whose_float32_norm_would_overflow_is_normalised_right() -> None:
    """[3e38] * 64 squares past float32's range: normalised in float64 it is a unit vector
    (it was stored as all zeros); values beyond float32 itself are refused."""
    with BeeWeave(embedder=HashingEmbedder(64)) as m:
        cid = m.add("x", user_id="u", embedding=[3e38] * 64)
        vec = m.backend.get_vectors([cid])[cid]
        assert abs(float((vec.astype("float64") ** 2).sum()) - 1.0) < 1e-5
        assert abs(float(vec[0]) - 0.125) < 1e-6
        for bad in ([1e39] * 64, [float("inf")] * 64, [0.0] * 64):
            with pytest.raises(InvalidVectorError):
                m.add("y", user_id="u", embedding=bad)
            with pytest.raises(InvalidVectorError):
                m.search("x", query_embedding=bad)
        assert m.count() == 1
