"""``BeeWeave.warm_up()`` loads the embedding model (and jieba) before the first search, once;
the REST server and ``beeweave mcp`` call it at start (issue 46, item 9)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from beeweave_core import BeeWeave
from beeweave_core.embedders import HashingEmbedder

LOAD = 0.3  # seconds a "model load" takes


class SlowFirstEmbedder(HashingEmbedder):
    """The hashing embedder, named as it is, whose first call pays a model load."""

    def __init__(self) -> None:
        super().__init__(64)
        self.loads = 0
        self.queries = 0

    def _load(self) -> None:
        if not self.loads:
            time.sleep(LOAD)
            self.loads += 1

    def embed_documents(self, texts: Any) -> np.ndarray:
        self._load()
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        self._load()
        self.queries += 1
        return super().embed_query(text)


class WarmableEmbedder(SlowFirstEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.warm_ups = 0

    def warm_up(self) -> None:
        self.warm_ups += 1
        self._load()


def test_warm_up_loads_the_model_once_and_is_cheap_when_warm(tmp_path: Path) -> None:
    emb = SlowFirstEmbedder()
    with BeeWeave(tmp_path / "m.db", embedder=emb) as memory:
        took = memory.warm_up()
        assert took >= LOAD and emb.loads == 1 and emb.queries == 1  # no warm_up(): one query embedding
        assert memory.tokenizer._jieba is not None  # the default tokenizer segments Chinese: jieba is loaded
        t0 = time.perf_counter()
        assert memory.warm_up() == 0.0 and emb.queries == 1
        assert time.perf_counter() - t0 < 0.01
        t0 = time.perf_counter()
        memory.search("anything", user_id="alice")
        assert time.perf_counter() - t0 < LOAD  # the first search no longer pays the load


def test_warm_up_uses_the_embedders_own(tmp_path: Path) -> None:
    emb = WarmableEmbedder()
    with BeeWeave(tmp_path / "m.db", embedder=emb) as memory:
        memory.warm_up()
        memory.warm_up()
        assert emb.warm_ups == 1 and emb.queries == 0


def test_the_rest_server_warms_up_at_start(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from beeweave_core.server import ServerConfig, create_app

    emb = WarmableEmbedder()
    app = create_app(ServerConfig(tmp_path, {"acme-key-0123": "acme"}, embedder=emb))
    with TestClient(app):
        assert emb.warm_ups == 1  # at start, before any request


def test_beeweave_mcp_warms_up_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mcp")
    import beeweave_core.mcp.server as mcp_server
    import beeweave_core.server.stores as stores
    from beeweave_core.cli import build_parser
    from beeweave_core.mcp.cli import run

    emb = WarmableEmbedder()
    seen: list[int] = []
    monkeypatch.setattr(stores, "open_memory", lambda store, **kw: BeeWeave(store, embedder=emb))
    monkeypatch.setattr(mcp_server, "build_server", lambda memory, **kw: SimpleNamespace(
        run=lambda transport: seen.append(emb.warm_ups)))
    args = build_parser().parse_args(["--store", str(tmp_path / "m.db"), "mcp"])
    assert run(args) == 0
    assert seen == [1]  # warm before the server ran
