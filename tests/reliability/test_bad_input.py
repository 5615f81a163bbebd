"""Bad input, property-based: every public entry point of the engine and of the LangChain
and LlamaIndex faces either works or raises a ``BeeWeaveError`` subclass, a refused call
changes nothing, and the store is never corrupted (``verify()`` after each property).

Inputs: any Python value where a string, list or mapping is expected (recursively),
every code point including lone surrogates and NUL, SQL-looking strings, path-traversal
strings, huge and non-finite numbers, and mixes of valid and invalid fields. Plus fixed
cases: 10 MB texts, metadata nested 10,000 deep. Examples per property:
``examples(N)`` (``BEEWEAVE_FUZZ_SCALE`` multiplies them).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from beeweave_core import BeeWeave, BeeWeaveError, Candidate, ExpandOptions, HashingEmbedder, InvalidInputError
from beeweave_core.ingest import IngestConfig
from tests.reliability.fuzz_support import SQL, junk, maybe, nested, text_of, texts, words, works_or_refuses
from tests.reliability.rel_support import assert_verified, examples
from tests.support import WORDS, sentence

pytestmark = pytest.mark.slow

FUZZ = settings(max_examples=examples(40), derandomize=True, database=None, deadline=None)
FACES = settings(max_examples=examples(25), derandomize=True, database=None, deadline=None)


def _store(seed: int = 1) -> BeeWeave:
    import random

    rnd = random.Random(seed)
    m = BeeWeave(embedder=HashingEmbedder(32), ingest=IngestConfig())
    m.add_many([{"content": sentence(rnd), "user_id": rnd.choice(["alice", "bob"]), "chunk_id": f"m{i}",
                 "session_id": rnd.choice(["s1", "s2"]), "tags": rnd.sample(["x", "y", "z"], 2)} for i in range(30)],
               show_progress=False)
    return m


@pytest.fixture(scope="module")
def store():
    m = _store()
    yield m
    assert m.flush(30)
    assert m.dead_letters() == [], [d.error for d in m.dead_letters()]
    assert_verified(m)
    m.close()


def test_the_strategies_reach_the_nasty_characters() -> None:
    seen: set[str] = set()

    @settings(max_examples=200, derandomize=True, database=None)
    @given(texts)
    def collect(s: str) -> None:
        seen.update(s)

    collect()
    assert any(0xD800 <= ord(c) <= 0xDFFF for c in seen) and "\x00" in seen and any(ord(c) > 0xFFFF for c in seen)


# -- the engine --------------------------------------------------------------------------------
record = st.fixed_dictionaries(
    {"content": maybe(texts), "user_id": maybe(words)},
    optional={"session_id": maybe(words), "agent_id": maybe(words), "chunk_id": maybe(texts),
              "tags": maybe(st.lists(words, max_size=3)), "metadata": maybe(st.dictionaries(texts, junk, max_size=3)),
              "timestamp": junk, "embedding": st.one_of(junk, st.lists(st.floats(), min_size=32, max_size=32)),
              "weight": junk, "summary": maybe(texts), "intent": junk, "entities": maybe(st.lists(texts, max_size=2)),
              "expires_at": junk, "pinned": maybe(st.booleans()),
              "confidence": junk, "bogus": junk})


@FUZZ
@given(records=st.one_of(junk, st.lists(st.one_of(record, junk), max_size=4)), link=st.booleans())
def test_add_many(store, records: Any, link: bool) -> None:
    works_or_refuses(store, lambda: store.add_many(records, link=link, show_progress=False))


@FUZZ
@given(rec=record)
def test_add(store, rec: dict) -> None:
    rec = dict(rec)
    content = rec.pop("content")
    works_or_refuses(store, lambda: store.add(content, **rec))


filters = maybe(st.fixed_dictionaries({}, optional={
    "user_id": maybe(st.lists(words, max_size=3)), "tags": maybe(st.lists(words, max_size=2)), "ids": junk,
    "since": junk, "until": junk, "status": junk, "type": junk, "intent": junk, "session_id": junk,
    "tags_all": junk, "entities": junk, "bogus": junk}))


@FUZZ
@given(query=maybe(texts), user_id=maybe(words), k=maybe(st.integers(0, 20)), flt=filters,
       fusion=maybe(st.sampled_from(["zscore", "rrf", "weighted"])), min_score=junk,
       expand=st.one_of(st.booleans(), junk, st.builds(ExpandOptions, hops=st.integers(0, 3))),
       mmr=junk, loosen=st.booleans(), qvec=st.one_of(st.none(), junk, st.lists(st.floats(), min_size=32, max_size=32)))
def test_search(store, query, user_id, k, flt, fusion, min_score, expand, mmr, loosen, qvec) -> None:
    works_or_refuses(store, lambda: store.search(query, user_id=user_id, k=k, filters=flt, fusion=fusion,
                                                 min_score=min_score, expand=expand, mmr=mmr, loosen=loosen,
                                                 query_embedding=qvec), changes_nothing_on_error=False)


ids = st.one_of(st.sampled_from([f"m{i}" for i in range(30)]), texts, junk)


@FUZZ
@given(cid=ids, many=st.lists(ids, max_size=4))
def test_get_and_get_many(store, cid, many) -> None:
    works_or_refuses(store, lambda: store.get(cid))
    works_or_refuses(store, lambda: store.get_many(many))


@FUZZ
@given(cid=ids, changes=st.dictionaries(st.sampled_from(["content", "raw_content", "tags", "metadata", "weight",
                                                         "status", "user_id", "id", "timestamp", "summary",
                                                         "session_id", "processed_content", "bogus", "pinned"]),
                                        junk, max_size=3))
def test_update(store, cid, changes) -> None:
    works_or_refuses(store, lambda: store.update(cid, **changes))


@FUZZ
@given(cids=st.one_of(ids, st.lists(ids, max_size=3)), signal=maybe(st.sampled_from(["used", "up", "down"])))
def test_feedback(store, cids, signal) -> None:
    works_or_refuses(store, lambda: store.feedback(cids, signal))


@FUZZ
@given(cid=st.one_of(texts, junk), many=st.lists(st.one_of(texts, junk), max_size=3))
def test_delete_unknown_or_bad_ids(store, cid, many) -> None:
    # Known ids are left alone here (deleting them would empty the store for the other properties).
    if isinstance(cid, str) and cid.startswith("m"):
        cid = "no-such-" + cid
    many = [("no-such-" + i) if isinstance(i, str) else i for i in many]
    works_or_refuses(store, lambda: store.delete(cid))
    works_or_refuses(store, lambda: store.delete_many(many))


@FUZZ
@given(session=maybe(words), user_id=maybe(words), window=maybe(st.integers(0, 20)))
def test_trace_and_context(store, session, user_id, window) -> None:
    works_or_refuses(store, lambda: store.trace(session, user_id=user_id))
    works_or_refuses(store, lambda: store.context(session, user_id=user_id, window=window))


candidate = st.builds(Candidate, id=st.one_of(st.sampled_from([f"m{i}" for i in range(30)]), texts),
                      text=texts, score=st.one_of(st.none(), st.floats(allow_nan=True)),
                      metadata=st.dictionaries(texts, junk, max_size=2))


@FUZZ
@given(query=maybe(texts), cands=st.one_of(junk, st.lists(st.one_of(candidate, junk), max_size=4)),
       user_id=maybe(words), flt=filters, mmr=st.one_of(st.none(), st.floats(), junk),
       expand=st.one_of(st.booleans(), junk), top_n=junk)
def test_postprocess(store, query, cands, user_id, flt, mmr, expand, top_n) -> None:
    works_or_refuses(store, lambda: store.postprocess(query, cands, user_id=user_id, filters=flt, mmr=mmr,
                                                      expand=expand, top_n=top_n), changes_nothing_on_error=False)


step = st.one_of(junk, st.fixed_dictionaries({"tool": maybe(words)}, optional={"input": junk, "output": junk,
                                                                              "error": junk}))
event = st.fixed_dictionaries({"user_id": maybe(words)}, optional={
    "query": maybe(texts), "response": maybe(texts), "id": maybe(text_of(min_size=1, max_size=20)),
    "session_id": maybe(words), "agent_id": maybe(words), "metadata": maybe(st.dictionaries(texts, junk, max_size=3)),
    "timestamp": junk, "feedback": junk, "intermediate_steps": st.one_of(junk, st.lists(step, max_size=3)),
    "bogus": junk})


@FUZZ
@given(ev=st.one_of(event, junk))
def test_ingest(store, ev) -> None:
    if isinstance(ev, dict) and "id" in ev and isinstance(ev["id"], str):
        ev = dict(ev, id=ev["id"] + uuid.uuid4().hex)  # a repeated id would be skipped, not processed
    # Accepted events are processed in the background: the module fixture checks that every
    # one was processed without a dead letter and that the store verifies.
    works_or_refuses(store, lambda: store.ingest(ev), changes_nothing_on_error=False)


# Once bugs (TypeError, AttributeError, UnicodeEncodeError escaped validation), now refused.
BAD = {
    "add_many(None)": lambda m: m.add_many(None),
    "add_many(42)": lambda m: m.add_many(42),
    "postprocess(candidates=None)": lambda m: m.postprocess("q", None),
    "postprocess(mmr=[0.5])": lambda m: m.postprocess("q", [Candidate("m1", "t")], mmr=[0.5]),
    "postprocess(expand='x')": lambda m: m.postprocess("q", [Candidate("m1", "t")], expand="x"),
    "add(pinned=bytes)": lambda m: m.add("pinned bytes", user_id="alice", pinned=b"x"),
    "add(pinned=lone surrogate)": lambda m: m.add("pinned text", user_id="alice", pinned="\ud800"),
    "update(pinned=set)": lambda m: m.update("m2", pinned={1, 2}),
    "update(processed_content=tuple)": lambda m: m.update("m1", processed_content=("text",)),
    "update(processed_content=str)": lambda m: m.update("m1", processed_content="text"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_inputs_are_refused(store, case: str) -> None:
    assert not works_or_refuses(store, lambda: BAD[case](store))


# -- the LangChain face ------------------------------------------------------------------------------
@FACES
@given(query=maybe(texts), k=st.one_of(st.none(), junk), user_id=maybe(words), flt=filters,
       expand=st.one_of(st.booleans(), junk), mmr=junk)
def test_langchain_retriever_invoke(store, query, k, user_id, flt, expand, mmr) -> None:
    from pydantic import ValidationError

    from beeweave_langchain import BeeWeaveRetriever

    try:  # the constructor is pydantic: a field of the wrong type is LangChain's usual ValidationError
        retriever = BeeWeaveRetriever(memory=store, user_id=user_id, filters=flt, expand=expand, mmr=mmr)
    except ValidationError:
        return
    works_or_refuses(store, lambda: retriever.invoke(query, **({} if k is None else {"k": k})),
                     changes_nothing_on_error=False)


@FACES
@given(md=junk, inputs=junk, outputs=junk, docs=junk, action=junk, error=junk)
def test_langchain_callbacks_never_raise(store, md, inputs, outputs, docs, action, error) -> None:
    """Whatever LangChain (or a broken chain) hands the callbacks, the run never sees an error."""
    from beeweave_langchain import BeeWeaveCallbackHandler

    handler = BeeWeaveCallbackHandler(store, user_id="alice")
    root, nested_run = uuid.uuid4(), uuid.uuid4()
    handler.on_chain_start(md, inputs, run_id=root, metadata=md)
    handler.on_tool_start(md, inputs, run_id=nested_run, parent_run_id=root, inputs=md)
    handler.on_agent_action(action, run_id=nested_run, parent_run_id=root)
    handler.on_tool_end(outputs, run_id=nested_run, parent_run_id=root)
    handler.on_tool_error(error, run_id=nested_run, parent_run_id=root)
    handler.on_retriever_start(md, inputs, run_id=nested_run, parent_run_id=root, metadata=md)
    handler.on_retriever_end(docs, run_id=nested_run, parent_run_id=root)
    handler.on_chain_end(outputs, run_id=root, inputs=inputs)
    handler.on_chain_error(error, run_id=root)
    works_or_refuses(store, lambda: handler.feedback(root, md), changes_nothing_on_error=False)


str_keys = st.dictionaries(st.one_of(words, st.sampled_from(["input", "output", "question", "stop"])), junk,
                           min_size=1, max_size=3)


@FACES
@given(inputs=str_keys, outputs=str_keys, window=st.integers(0, 3))
def test_langchain_memory(store, inputs, outputs, window) -> None:
    from beeweave_langchain import BeeWeaveMemory

    mem = BeeWeaveMemory(memory=store, user_id="alice", input_key="input", output_key="output", window=window)
    works_or_refuses(store, lambda: mem.load_memory_variables(inputs), changes_nothing_on_error=False)
    works_or_refuses(store, lambda: mem.save_context(inputs, outputs), changes_nothing_on_error=False)


LC_BAD = {  # once plain ValueError / TypeError, now InvalidInputError (still a ValueError)
    "memory: no input key to guess": lambda m: _lc_memory(m).load_memory_variables({}),
    "memory: two outputs to guess from": lambda m: _lc_memory(m).save_context({"input": "hi"}, {"a": "1", "b": "2"}),
    "memory: inputs that are not a dict": lambda m: _lc_memory(m).load_memory_variables(None),
    "memory: outputs that are not a dict": lambda m: _lc_memory(m).save_context({"input": "hi"}, ["an answer"]),
    "callbacks: feedback for a run id that is not a UUID": lambda m: _lc_handler(m).feedback("not-a-uuid", "up"),
}


def _lc_memory(m):
    from beeweave_langchain import BeeWeaveMemory

    return BeeWeaveMemory(memory=m, user_id="alice")


def _lc_handler(m):
    from beeweave_langchain import BeeWeaveCallbackHandler

    return BeeWeaveCallbackHandler(m, user_id="alice")


@pytest.mark.parametrize("case", sorted(LC_BAD))
def test_langchain_bad_inputs_are_refused(store, case: str) -> None:
    assert not works_or_refuses(store, lambda: LC_BAD[case](store))  # refused, and nothing changed
    with pytest.raises(ValueError):  # InvalidInputError is a ValueError, as LangChain callers expect
        LC_BAD[case](store)


# -- the LlamaIndex face -----------------------------------------------------------------------------
@FACES
@given(query=maybe(texts), k=maybe(st.integers(0, 10)), user_id=maybe(words), mmr=junk,
       expand=st.one_of(st.booleans(), junk))
def test_llamaindex_retriever_retrieve(store, query, k, user_id, mmr, expand) -> None:
    from beeweave_llamaindex import BeeWeaveRetriever

    # LlamaIndex itself types retrieve()'s argument (str or QueryBundle) and refuses others first.
    assume(isinstance(query, str))
    retriever = BeeWeaveRetriever(store, similarity_top_k=k, user_id=user_id, mmr=mmr, expand=expand)
    works_or_refuses(store, lambda: retriever.retrieve(query), changes_nothing_on_error=False)


def _nodes():
    from llama_index.core.schema import NodeWithScore, TextNode

    meta = st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=5), st.integers()), max_size=2)
    return st.lists(st.builds(lambda i, t, s, md: NodeWithScore(node=TextNode(id_=i, text=t, metadata=md), score=s),
                              st.one_of(st.sampled_from([f"m{i}" for i in range(30)]), texts), texts,
                              st.one_of(st.none(), st.floats(allow_nan=True)), meta), max_size=4)


@FACES
@given(data=st.data(), query=st.one_of(st.none(), texts), user_id=maybe(words), mmr=st.one_of(st.none(), st.floats()),
       expand=st.booleans(), top_n=st.one_of(st.none(), st.integers(-2, 5)))
def test_llamaindex_postprocessor(store, data, query, user_id, mmr, expand, top_n) -> None:
    from pydantic import ValidationError

    from beeweave_llamaindex import BeeWeaveNodePostprocessor

    nodes = data.draw(_nodes())
    try:  # pydantic fields: a value of the wrong type is LlamaIndex's usual ValidationError
        post = BeeWeaveNodePostprocessor(store, user_id=user_id, mmr=mmr, expand=expand, top_n=top_n)
    except ValidationError:
        return
    works_or_refuses(store, lambda: post.postprocess_nodes(nodes, query_str=query), changes_nothing_on_error=False)


@FACES
@given(contents=st.lists(texts, max_size=4))
def test_llamaindex_memory_block(store, contents) -> None:
    from llama_index.core.base.llms.types import ChatMessage

    from beeweave_llamaindex import BeeWeaveMemoryBlock

    block = BeeWeaveMemoryBlock(store, user_id="alice")
    messages = [ChatMessage(role=r, content=t) for r, t in zip(["user", "assistant", "tool", "user"], contents)]
    works_or_refuses(store, lambda: asyncio.run(block.aget(messages)), changes_nothing_on_error=False)
    works_or_refuses(store, lambda: asyncio.run(block.aput(messages)), changes_nothing_on_error=False)


def _faces_with_a_bad_mmr(m: BeeWeave) -> dict[str, Any]:
    from llama_index.core.base.llms.types import ChatMessage

    from beeweave_langchain import BeeWeaveMemory, BeeWeaveRetriever
    from beeweave_llamaindex import BeeWeaveMemoryBlock
    from beeweave_llamaindex import BeeWeaveRetriever as LIRetriever

    lc_memory = BeeWeaveMemory(memory=m, user_id="alice", input_key="input", search_kwargs={"mmr": 5})
    block = BeeWeaveMemoryBlock(m, user_id="alice", similarity_top_k=-1)
    return {"lc_retriever": (BeeWeaveRetriever(memory=m, user_id="alice", mmr=5), lambda r: r.invoke("deploy")),
            "lc_memory": (lc_memory, lambda mem: mem.load_memory_variables({"input": "deploy"})),
            "li_retriever": (LIRetriever(m, user_id="alice", mmr=5), lambda r: r.retrieve("deploy")),
            "li_memory_block": (block, lambda b: asyncio.run(b.aget([ChatMessage(role="user", content="deploy")])))}


@pytest.mark.parametrize("face", ["lc_retriever", "lc_memory", "li_retriever", "li_memory_block"])
def test_faces_degrade_on_outages_only_bad_input_still_raises(store, face: str) -> None:
    """The faces answer without memories when the store is unavailable (test_outages.py);
    a caller's mistake is not an outage: it raises and is not counted as one."""
    obj, call = _faces_with_a_bad_mmr(store)[face]
    with pytest.raises(InvalidInputError):
        call(obj)
    assert obj.errors == 0


# -- fixed hostile cases -------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["add", "update", "ingest", "ingest_step", "search_filter"])
def test_metadata_nested_ten_thousand_deep_is_a_clean_error(store, where: str) -> None:
    deep = nested(10_000)
    calls = {
        "add": lambda: store.add("deep metadata", user_id="alice", metadata=deep),
        "update": lambda: store.update("m1", metadata=deep),
        "ingest": lambda: store.ingest({"user_id": "alice", "query": "q?", "response": "r.", "metadata": deep}),
        "ingest_step": lambda: store.ingest({"user_id": "alice", "query": "q?", "response": "r.",
                                             "intermediate_steps": [{"tool": "t", "output": deep}]}),
        "search_filter": lambda: store.search("deep", filters={"tags": [deep]}),
    }
    with pytest.raises(InvalidInputError):
        calls[where]()


@pytest.mark.parametrize("text", SQL)
def test_sql_looking_text_is_stored_and_found_verbatim(text: str) -> None:
    with BeeWeave(embedder=HashingEmbedder(32)) as m:
        cid = m.add(f"remember {text} as written", user_id=text, session_id=text, tags=[text], chunk_id=text,
                    metadata={text: text})
        assert m.get(cid).raw_content == f"remember {text} as written"
        hits = m.search(f"remember {text}", user_id=text, filters={"tags": [text], "session_id": text})
        assert [h.id for h in hits] == [text]
        assert m.search("remember", user_id=text + "x") == []
        assert_verified(m)


class PrefixHashing(HashingEmbedder):
    """The hashing embedder on the first 2,000 characters (a real model truncates too; hashing
    every trigram of 10 MB would take minutes and test nothing about the store)."""

    def embed_documents(self, texts):
        return super().embed_documents([t[:2000] for t in texts])

    def embed_query(self, text):
        return super().embed_query(text[:2000])


@pytest.mark.slow
def test_ten_megabyte_texts(tmp_path) -> None:
    rng = np.random.default_rng(0)
    big = " ".join(rng.choice(WORDS, size=1_700_000).tolist())[:10_000_000]
    assert len(big) == 10_000_000
    with BeeWeave(tmp_path / "big.db", embedder=PrefixHashing(32), ingest=IngestConfig()) as m:
        cid = m.add(big, user_id="alice")
        assert m.get(cid).raw_content == big
        assert m.search(big[:200], user_id="alice", k=1)[0].id == cid
        with pytest.raises(BeeWeaveError):  # an event is bounded (IngestConfig.max_event_chars)
            m.ingest({"user_id": "alice", "query": "big?", "response": big})
        assert_verified(m)
    with BeeWeave(tmp_path / "big.db", embedder=PrefixHashing(32)) as m:
        assert m.get(cid).raw_content == big


def test_strings_with_nul_and_lone_surrogates_at_every_field() -> None:
    with BeeWeave(embedder=HashingEmbedder(32)) as m:
        for bad in ("\ud800", "a\udfffb"):
            # Each lambda binds this iteration's value as a default: called at once, and says so.
            for call in (lambda bad=bad: m.add(bad, user_id="u"), lambda bad=bad: m.add("ok", user_id=bad),
                         lambda bad=bad: m.add("ok", user_id="u", tags=[bad]),
                         lambda bad=bad: m.add("ok", user_id="u", metadata={bad: 1}),
                         lambda bad=bad: m.search(bad), lambda bad=bad: m.ingest({"user_id": "u", "query": bad})):
                with pytest.raises(InvalidInputError):
                    call()
        with pytest.raises(InvalidInputError, match="control characters"):  # a user id would alias another's keys
            m.add("ok", user_id="u\x00v")
        cid = m.add("nul \x00 inside", user_id="v", tags=["t\x00"], session_id="s\x00")  # SQLite keeps NUL as written
        got = m.get(cid)
        assert (got.raw_content, got.tags, got.session_id) == ("nul \x00 inside", ["t\x00"], "s\x00")
        assert m.search("nul inside", user_id="v")[0].id == cid and m.search("nul inside", user_id="u") == []
        assert_verified(m)
