"""examples/knowledge_events.jsonl: sample input for ``beeweave ingest`` with KnowledgeEvent's
real field names, ingested through the CLI (issue 46, item 7)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from beeweave_core import BeeWeave
from beeweave_core.cli import main
from beeweave_core.filters import build_filter
from beeweave_core.ingest.knowledge_events import KnowledgeEvent
from beeweave_core.ingest.validate import ALIASES
from tests.service.service_support import EMBEDDER

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "knowledge_events.jsonl"


def test_the_example_uses_knowledge_events_fields_and_is_documented() -> None:
    fields = {f.name for f in dataclasses.fields(KnowledgeEvent)} | set(ALIASES)
    lines = [json.loads(line) for line in EXAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(lines) >= 3
    for record in lines:
        assert set(record) <= fields, set(record) - fields
    assert "examples/knowledge_events.jsonl" in (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


def test_the_example_ingests_through_the_cli(tmp_path: Path, capsys) -> None:
    store = tmp_path / "s.db"
    assert main(["--store", str(store), "--embedder", EMBEDDER, "ingest", str(EXAMPLE)]) == 0
    assert "queued 5 event(s)" in capsys.readouterr().out
    with BeeWeave(store, embedder=EMBEDDER) as memory:
        stored = list(memory.backend.scan(build_filter(None)))
        assert {c.user_id for c in stored} == {"alice", "bob"}
        assert {c.id.rpartition("@")[0] for c in stored} == {"ex-deploy", "ex-logs", "ex-allergy", "ex-offsite", "ex-budget"}
        [hit, *_] = memory.search("peanut allergy", user_id="alice", k=3)
        assert hit.chunk.id.startswith("ex-allergy") and hit.chunk.pinned
