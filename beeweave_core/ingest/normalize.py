"""Normalization: what kind of content a text is (plain text, code, structured data) and
its normalized form.

The rules, in order:

1. fenced code (```lang ... ```) -> ``code`` with the first block's language;
2. a whole JSON object or array -> ``data`` (payload: the parsed value; text: one
   ``path: value`` line per leaf, which reads and indexes better than braces);
3. a Markdown table -> ``data`` (payload: the rows as dicts; text: unchanged);
4. CSV / TSV (3+ lines, one consistent delimiter, short header cells, and three columns
   or a numeric one) -> ``data``;
5. code without fences (most lines look like code and one language's signature is
   present) -> ``code``;
6. anything else -> ``text``.

``raw_content`` always keeps the text as given; only ``processed_content`` changes.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

from ..records import ContentType, ProcessedContent

__all__ = ["normalize", "detect_language", "flatten_json"]

_FENCE = re.compile(r"^[ \t]*(```+|~~~+)[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.M | re.S)
_NUMBER = re.compile(r"^[-+]?[\d.,:/%$€¥]+$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)+\|?\s*$")

# Each language: patterns that are strong evidence for it (one is enough with code-like lines).
_SIGNATURES: list[tuple[str, tuple[str, ...]]] = [
    ("python", (r"^\s*def \w+\(.*\)\s*(->.*)?:\s*$", r"^\s*(from [\w.]+ )?import [\w., ]+$", r"^\s*class \w+(\(.*\))?:\s*$",
                r"^\s*(if|elif|for|while|with|try)\b.*:\s*$", r"\bprint\(", r"\bself\.")),
    ("typescript", (r"^\s*(export )?interface \w+", r":\s*(string|number|boolean)\b", r"^\s*type \w+ = ")),
    ("javascript", (r"^\s*(const|let|var) \w+ = ", r"=>", r"\bconsole\.log\(", r"^\s*function \w+\(", r"\brequire\(")),
    ("java", (r"\bpublic (static )?(class|void|int|String)\b", r"\bSystem\.out\.print", r"^\s*package [\w.]+;")),
    ("go", (r"^\s*package \w+\s*$", r"^\s*func \w*\(", r":= ", r"\bfmt\.Print")),
    ("rust", (r"^\s*fn \w+\(", r"\blet mut\b", r"\bprintln!\(", r"^\s*use [\w:]+;", r"^\s*impl\b")),
    ("cpp", (r"^\s*#include\s*<", r"\bstd::", r"\bcout\s*<<")),
    ("sql", (r"(?i)^\s*select\b.+\bfrom\b", r"(?i)^\s*(insert into|update \w+ set|delete from|create table)\b")),
    ("bash", (r"^#!/bin/(ba)?sh", r"^\s*\$ \w+", r"^\s*(sudo|apt-get|pip|npm|git|cd|export|echo|curl) ")),
    ("html", (r"^\s*<(!doctype|html|div|span|p|body|head|script)\b",)),
]
_COMPILED = [(lang, [re.compile(p, re.M) for p in pats]) for lang, pats in _SIGNATURES]
_CODE_LINE = re.compile(
    r"(^\s*(def|class|import|from|return|if|elif|else|for|while|try|except|with|function|const|let|var|public|"
    r"private|package|func|fn|use|impl|#include|select|insert|update|delete|create|sudo|pip|npm|git|echo)\b)"
    r"|([;{}]\s*$)|(^\s*[}\])]\s*[;,)]*\s*$)|(^\s*[\w.\[\]]+\s*(=|\+=|-=|:=)\s*\S)|(\w\([^)]*\)\s*[;:]?\s*$)"
    r"|(^\s*(#|//)\s?\S)|(^\s*<[a-zA-Z/!][^>]*>)|(^\s*\$ )", re.I)


def detect_language(code: str) -> str | None:
    """The language whose signatures match ``code`` most, or None."""
    best, score = None, 0
    for lang, pats in _COMPILED:
        s = sum(1 for p in pats if p.search(code))
        if s > score:
            best, score = lang, s
    return best


def normalize(text: str) -> ProcessedContent:
    """Classify ``text`` and return its normalized form (see the module docstring)."""
    stripped = text.strip()
    if not stripped:
        return ProcessedContent(ContentType.TEXT, text)
    blocks = [(m.group(2).lower() or None, m.group(3).rstrip("\n")) for m in _FENCE.finditer(text)]
    if blocks:
        lang = blocks[0][0] or detect_language(blocks[0][1])
        payload = {"blocks": [{"language": b[0] or detect_language(b[1]), "code": b[1]} for b in blocks]}
        return ProcessedContent(ContentType.CODE, text, lang, payload)
    data = _as_json(stripped)
    if data is not None:
        return ProcessedContent(ContentType.DATA, flatten_json(data) or stripped, "json", data)
    rows = _markdown_table(stripped)
    if rows is not None:
        return ProcessedContent(ContentType.DATA, text, "markdown", rows)
    table = _csv_table(stripped)
    if table is not None:
        rows, dialect = table
        return ProcessedContent(ContentType.DATA, text, "tsv" if dialect == "\t" else "csv", rows)
    if _looks_like_code(stripped):
        lang = detect_language(stripped)
        return ProcessedContent(ContentType.CODE, text, lang, {"blocks": [{"language": lang, "code": stripped}]})
    return ProcessedContent(ContentType.TEXT, text)


def _as_json(text: str) -> Any:
    if text[:1] not in ("{", "[") or text[-1:] not in ("}", "]"):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, (dict, list)) and value else None


def flatten_json(value: Any, prefix: str = "", _out: list[str] | None = None, _depth: int = 0) -> str:
    """``a.b: 1`` / ``items[0].name: x`` lines for the leaves of a JSON value."""
    out = [] if _out is None else _out
    if isinstance(value, dict) and _depth < 32:
        for k, v in value.items():
            flatten_json(v, f"{prefix}.{k}" if prefix else str(k), out, _depth + 1)
    elif isinstance(value, list) and _depth < 32:
        for i, v in enumerate(value):
            flatten_json(v, f"{prefix}[{i}]", out, _depth + 1)
    else:
        leaf = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        out.append(f"{prefix}: {leaf}" if prefix else str(leaf))
    return "\n".join(out) if _out is None else ""


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|"):
        line = line[:-1]
    return [c.strip() for c in line.split("|")]


def _markdown_table(text: str) -> list[dict[str, str]] | None:
    lines = text.splitlines()
    for i in range(1, len(lines)):
        if _TABLE_SEP.match(lines[i]) and "|" in lines[i - 1]:
            header = _cells(lines[i - 1])
            rows = []
            for line in lines[i + 1:]:
                if "|" not in line:
                    break
                cells = _cells(line)
                rows.append({h or f"column{j + 1}": (cells[j] if j < len(cells) else "") for j, h in enumerate(header)})
            return rows
    return None


def _csv_table(text: str) -> tuple[list[dict[str, str]], str] | None:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 3 or any(len(ln) > 2000 for ln in lines):
        return None
    for delim in (",", "\t", ";"):
        counts = {ln.count(delim) for ln in lines}
        if len(counts) != 1 or 0 in counts:
            continue
        parsed = list(csv.reader(io.StringIO("\n".join(lines)), delimiter=delim))
        widths = {len(r) for r in parsed}
        header = parsed[0]
        # Prose with one comma per line is not a table: header cells are short names.
        if len(widths) != 1 or len(header) < 2 or any(not h.strip() or len(h) > 40 or h.strip().endswith((".", "?", "!"))
                                                       for h in header):
            continue
        # Two columns of words is as likely a list of greetings: ask for 3+ columns or a numeric one.
        numeric = any(all(_NUMBER.match(r[j].strip()) for r in parsed[1:]) for j in range(len(header)))
        if len(header) < 3 and not numeric:
            continue
        return [dict(zip([h.strip() for h in header], (c.strip() for c in r))) for r in parsed[1:]], delim
    return None


def _looks_like_code(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return False
    lines = lines[:200]  # the head of a long text decides
    code_like = sum(1 for ln in lines if _CODE_LINE.search(ln))
    if len(lines) == 1:
        # One line: only a strong, unambiguous signature (a SQL statement, a shell command).
        return code_like == 1 and detect_language(text) in ("sql", "bash", "cpp", "html")
    return code_like / len(lines) >= 0.6 and detect_language("\n".join(lines)) is not None
