"""``beeweave ingest`` takes events in the design document's own shape: ``agent_response`` for
the answer and ``ttl`` for the expiry are event keys, not a sign that the file is a document."""

from __future__ import annotations

import json

from beeweave_core import BeeWeave
from beeweave_core.cli import main
from beeweave_core.filters import build_filter
from beeweave_core.ingest.validate import looks_like_event
from tests.service.service_support import EMBEDDER

DESIGN_EVENTS = [
    {"user_id": "alice", "session_id": "s1", "query": "Where do the staging logs go?",
     "agent_response": "Staging logs go to Loki, dashboard ops/staging.", "metadata": {"tags": ["ops"]}},
    {"user_id": "alice", "query": "What is today's on-call number?", "agent_response": "The on-call number is 555-0100.",
     "ttl": 86400},
]


def test_events_in_the_designs_shape_are_ingested_as_events(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "design.jsonl").write_text("\n".join(json.dumps(e) for e in DESIGN_EVENTS) + "\n")
    # No --user-id: a file taken for documents would be refused for want of one.
    assert main(["--store", "m.db", "--embedder", EMBEDDER, "ingest", "design.jsonl"]) == 0
    assert "queued 2 event(s)" in capsys.readouterr().out
    with BeeWeave(tmp_path / "m.db") as m:
        stored = {c.raw_content: c for c in m.backend.scan(build_filter(None, user_id="alice"))}
    logs = stored["Where do the staging logs go?\n\nStaging logs go to Loki, dashboard ops/staging."]
    assert "ops" in logs.tags
    on_call = stored["What is today's on-call number?\n\nThe on-call number is 555-0100."]
    assert on_call.expires_at is not None and (on_call.expires_at - on_call.timestamp).total_seconds() == 86400


def test_a_record_that_says_nothing_or_has_other_keys_is_not_an_event() -> None:
    assert looks_like_event(DESIGN_EVENTS[1])
    assert not looks_like_event({"user_id": "alice", "ttl": 60})  # nothing said
    assert not looks_like_event({"question": "q", "answer": "a"})  # an FAQ record: a document
    assert not looks_like_event(["query", "agent_response"])
