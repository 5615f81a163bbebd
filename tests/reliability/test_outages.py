"""Outages: the store is locked by another process, the database is down, or the server
is unreachable. The LangChain callback, retriever and memory and the LlamaIndex retriever
and memory block must degrade gracefully — the agent keeps answering; what could not be
done is logged as a warning and counted (``errors``), or done later — and work again once
the store is back.

The outages are real: a second SQLite connection holds ``BEGIN EXCLUSIVE`` on the store's
file; PostgreSQL and the REST server are reached through a TCP proxy on 127.0.0.1 that
the test takes down (every connection cut, the port refused) and brings back.

What does not degrade gracefully yet is marked ``xfail(strict=True)`` with the reason, so
the gap stays visible and the mark must go when it is fixed.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.ingest import IngestConfig
from beeweave_core.store.sqlite import SQLiteStore
from tests.reliability.outage_support import Proxy, pg_proxy_url, warnings_from_beeweave
from tests.reliability.rel_support import all_chunks

pytestmark = pytest.mark.slow

FACT = "The staging database listens on port 5433."
QUESTION = "Which port does the staging database listen on?"


@dataclass
class Outage:
    name: str
    memory: Any  # a BeeWeave or a BeeWeaveClient
    down: Callable[[], None]
    up: Callable[[], None]
    closers: list[Callable[[], None]] = field(default_factory=list)

    def stored_texts(self, user: str = "alice") -> list[str]:
        if isinstance(self.memory, BeeWeave):
            return [c.raw_content for c in all_chunks(self.memory.backend).values() if c.user_id == user]
        return [c["raw_content"] for c in self.memory.export_user(user)["chunks"]]

    def let_the_worker_try(self) -> None:
        """Keep the outage until the ingest worker has tried what was queued (a local store):
        until nothing waits, or every waiting event has had an attempt (it is retried later)."""
        if isinstance(self.memory, BeeWeave):
            from beeweave_core import StoreUnavailableError

            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                try:
                    if not self.memory.pending_events() or self._all_tried():
                        break
                except StoreUnavailableError:
                    break  # the queue lives in the store that is down (PostgreSQL): nothing to try
                time.sleep(0.05)

    def _all_tried(self) -> bool:
        runtime = self.memory.parts.ingestion.runtime
        waiting = runtime.queue().take(10_000)
        return bool(waiting) and all(e.attempts for e in waiting)

    def settle(self) -> None:
        """After ``up()``: wait until the store answers again (pools reconnect), then drain the queue."""
        deadline = time.monotonic() + 20
        while True:
            try:
                self.memory.search("port", user_id="alice")
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.memory.flush(30)


def _locked(tmp_path: Path) -> Outage:
    db = tmp_path / "memory.db"
    memory = BeeWeave(backend=SQLiteStore(db, timeout=0.3), embedder=HashingEmbedder(32), ingest=IngestConfig())
    memory.add(FACT, user_id="alice")
    holder = sqlite3.connect(db, isolation_level=None)

    def down() -> None:
        holder.execute("BEGIN EXCLUSIVE")

    def up() -> None:
        holder.execute("ROLLBACK")

    return Outage("store locked", memory, down, up, [holder.close, memory.close])


def _pg_down(tmp_path: Path) -> Outage:
    from beeweave_core.store.postgres import PostgresStore
    from tests.postgres.pg_support import fresh_schema, schema_url, server_url

    base = server_url()
    proxy = Proxy(pg_proxy_url(base, 0)[1])
    schema_cm = fresh_schema("outage")
    schema = schema_cm.__enter__()
    url = schema_url(pg_proxy_url(base, proxy.port)[0], schema)
    memory = BeeWeave(backend=PostgresStore(url, tenant="t", timeout=1.0), embedder=HashingEmbedder(32),
                      ingest=IngestConfig(queue_path=tmp_path / "pg.queue"))
    memory.add(FACT, user_id="alice")
    return Outage("database down", memory, proxy.down, proxy.up,
                  [memory.close, proxy.close, lambda: schema_cm.__exit__(None, None, None)])


def _unreachable(tmp_path: Path) -> Outage:
    from beeweave_core.client import BeeWeaveClient
    from beeweave_core.server import ServerConfig
    from tests.service.service_support import start_server

    live = start_server(ServerConfig(tmp_path / "tenants", {"outage-key-01": "acme"}, embedder="beeweave:hashing-32"))
    proxy = Proxy(("127.0.0.1", int(live.url.rsplit(":", 1)[1])))
    client = BeeWeaveClient(f"http://127.0.0.1:{proxy.port}", "outage-key-01", timeout=5)
    client.ingest({"user_id": "alice", "query": QUESTION, "response": FACT})
    assert client.flush(20)
    return Outage("server unreachable", client, proxy.down, proxy.up, [client.close, proxy.close, live.stop])


OUTAGES = {"locked": _locked, "pg_down": _pg_down, "unreachable": _unreachable}


@pytest.fixture
def outage(request, tmp_path: Path) -> Iterator[Outage]:
    o = OUTAGES[request.param](tmp_path)
    yield o
    for close in o.closers:
        try:
            close()
        except Exception:  # the others still close
            logging.getLogger(__name__).exception("closing %s", o.name)


# -- what the agent does with each component, during the outage and after it ---------------------------
def lc_callback(o: Outage, tag: str) -> tuple[str, Any]:
    from langchain_core.runnables import RunnableLambda

    from beeweave_langchain import BeeWeaveCallbackHandler

    handler = BeeWeaveCallbackHandler(o.memory, user_id="alice")
    chain = RunnableLambda(lambda q: f"Port 5433, as remembered ({tag}).")
    answer = chain.invoke(f"{QUESTION} ({tag})", config={"callbacks": [handler]})
    return answer, handler


def lc_retriever(o: Outage, tag: str) -> tuple[str, Any]:
    from beeweave_langchain import BeeWeaveRetriever

    retriever = BeeWeaveRetriever(memory=o.memory, user_id="alice")
    docs = retriever.invoke(QUESTION)
    return " ".join(d.page_content for d in docs) or "I do not remember.", retriever


def lc_memory(o: Outage, tag: str) -> tuple[str, Any]:
    from beeweave_langchain import BeeWeaveMemory

    mem = BeeWeaveMemory(memory=o.memory, user_id="alice", input_key="input", output_key="output")
    context = mem.load_memory_variables({"input": QUESTION})["history"]
    mem.save_context({"input": f"{QUESTION} ({tag})"}, {"output": f"Port 5433 ({tag})."})
    return context or "no context", mem


def li_retriever(o: Outage, tag: str) -> tuple[str, Any]:
    from beeweave_llamaindex import BeeWeaveRetriever

    retriever = BeeWeaveRetriever(o.memory, user_id="alice")
    nodes = retriever.retrieve(QUESTION)
    return " ".join(n.node.get_content() for n in nodes) or "I do not remember.", retriever


def li_memory_block(o: Outage, tag: str) -> tuple[str, Any]:
    from llama_index.core.base.llms.types import ChatMessage

    from beeweave_llamaindex import BeeWeaveMemoryBlock

    block = BeeWeaveMemoryBlock(o.memory, user_id="alice")
    context = asyncio.run(block.aget([ChatMessage(role="user", content=QUESTION)]))
    asyncio.run(block.aput([ChatMessage(role="user", content=f"{QUESTION} ({tag})"),
                            ChatMessage(role="assistant", content=f"Port 5433 ({tag}).")]))
    return context or "no context", block


COMPONENTS = {"lc_callback": lc_callback, "lc_retriever": lc_retriever, "lc_memory": lc_memory,
              "li_retriever": li_retriever, "li_memory_block": li_memory_block}
WRITES = {"lc_callback", "lc_memory", "li_memory_block"}  # these hand the turn to ingest

KNOWN: dict[tuple[str, str], str] = {  # (outage, component): why it does not degrade gracefully yet
}
CASES = [pytest.param(o, c, id=f"{o}-{c}",
                      marks=[pytest.mark.xfail(strict=True, reason=KNOWN[(o, c)])] if (o, c) in KNOWN else [])
         for o in OUTAGES for c in COMPONENTS]


@pytest.mark.parametrize("outage,component", CASES, indirect=["outage"])
def test_degrades_gracefully_and_recovers(outage: Outage, component: str, caplog) -> None:
    run = COMPONENTS[component]
    caplog.set_level(logging.WARNING)
    tag = uuid.uuid4().hex[:8]

    outage.down()
    try:
        answer, obj = run(outage, tag)  # must not raise: the agent keeps answering
        assert answer
        failed = getattr(obj, "errors", 0)
        degraded = "5433" not in answer and component not in WRITES
        if degraded or failed:
            assert failed >= 1, "a degraded call must be counted"
            assert warnings_from_beeweave(caplog), "a degraded call must be logged as a warning"
        outage.let_the_worker_try()
    finally:
        outage.up()

    outage.settle()
    answer, obj = run(outage, tag + "-after")
    assert "5433" in answer
    assert getattr(obj, "errors", 0) == 0
    if component in WRITES:
        outage.memory.flush(30)
        texts = " ".join(outage.stored_texts())
        assert f"({tag}-after)" in texts  # recovered: a turn after the outage is stored
        # The turn given during the outage is stored now, or it was counted as failed above.
        assert f"({tag})" in texts or failed >= 1


# -- the engine itself on a locked store ------------------------------------------------------------------
@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Outage]:
    o = _locked(tmp_path)
    o.down()
    yield o
    o.up()
    for close in o.closers:
        close()


def test_reads_go_on_while_another_process_holds_the_write_lock(locked: Outage) -> None:
    m = locked.memory
    assert [h.chunk.raw_content for h in m.search(QUESTION, user_id="alice")] == [FACT]
    assert m.count() == 1 and m.trace("none", user_id="alice") == []


@pytest.mark.parametrize("write", ["add", "feedback", "update", "delete", "flush"])
def test_writes_on_a_locked_store_raise_store_unavailable(locked: Outage, write: str) -> None:
    from beeweave_core import StoreUnavailableError

    m = locked.memory
    cid = next(iter(all_chunks(m.backend)))
    m.search(QUESTION, user_id="alice")  # an access waits to be written: flush() must write it
    calls = {"add": lambda: m.add("more", user_id="alice"), "feedback": lambda: m.feedback(cid, "up"),
             "update": lambda: m.update(cid, tags=["x"]), "delete": lambda: m.delete(cid), "flush": m.flush}
    with pytest.raises(StoreUnavailableError):
        calls[write]()
