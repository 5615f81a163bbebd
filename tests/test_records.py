"""Typed records: KnowledgeChunk converts to JSON and back without loss, and every
mode is a str Enum."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from enum import Enum

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beeweave_core import (
    BeeWeave,
    ChunkStatus,
    ContentType,
    FusionMode,
    HashingEmbedder,
    HitSource,
    Intent,
    InvalidInputError,
    KnowledgeChunk,
    ProcessedContent,
    Relationship,
    RelationType,
    SearchHit,
)
from beeweave_core.records import to_datetime
from beeweave_core.validation import MAX_COUNT, MAX_WEIGHT

ENUMS = [ContentType, ChunkStatus, Intent, RelationType, FusionMode]

text = st.text(max_size=40)
nonblank = st.text(min_size=1, max_size=40).filter(lambda s: s.strip())
user_ids = nonblank.filter(lambda s: not any(ord(c) < 32 or ord(c) == 127 for c in s))  # check_user
finite = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | finite | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
zones = st.sampled_from([None, timezone.utc, timezone(timedelta(hours=8)), timezone(timedelta(hours=-5, minutes=-30))])
datetimes = st.builds(
    lambda d, tz: d.replace(tzinfo=tz),
    st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(2200, 1, 1)),
    zones,
)
processed = st.builds(ProcessedContent, type=st.sampled_from(list(ContentType)) | st.sampled_from([t.value for t in ContentType]),
                      text=text, language=st.none() | text, payload=json_values)
relationships = st.builds(Relationship, source_id=nonblank, target_id=nonblank,
                          type=st.sampled_from(list(RelationType)), weight=finite)

chunks = st.builds(
    KnowledgeChunk,
    raw_content=nonblank,
    user_id=user_ids,
    id=nonblank,
    agent_id=st.none() | nonblank,
    session_id=st.none() | nonblank,
    processed_content=st.none() | processed,
    summary=st.none() | text,
    tags=st.lists(nonblank, max_size=5),
    entities=st.lists(nonblank, max_size=5),
    intent=st.none() | st.sampled_from(list(Intent)) | st.sampled_from([i.value for i in Intent]),
    timestamp=datetimes,
    weight=st.floats(0.0, MAX_WEIGHT),  # the ranges every writer checks (validation.check_chunk)
    reinforced_at=st.none() | datetimes,
    confidence=st.floats(0.0, 1.0),
    access_count=st.integers(0, MAX_COUNT),
    last_accessed=st.none() | datetimes,
    expires_at=st.none() | datetimes,
    pinned=st.booleans(),
    status=st.sampled_from(list(ChunkStatus)),
    relationships=st.lists(relationships, max_size=3),
    metadata=st.dictionaries(text, json_values, max_size=5),
    valid_from=st.none() | datetimes,
    invalid_at=st.none() | datetimes,
)


@settings(max_examples=60)
@given(chunks)
def test_json_round_trip_is_lossless_and_plain(chunk: KnowledgeChunk) -> None:
    encoded = chunk.to_json()
    back = KnowledgeChunk.from_json(encoded)
    assert back == chunk
    assert back.to_json() == encoded
    assert KnowledgeChunk.from_dict(chunk.to_dict()) == chunk
    # Types survive, not just values.
    assert isinstance(back.status, ChunkStatus)
    assert back.intent is None or isinstance(back.intent, Intent)
    assert isinstance(back.processed_content.type, ContentType)
    assert all(isinstance(r, Relationship) and isinstance(r.type, RelationType) for r in back.relationships)
    assert back.timestamp.tzinfo is not None and back.timestamp.utcoffset() == timedelta(0)

    # to_dict holds only plain JSON types: no enums, datetimes or dataclasses leak out.
    d = chunk.to_dict()

    def plain(v):
        if isinstance(v, Enum):
            return False
        if isinstance(v, dict):
            return all(isinstance(k, str) and plain(x) for k, x in v.items())
        if isinstance(v, list):
            return all(plain(x) for x in v)
        return v is None or type(v) in (str, int, float, bool)

    assert plain(d)
    assert json.loads(json.dumps(d, allow_nan=False)) == d


@settings(max_examples=60)
@given(chunks)
def test_from_stored_equals_from_dict(chunk: KnowledgeChunk) -> None:
    """The unvalidated decoder of stored records builds the same chunk, types included,
    with or without the relationships (stores keep edges apart), and an older or foreign
    shape still goes through from_dict's checks."""
    for d in (chunk.to_dict(), {k: v for k, v in chunk.to_dict().items() if k != "relationships"}):
        want = KnowledgeChunk.from_dict(json.loads(json.dumps(d)))
        got = KnowledgeChunk.from_stored(json.loads(json.dumps(d)))
        assert got == want and got.to_json() == want.to_json()
        assert type(got.status) is ChunkStatus and type(got.processed_content.type) is ContentType
        assert got.intent is None or type(got.intent) is Intent
        assert [type(t) for t in (got.timestamp, got.last_accessed) if t is not None] == \
            [type(t) for t in (want.timestamp, want.last_accessed) if t is not None]
    older = {k: v for k, v in chunk.to_dict().items() if k != "reinforced_at"}
    assert KnowledgeChunk.from_stored(json.loads(json.dumps(older))) == chunk.copy(reinforced_at=None)
    with pytest.raises(InvalidInputError):
        KnowledgeChunk.from_stored({**chunk.to_dict(), "surprise": 1})


@pytest.fixture(scope="module")
def store():
    m = BeeWeave(embedder=HashingEmbedder(8))
    yield m
    m.close()


@pytest.mark.slow
@settings(max_examples=40)
@given(chunks)
def test_store_round_trip_keeps_every_field(store, chunk: KnowledgeChunk) -> None:
    """What the SQLite store gives back is the chunk that went in. Relationships live in
    their own table and the engine weaves new ones on insert, so they are set aside."""
    chunk = chunk.copy(id=f"rt-{store.count()}-{abs(hash(chunk.id))}", relationships=[])
    store.add_many([chunk], trusted=True)  # the store's round trip, not the write policy
    assert store.get(chunk.id).copy(relationships=[]) == chunk


def test_naive_datetimes_are_utc_and_inputs_are_normalised() -> None:
    c = KnowledgeChunk("x", "u", timestamp="2024-05-01T12:00:00Z", status="archived", intent="other",
                       processed_content={"type": "code", "text": "print()", "language": "python"})
    assert c.timestamp == datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    assert c.status is ChunkStatus.ARCHIVED and c.intent is Intent.OTHER
    assert c.processed_content == ProcessedContent(ContentType.CODE, "print()", "python")
    assert to_datetime(datetime(2024, 1, 1)) == datetime(2024, 1, 1, tzinfo=timezone.utc)
    assert to_datetime(0) == datetime(1970, 1, 1, tzinfo=timezone.utc)
    assert c.content == "print()"  # the processed text is what is indexed
    assert KnowledgeChunk("raw", "u").content == "raw"


@pytest.mark.parametrize("enum", ENUMS)
def test_modes_are_str_enums(enum) -> None:
    assert issubclass(enum, str) and issubclass(enum, Enum)
    for member in enum:
        assert isinstance(member, str)
        assert member == member.value
        assert enum(member.value) is member
        assert json.dumps(member) == json.dumps(member.value)
        assert member.value == member.value.lower()


@pytest.mark.parametrize("bad", [dict(status="deleted"), dict(intent="gossip"), dict(timestamp="not a date"),
                                 dict(processed_content={"type": "video"}), dict(timestamp=float("inf"))])
def test_invalid_field_values_raise_invalid_input(bad) -> None:
    with pytest.raises(InvalidInputError):
        KnowledgeChunk("x", "u", **bad)


def test_unknown_fields_are_rejected() -> None:
    d = KnowledgeChunk("x", "u").to_dict()
    d["colour"] = "red"
    with pytest.raises(InvalidInputError):
        KnowledgeChunk.from_dict(d)


def test_relationship_round_trip_and_bad_type() -> None:
    r = Relationship("a", "b", "entity", 0.5)
    assert r.type is RelationType.ENTITY
    assert Relationship.from_dict(r.to_dict()) == r
    with pytest.raises(InvalidInputError):
        Relationship("a", "b", "friendship")


def test_search_hit_to_dict_is_json() -> None:
    c = KnowledgeChunk("x", "u", intent=Intent.OTHER)
    hit = SearchHit(c, 0.5, {"lexical": HitSource(1, 2.0), "graph": HitSource(2, 0.1, via="entity", from_id="z", hops=1)})
    d = json.loads(json.dumps(hit.to_dict()))
    assert d["chunk"] == c.to_dict() and d["score"] == 0.5
    assert d["sources"]["lexical"] == {"rank": 1, "score": 2.0}
    assert d["sources"]["graph"]["via"] == "entity" and d["sources"]["graph"]["hops"] == 1
    assert hit.id == c.id


def test_a_relationship_weight_is_a_float_whatever_json_gave() -> None:
    # PostgreSQL's json_agg gives 1 for 1.0: an export from it must equal one from SQLite.
    edge = Relationship("a", "b", "related", 1)
    assert type(edge.weight) is float and edge.to_dict()["weight"] == 1.0
    assert type(Relationship.from_dict({"source_id": "a", "target_id": "b", "type": "related"}).weight) is float
