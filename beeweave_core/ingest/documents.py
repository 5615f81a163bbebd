"""Cold start: FAQ and documentation (plain text, Markdown, JSONL) as seed memories.

Chunking keeps meaning together: Markdown is cut at headings first (a chunk starts with
its heading path, "Install > Linux", so it stands on its own), then at paragraphs (a
fenced code block is one paragraph), packed up to ``chunk_chars``; an oversized
paragraph is cut at sentences, an oversized sentence at spaces. Consecutive chunks of
one section share up to ``overlap`` characters so a fact on a boundary is not cut in two.
JSONL holds one record per line: a text field (``text``, ``content``, ``body``,
``page_content``) or a question/answer pair (``question``/``answer``, ``q``/``a``,
``prompt``/``completion``); other fields become metadata.

Chunk ids derive from the user, the document name, the chunk's position and its text,
so importing the same document again adds nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from ..errors import InvalidInputError

__all__ = ["DocFormat", "DocChunk", "load_sources", "chunk_text", "chunk_markdown", "document_chunks"]

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*")
_TEXT_KEYS = ("text", "content", "body", "page_content")
_QA_KEYS = (("question", "answer"), ("q", "a"), ("prompt", "completion"))


class DocFormat(str, Enum):
    TEXT = "text"
    MARKDOWN = "markdown"
    JSONL = "jsonl"


@dataclass
class DocChunk:
    """One chunk of a document, before it becomes a memory."""

    text: str
    document: str
    index: int
    heading: str | None = None
    question: str | None = None  # for question/answer records
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def chunk_id(self, user_id: str) -> str:
        key = "\x00".join((user_id, self.document, str(self.index), self.text))
        return "doc:" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


@dataclass
class _Source:
    name: str
    text: str
    format: DocFormat


def _guess_format(name: str, text: str) -> DocFormat:
    suffix = Path(name).suffix.lower()
    if suffix in (".md", ".markdown", ".mdx"):
        return DocFormat.MARKDOWN
    if suffix in (".jsonl", ".ndjson", ".json"):
        return DocFormat.JSONL
    if suffix in (".txt", ".text", ".rst"):
        return DocFormat.TEXT
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if lines and all(ln.lstrip().startswith("{") for ln in lines):
        return DocFormat.JSONL
    if re.search(r"^#{1,6}\s+\S", text, re.M):
        return DocFormat.MARKDOWN
    return DocFormat.TEXT


_DOC_SUFFIXES = (".md", ".markdown", ".mdx", ".jsonl", ".ndjson", ".json", ".txt", ".text", ".rst")


def _looks_like_a_path(src: str) -> bool:
    """One word with a document's suffix, or with a directory in it: a path, not a text."""
    word = src.strip()
    if not word or any(ch.isspace() for ch in word):
        return False
    return word.lower().endswith(_DOC_SUFFIXES) or (("/" in word or "\\" in word) and "." in Path(word).name)


def load_sources(sources: Any, fmt: DocFormat | str | None = None) -> list[_Source]:
    """Read every source first, so a missing file raises before anything is stored.

    A source is a path (``os.PathLike``, or a one-line string naming an existing file)
    or a text. A one-word string that reads as a path to a document (``docs/guide.md``,
    ``notes.txt``) but names no file is refused: a typo must not be stored as a memory.
    """
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    if not isinstance(sources, Iterable):
        raise InvalidInputError("import_documents takes a path, a text, or a list of them")
    try:
        wanted = None if fmt is None else DocFormat(fmt)
    except ValueError:
        raise InvalidInputError(f"format must be one of {', '.join(f.value for f in DocFormat)}; got {fmt!r}") from None
    out = []
    for src in sources:
        if isinstance(src, os.PathLike) or (isinstance(src, str) and "\n" not in src and len(src) < 1024
                                            and Path(src).is_file()):
            path = Path(src)
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                raise InvalidInputError(f"no such document: {path}") from None
            except (OSError, UnicodeDecodeError) as exc:
                raise InvalidInputError(f"cannot read {path} as UTF-8 text: {exc}") from None
            name = path.name
        elif isinstance(src, str) and _looks_like_a_path(src):
            raise InvalidInputError(f"no such document: {src}")
        elif isinstance(src, str):
            text = src
            name = "text:" + hashlib.sha1(src.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        else:
            raise InvalidInputError(f"a document is a path or a text, got {type(src).__name__}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError(f"{name} is not valid Unicode") from None
        out.append(_Source(name, text, wanted or _guess_format(name, text)))
    return out


# -- splitting ---------------------------------------------------------------------------------
def _paragraphs(lines: list[str]) -> list[str]:
    """Blank-line separated paragraphs; a fenced code block stays one paragraph."""
    paras: list[str] = []
    cur: list[str] = []
    fenced = False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
        if not line.strip() and not fenced:
            if cur:
                paras.append("\n".join(cur).strip("\n"))
                cur = []
            continue
        cur.append(line)
    if cur:
        paras.append("\n".join(cur).strip("\n"))
    return [p for p in paras if p.strip()]


def _pieces(para: str, cap: int) -> list[str]:
    """A paragraph cut to at most ``cap`` characters: at sentences, then at spaces."""
    if len(para) <= cap:
        return [para]
    out: list[str] = []
    cur = ""
    for sent in (s for s in _SENTENCE.split(para) if s):
        while len(sent) > cap:
            cut = sent.rfind(" ", 0, cap)
            cut = cut if cut > cap // 2 else cap
            if cur:
                out.append(cur)
                cur = ""
            out.append(sent[:cut].rstrip())
            sent = sent[cut:].lstrip()
        if cur and len(cur) + 1 + len(sent) > cap:
            out.append(cur)
            cur = ""
        cur = f"{cur} {sent}".strip() if cur else sent
    if cur:
        out.append(cur)
    return out


def _tail(text: str, overlap: int) -> str:
    if overlap <= 0:
        return ""
    if len(text) <= overlap:
        return text
    cut = text.find(" ", len(text) - overlap)
    return text[cut + 1:] if cut >= 0 else text[-overlap:]


def chunk_text(text: str, chunk_chars: int = 1200, overlap: int = 150) -> list[str]:
    """Paragraphs packed into chunks of at most ``chunk_chars`` (plus the overlap carried in)."""
    return _pack(_paragraphs(text.splitlines()), chunk_chars, overlap)


def _pack(paras: list[str], cap: int, overlap: int) -> list[str]:
    chunks: list[str] = []
    cur: list[str] = []
    size = 0
    for para in paras:
        for piece in _pieces(para, cap):
            if cur and size + 2 + len(piece) > cap:
                chunks.append("\n\n".join(cur))
                carry = _tail(cur[-1], overlap)
                cur, size = ([carry], len(carry)) if carry and carry != piece else ([], 0)
            cur.append(piece)
            size += len(piece) + 2
    if cur:
        chunks.append("\n\n".join(cur))
    return chunks


def chunk_markdown(text: str, chunk_chars: int = 1200, overlap: int = 150) -> list[tuple[str | None, str]]:
    """``(heading path, chunk)`` pairs: sections at headings, then :func:`chunk_text` within each."""
    sections: list[tuple[list[str], list[str]]] = [([], [])]
    path: list[tuple[int, str]] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        m = None if fenced else _HEADING.match(line)
        if m:
            level = len(m.group(1))
            path = [(lv, t) for lv, t in path if lv < level] + [(level, m.group(2))]
            sections.append(([t for _, t in path], []))
        else:
            sections[-1][1].append(line)
    out: list[tuple[str | None, str]] = []
    for titles, lines in sections:
        heading = " > ".join(titles) or None
        for chunk in _pack(_paragraphs(lines), chunk_chars, overlap):
            out.append((heading, f"{heading}\n\n{chunk}" if heading else chunk))
    return out


def _jsonl_chunks(src: _Source, chunk_chars: int, overlap: int) -> Iterator[DocChunk]:
    text = src.text.strip()
    if text.startswith("["):  # a .json file holding a list of records
        try:
            records = json.loads(text)
        except ValueError as exc:
            raise InvalidInputError(f"{src.name}: not JSON: {exc}") from None
        numbered = list(enumerate(records, start=1))
    else:
        numbered = []
        for n, line in enumerate(src.text.splitlines(), start=1):
            if line.strip():
                try:
                    numbered.append((n, json.loads(line)))
                except ValueError as exc:
                    raise InvalidInputError(f"{src.name}:{n}: not a JSON line: {exc}") from None
    index = 0
    for n, rec in numbered:
        if not isinstance(rec, Mapping):
            raise InvalidInputError(f"{src.name}:{n}: a record must be a JSON object")
        rest = dict(rec)
        tags = rest.pop("tags", None) or []
        if isinstance(tags, str) or not all(isinstance(t, str) and t.strip() for t in tags):
            raise InvalidInputError(f"{src.name}:{n}: tags must be a list of strings")
        pair = next(((q, a) for q, a in _QA_KEYS if isinstance(rest.get(q), str) and isinstance(rest.get(a), str)), None)
        if pair is not None:
            question, answer = rest.pop(pair[0]).strip(), rest.pop(pair[1]).strip()
            yield DocChunk(f"{question}\n\n{answer}", src.name, index, question=question, tags=list(tags),
                           metadata={"record": n, **rest})
            index += 1
            continue
        key = next((k for k in _TEXT_KEYS if isinstance(rest.get(k), str) and rest[k].strip()), None)
        if key is None:
            raise InvalidInputError(f"{src.name}:{n}: no text: give one of {', '.join(_TEXT_KEYS)} "
                                    "or a question and an answer")
        body = rest.pop(key)
        for piece in chunk_text(body, chunk_chars, overlap):
            yield DocChunk(piece, src.name, index, tags=list(tags), metadata={"record": n, **rest})
            index += 1


def document_chunks(sources: list[_Source], chunk_chars: int, overlap: int) -> list[DocChunk]:
    if not isinstance(chunk_chars, int) or chunk_chars < 50:
        raise InvalidInputError("chunk_chars must be an integer of at least 50")
    if not isinstance(overlap, int) or not 0 <= overlap < chunk_chars // 2:
        raise InvalidInputError("overlap must be an integer from 0 to half of chunk_chars")
    out: list[DocChunk] = []
    for src in sources:
        if src.format is DocFormat.JSONL:
            out.extend(_jsonl_chunks(src, chunk_chars, overlap))
        elif src.format is DocFormat.MARKDOWN:
            out.extend(DocChunk(t, src.name, i, heading=h) for i, (h, t) in
                       enumerate(chunk_markdown(src.text, chunk_chars, overlap)))
        else:
            out.extend(DocChunk(t, src.name, i) for i, t in enumerate(chunk_text(src.text, chunk_chars, overlap)))
    for c in out:
        try:
            json.dumps(c.metadata, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"{c.document}: record metadata is not JSON: {exc}") from None
    return out
