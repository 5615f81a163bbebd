"""Cold start: importing text, Markdown and JSONL as seed memories, with sensible chunks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beeweave_core import ChunkStatus, Intent, InvalidInputError
from beeweave_core.ingest.documents import chunk_markdown, chunk_text
from tests.ingest.ingest_support import everything

GUIDE = """# Install

Run `pip install beeweave`. It needs Python 3.10 or newer.

## Linux

Use the system Python or a virtual environment.

```bash
# not a heading: a comment in a shell block
python -m venv .venv
```

## Windows

Install Python from python.org first.

# Use

Open a store with BeeWeave("memory.db").
"""


def test_markdown_is_cut_at_headings_with_the_heading_path_in_each_chunk() -> None:
    chunks = chunk_markdown(GUIDE)
    assert [h for h, _ in chunks] == ["Install", "Install > Linux", "Install > Windows", "Use"]
    heading, text = chunks[1]
    assert text.startswith("Install > Linux\n\nUse the system Python")
    assert "# not a heading: a comment in a shell block\npython -m venv .venv\n```" in text


def test_long_sections_are_packed_under_the_cap_with_overlap() -> None:
    paras = [f"Paragraph {i} says something about topic {i} in a sentence of moderate length." for i in range(30)]
    chunks = chunk_text("\n\n".join(paras), chunk_chars=300, overlap=100)
    assert len(chunks) > 5
    assert all(len(c) <= 300 + 100 for c in chunks)
    for a, b in zip(chunks, chunks[1:]):
        assert b.split("\n\n")[0] in a  # the next chunk starts with the end of the previous one
    assert all(p in "\n".join(chunks) for p in paras)


def test_an_oversized_paragraph_is_cut_at_sentences_then_spaces() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(100)) + " " + "x" * 700
    chunks = chunk_text(text, chunk_chars=200, overlap=0)
    assert all(len(c) <= 200 for c in chunks)
    assert chunks[0].endswith("is here.")


def test_import_text_markdown_and_jsonl_files(make_memory, tmp_path: Path) -> None:
    (tmp_path / "guide.md").write_text(GUIDE, encoding="utf-8")
    (tmp_path / "notes.txt").write_text("Office hours are 9 to 5.\n\nThe office is in Lyon.", encoding="utf-8")
    faq = [{"question": "How do I reset my password?", "answer": "Settings > Security > Reset.", "tags": ["account"]},
           {"text": "Refunds take five working days.", "source": "policy.pdf"}]
    (tmp_path / "faq.jsonl").write_text("\n".join(json.dumps(r) for r in faq) + "\n\n", encoding="utf-8")
    m = make_memory()
    ids = m.import_documents([tmp_path / "guide.md", str(tmp_path / "notes.txt"), tmp_path / "faq.jsonl"],
                             user_id="kb", tags=["seed"], show_progress=False)
    assert len(ids) == 4 + 1 + 2 and len(set(ids)) == len(ids)
    chunks = {c.id: c for c in everything(m)}
    assert set(chunks) == set(ids)
    linux = next(c for c in chunks.values() if c.metadata["ingest"].get("heading") == "Install > Linux")
    assert linux.metadata["ingest"] == {"role": "document", "document": "guide.md", "chunk": 1, "heading": "Install > Linux"}
    assert "seed" in linux.tags and linux.status is ChunkStatus.ACTIVE and linux.user_id == "kb"
    qa = next(c for c in chunks.values() if c.raw_content.startswith("How do I reset"))
    assert qa.raw_content == "How do I reset my password?\n\nSettings > Security > Reset."
    assert {"account", "seed"} <= set(qa.tags) and qa.intent is Intent.INFORMATION_QUERY
    assert qa.summary == "Settings > Security > Reset."
    refund = next(c for c in chunks.values() if "Refunds" in c.raw_content)
    assert refund.metadata["source"] == "policy.pdf" and refund.metadata["record"] == 2
    assert m.search("reset my password", user_id="kb", k=1)[0].id == qa.id


def test_reimporting_the_same_documents_adds_nothing(make_memory) -> None:
    m = make_memory()
    first = m.import_documents(GUIDE, user_id="kb", show_progress=False)
    second = m.import_documents(GUIDE, user_id="kb", show_progress=False)
    assert first == second and len(everything(m)) == len(first)
    other = m.import_documents(GUIDE, user_id="someone-else", show_progress=False)
    assert not set(other) & set(first)


def test_texts_are_recognised_and_review_holds_them(make_memory) -> None:
    m = make_memory()
    faq = '{"q": "Opening hours?", "a": "9 to 5."}\n{"q": "Where?", "a": "Lyon."}'
    ids = m.import_documents([faq], user_id="kb", review=True, show_progress=False)
    assert len(ids) == 2
    assert {c.id for c in m.pending(user_id="kb")} == set(ids)
    assert m.search("opening hours", user_id="kb") == []
    m.reject(ids[1])
    m.import_documents([faq], user_id="kb", review=True, show_progress=False)
    assert [c.id for c in m.pending(user_id="kb")] == ids[:1]  # a rejected chunk is not imported again


def test_a_json_array_file(make_memory, tmp_path: Path) -> None:
    (tmp_path / "faq.json").write_text(json.dumps([{"prompt": "Hi?", "completion": "Hello!"}]), encoding="utf-8")
    assert len(make_memory().import_documents(tmp_path / "faq.json", user_id="kb", show_progress=False)) == 1


@pytest.mark.parametrize("sources, message", [
    ([Path("/no/such/file.md")], "no such document"),
    (["docs/missing_typo.md"], "no such document"),  # a mistyped path is not a text to store
    (["notes.txt"], "no such document"),
    (['{"title": "no text here"}'], "no text"),
    (['{"text": "ok"}\n{broken'], ":2: not a JSON line"),
    ([42], "path or a text"),
])
def test_bad_sources_raise_before_anything_is_stored(make_memory, sources, message) -> None:
    m = make_memory()
    with pytest.raises(InvalidInputError, match=message):
        m.import_documents(["A good document that would be stored first.", *sources], user_id="kb",
                           format=None, show_progress=False)
    assert everything(m) == []


def test_one_word_texts_that_are_not_paths_are_texts(make_memory) -> None:
    m = make_memory()
    ids = m.import_documents(["Kubernetes", "v1.2.3", "e.g.", "见附件"], user_id="kb", show_progress=False)
    assert len(ids) == 4


def test_bad_arguments(make_memory) -> None:
    m = make_memory()
    with pytest.raises(InvalidInputError):
        m.import_documents("text", user_id="")
    with pytest.raises(InvalidInputError):
        m.import_documents("text", user_id="kb", chunk_chars=10)
    with pytest.raises(InvalidInputError):
        m.import_documents("text", user_id="kb", tags="seed")
    with pytest.raises(InvalidInputError):
        m.import_documents("text", user_id="kb", format="pdf")


def test_a_progress_bar_only_when_asked(make_memory, capsys) -> None:
    m = make_memory()
    text = "\n\n".join(f"Fact {i}: item {i} costs {i} euros." for i in range(120))
    ids = m.import_documents(text, user_id="kb", chunk_chars=60, overlap=0)
    assert len(ids) == 120
    assert capsys.readouterr().err == ""  # a library prints nothing unless asked
    more = "\n\n".join(f"Fact {i}: item {i} weighs {i} grams." for i in range(120))
    m.import_documents(more, user_id="kb", chunk_chars=60, overlap=0, show_progress=True)
    assert "beeweave add" in capsys.readouterr().err
