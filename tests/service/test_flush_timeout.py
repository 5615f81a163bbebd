"""POST /flush caps a long wait at ServerConfig.max_flush_timeout instead of refusing it, and
the clients' flush(timeout) waits the caller's whole timeout over as many calls as it takes.
Also: forgetting a user with no data is a 200 with "deleted": 0 (an erasure can be retried)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from beeweave_core import HashingEmbedder
from beeweave_core.async_client import AsyncBeeWeaveClient
from beeweave_core.errors import ModelLoadError
from beeweave_core.ingest import IngestConfig
from beeweave_core.server import ServerConfig
from tests.service.service_support import ACME_KEY, KEYS, LiveServer, event, start_server

pytestmark = pytest.mark.slow

MAX_FLUSH = 0.5  # the server's max_flush_timeout here: far below the timeouts the tests ask for


class GatedModel(HashingEmbedder):
    """Cannot embed documents while ``ready`` is clear (a model still loading): the ingest
    worker keeps the events queued and retries, so the queue does not drain until it is set."""

    def __init__(self) -> None:
        super().__init__(64)
        self.ready = threading.Event()
        self.ready.set()

    def embed_documents(self, texts):
        if not self.ready.is_set():
            raise ModelLoadError("the model is not loaded yet (simulated)")
        return super().embed_documents(texts)


@pytest.fixture(scope="module")
def model() -> GatedModel:
    return GatedModel()


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, model: GatedModel) -> Iterator[LiveServer]:
    s = start_server(ServerConfig(tmp_path_factory.mktemp("flush"), KEYS, embedder=model, max_flush_timeout=MAX_FLUSH,
                                  memory_kwargs={"ingest": IngestConfig(retry_max_delay=0.2)}))
    yield s
    model.ready.set()
    s.stop()


@pytest.fixture
def stuck(srv: LiveServer, model: GatedModel) -> Iterator[GatedModel]:
    """The model is not ready for the test; after it, it is, and the queue is drained."""
    model.ready.clear()
    try:
        yield model
    finally:
        model.ready.set()
        with srv.http(ACME_KEY) as h:
            assert h.post("/api/v1/flush", params={"timeout": 20}).json()["drained"]


def test_a_long_flush_is_capped_not_refused(srv, stuck):
    with srv.http(ACME_KEY) as h:
        assert h.post("/api/v1/ingest", json=event("ann", "Where is the spare key?", "Under the mat.")).status_code == 202
        t0 = time.monotonic()
        r = h.post("/api/v1/flush", params={"timeout": 600})
        took = time.monotonic() - t0
        assert r.status_code == 200, r.text
        assert r.json() == {"drained": False, "pending": 1}  # it says the truth: not drained
        assert MAX_FLUSH - 0.05 <= took < MAX_FLUSH + 3
        for bad in (-1, "nan", "soon"):
            assert h.post("/api/v1/flush", params={"timeout": bad}).status_code == 422, bad
        stuck.ready.set()
        r = h.post("/api/v1/flush", params={"timeout": 600})
        assert r.status_code == 200 and r.json() == {"drained": True, "pending": 0}


def test_client_flush_longer_than_the_servers_cap(srv):
    with srv.client(ACME_KEY) as c:
        c.ingest(event("ann", "Which bus goes downtown?", "The 42 goes downtown."))
        assert c.flush(3 * MAX_FLUSH) is True
        assert c.flush(0) is True


def test_client_flush_waits_the_whole_timeout_then_says_false(srv, stuck):
    with srv.client(ACME_KEY) as c:
        c.ingest(event("ann", "What is the wifi password?", "The wifi password is on the fridge."))
        t0 = time.monotonic()
        assert c.flush(4 * MAX_FLUSH) is False  # not InvalidInputError, and not after one capped call
        took = time.monotonic() - t0
        assert 4 * MAX_FLUSH - 0.05 <= took < 4 * MAX_FLUSH + 3
        # The queue drains while flush is in its third or so call to the server: it keeps calling.
        timer = threading.Timer(2.5 * MAX_FLUSH, stuck.ready.set)
        timer.start()
        try:
            t0 = time.monotonic()
            assert c.flush(10) is True
            assert 2.5 * MAX_FLUSH - 0.05 <= time.monotonic() - t0 < 8
        finally:
            timer.cancel()


def test_async_client_flush_longer_than_the_servers_cap(srv, stuck):
    async def run() -> None:
        async with AsyncBeeWeaveClient(srv.url, ACME_KEY) as c:
            await c.ingest(event("ann", "When is the bin collected?", "The bin goes out on Tuesdays."))
            t0 = asyncio.get_running_loop().time()
            assert await c.flush(3 * MAX_FLUSH) is False
            assert 3 * MAX_FLUSH - 0.05 <= asyncio.get_running_loop().time() - t0 < 3 * MAX_FLUSH + 3
            asyncio.get_running_loop().call_later(1.5 * MAX_FLUSH, stuck.ready.set)
            assert await c.flush(10) is True

    asyncio.run(run())


def test_forgetting_a_user_with_no_data_is_200_and_idempotent(srv):
    with srv.http(ACME_KEY) as h:
        assert h.get("/api/v1/users/nobody-at-all/export").status_code == 404
        for _ in range(2):
            r = h.delete("/api/v1/users/nobody-at-all")
            assert r.status_code == 200 and r.json() == {"user_id": "nobody-at-all", "deleted": 0}
    with srv.client(ACME_KEY) as c:
        assert c.forget_user("nobody-at-all") == 0


def test_a_request_timeout_above_the_servers_wait(srv, stuck, monkeypatch):
    """Each call's HTTP timeout stays above what it asks the server to wait."""
    seen: list[tuple[float, float]] = []
    real = httpx.Client.request

    def spy(self, method, url, **kw):
        if str(url).endswith("/flush"):
            seen.append((float(kw["params"]["timeout"]), float(kw["timeout"])))
        return real(self, method, url, **kw)

    monkeypatch.setattr(httpx.Client, "request", spy)
    with srv.client(ACME_KEY) as c:
        c.ingest(event("ann", "Where do the spoons go?", "The spoons go in the top drawer."))
        assert c.flush(3 * MAX_FLUSH) is False
    assert len(seen) >= 2 and all(asked <= 3 * MAX_FLUSH and http > asked for asked, http in seen)
