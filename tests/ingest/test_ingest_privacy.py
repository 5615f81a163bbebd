"""Personal data never reaches the embedder, nor any file the store writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.ingest import IngestConfig, KnowledgeEvent, PiiPattern, ToolCall
from tests.ingest.ingest_support import everything
from tests.support import Recording

PII = ["alice.smith@example.com", "13812345678", "4111 1111 1111 1111", "4111111111111111",
       "11010519491231002X", "192.168.13.37", "sk-proj-Zx8Qp2LmN4vR7tY1wK9sD3fG6h", "EMP-884422",
       "hunter2-pass"]


def leaky_event(i: int) -> KnowledgeEvent:
    return KnowledgeEvent(
        user_id="u", id=f"e{i}", session_id="s",
        query="Mail alice.smith@example.com and call 13812345678 about card 4111 1111 1111 1111",
        response="Done. Her ID 11010519491231002X is on file; the server 192.168.13.37 uses key "
                 "sk-proj-Zx8Qp2LmN4vR7tY1wK9sD3fG6h. Employee EMP-884422.",
        intermediate_steps=[ToolCall("crm", {"email": "alice.smith@example.com", "password": "hunter2-pass"},
                                     {"card": 4111111111111111, "phone": "13812345678", "note": "paid in full, thanks"})])


def files_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in folder.iterdir() if p.is_file())


def assert_clean(blob: bytes | str) -> None:
    data = blob.encode() if isinstance(blob, str) else blob
    for secret in PII:
        assert secret.encode() not in data, f"{secret!r} leaked"


CUSTOM = [PiiPattern("employee_id", r"EMP-\d{6}")]


@pytest.mark.parametrize("before_queue", [False, True])
def test_pii_never_reaches_the_embedder_nor_the_files(tmp_path: Path, before_queue: bool) -> None:
    emb = Recording()
    db = tmp_path / "memory.db"
    with BeeWeave(db, embedder=emb, ingest=IngestConfig(custom_patterns=CUSTOM, redact_before_queue=before_queue)) as m:
        for i in range(3):
            m.ingest(leaky_event(i))
        m.import_documents(["# Contacts\n\nWrite to alice.smith@example.com or call 13812345678.",
                            '{"question": "card?", "answer": "4111 1111 1111 1111"}'], user_id="u", format="text")
        assert m.flush(20)
        assert_clean(files_bytes(tmp_path))  # while open too: the queue's WAL was emptied before flush returned
        stored = everything(m)
        assert len(stored) >= 6 and m.dead_letters() == []
        assert_clean("\n".join(c.to_json() for c in stored))
    assert emb.seen
    assert_clean("\n".join(emb.seen))
    assert_clean(files_bytes(tmp_path))  # the store, its WAL, the queue, the HNSW graph


def test_with_redaction_before_the_queue_the_queue_file_never_holds_pii(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    m = BeeWeave(db, embedder=HashingEmbedder(32),
                 ingest=IngestConfig(custom_patterns=CUSTOM, redact_before_queue=True, autostart=False))
    try:
        m.ingest(leaky_event(1))
        assert_clean(files_bytes(tmp_path))  # queued (durably) but not processed yet
    finally:
        m.close()
    with BeeWeave(db, embedder=HashingEmbedder(32), ingest=IngestConfig(custom_patterns=CUSTOM)) as again:
        assert again.flush(10)
        assert {c.id for c in everything(again)} == {"e1@u:0", "e1@u:1"}
        assert again.get("e1@u:1").processed_content.payload == {"card": "[CARD]", "phone": "[PHONE]",
                                                               "note": "paid in full, thanks"}


def test_redaction_can_be_turned_off(make_memory) -> None:
    m = make_memory(redact=False)
    m.ingest({"user_id": "u", "id": "e", "query": "my mail is bob@example.com", "response": "noted, thanks"})
    assert m.flush(10)
    assert "bob@example.com" in m.get("e@u:0").raw_content


def test_redaction_counts_are_recorded_without_the_values(make_memory) -> None:
    m = make_memory()
    m.ingest(leaky_event(1))
    assert m.flush(10)
    assert m.get("e1@u:0").metadata["ingest"]["redactions"] == {"email": 1, "phone": 1, "bank_card": 1,
                                                              "national_id": 1, "ip_address": 1, "secret": 1}
    assert m.get("e1@u:1").metadata["ingest"]["redactions"] == {"email": 1, "secret": 1, "bank_card": 1, "phone": 1}


def test_metadata_of_events_and_imported_records_is_redacted(make_memory, tmp_path: Path) -> None:
    m = make_memory()
    nested: dict[str, Any] = {"owner": "bob@example.com"}
    for _ in range(200):  # deeper than redact_value's limit for tool values: still stored, redacted
        nested = {"inner": nested}
    m.ingest({"user_id": "u", "id": "e", "query": "who owns the gateway?", "response": "the network team",
              "metadata": {"contact": "alice.smith@example.com", "phones": ["13812345678"], "api_key": "abc123",
                           "source": "crm", "deep": nested}})
    (tmp_path / "faq.jsonl").write_text(json.dumps({"question": "Who approves refunds?", "answer": "The finance lead.",
                                                    "author": "carol@example.com"}) + "\n", encoding="utf-8")
    m.import_documents([tmp_path / "faq.jsonl"], user_id="u")
    assert m.flush(10) and m.dead_letters() == []
    meta = m.get("e@u:0").metadata
    assert meta["contact"] == "[EMAIL]" and meta["phones"] == ["[PHONE]"] and meta["api_key"] == "[SECRET]"
    assert meta["source"] == "crm"  # keys and harmless values are kept
    (doc,) = [c for c in everything(m) if c.metadata["ingest"]["role"] == "document"]
    assert doc.metadata["author"] == "[EMAIL]"
    text = json.dumps([c.to_dict() for c in everything(m)], ensure_ascii=False)
    assert "@example.com" not in text and "13812345678" not in text and "abc123" not in text


def test_relation_notes_and_standing_queries_are_redacted_as_memories_are(make_memory) -> None:
    # A third user trial found a relation's note and a watch's query stored verbatim.
    m = make_memory()
    a = m.add("contact info stored", user_id="u")
    b = m.add("another memory about contacts", user_id="u")
    edge = m.relate(a, b, "related", note="from leak.me@example.com tel 13812345678")
    assert m.relation_note(edge) == "from [EMAIL] tel [PHONE]"
    w = m.watch("anything from leak.me@example.com or 13812345678", user_id="u")
    assert w.query == "anything from [EMAIL] or [PHONE]"
    assert [x.query for x in m.watches(user_id="u")] == ["anything from [EMAIL] or [PHONE]"]
    w.cancel()
