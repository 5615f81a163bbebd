"""examples/mcp_client.py: the SDK's client drives ``beeweave mcp`` over stdio."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("mcp")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mcp_client.py"


def test_the_mcp_client_example_saves_searches_and_reads_recent(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("mcp_client", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.main(tmp_path / "m.db", embedder="beeweave:hashing-64")
    assert "save_memory" in out["tools"] and "search_memory" in out["tools"]
    assert out["found"][0] == "Alice is allergic to peanuts."
    assert sorted(out["recent"]) == ["Alice drinks oolong tea.", "Alice is allergic to peanuts."]  # not bob's
