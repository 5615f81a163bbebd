"""Search latency statistics leave out the embedding model's first load (recorded apart):
a few searches in a fresh process, as the CLI makes them, must not show seconds of p50
(issue 46, item 3)."""

from __future__ import annotations

from pathlib import Path

from beeweave_core import BeeWeave
from beeweave_core.cli_format import format_stats
from beeweave_core.server.service import MemoryService
from tests.test_warm_up import LOAD, SlowFirstEmbedder


def test_stats_exclude_the_models_first_load(tmp_path: Path) -> None:
    with BeeWeave(tmp_path / "m.db", embedder=SlowFirstEmbedder()) as memory:
        memory.add("The team hotel is next to the conference centre.", user_id="alice")
    for _ in range(3):  # three `beeweave search` processes: each loads the model once
        svc = MemoryService(BeeWeave(tmp_path / "m.db", embedder=SlowFirstEmbedder()))
        try:
            for query in ("hotel", "conference hotel"):
                assert svc.search(query, user_id="alice", k=5)
        finally:
            svc.close()
    svc = MemoryService(BeeWeave(tmp_path / "m.db", embedder=SlowFirstEmbedder()))
    try:
        stats = svc.stats().to_dict()
    finally:
        svc.close()
    assert stats["latency"]["count"] == 6
    assert stats["latency"]["max"] < LOAD * 1000 / 2, stats["latency"]  # no model load in any search's time
    assert stats["model_loads"] == 3 and stats["model_load_ms"] >= LOAD * 1000  # shown apart
    assert "the model's first load, apart" in format_stats(stats)
