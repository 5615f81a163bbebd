"""Code validity: a memory about code names its files (``metadata["paths"]``, or one
``metadata["path"]``) and the ``commit`` it was true at. When those files change,
``invalidate(paths, commit)`` marks the memory "to verify": ``metadata["verify"]`` says
which changed paths and commit, its weight is lowered (so it ranks below memories that
still hold) and it enters the review queue with the reason "verify". Resolving the review
with "keep" clears the mark and gives the weight back.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import InvalidInputError
from ..events import EventType
from ..filters import build_filter
from ..records import KnowledgeChunk
from ..validation import check_number, check_text
from .base import LifecycleContext
from .review import flag

__all__ = ["VERIFY_KEY", "InvalidationReport", "CodeValidity", "code_paths", "touches", "verified"]

VERIFY_KEY = "verify"  # metadata: {"paths": [...], "commit": ..., "at": ..., "weight_before": ...}


@dataclass
class InvalidationReport:
    """What one ``invalidate()`` did: the memories newly marked "to verify" (``marked``) and
    those already marked that got the new paths (``updated``)."""

    marked: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, list[str]]:
        return {"marked": list(self.marked), "updated": list(self.updated)}


def _norm(path: str) -> str:
    p = posixpath.normpath(path.replace("\\", "/").strip())
    return p[2:] if p.startswith("./") else p


def code_paths(chunk: KnowledgeChunk) -> list[str]:
    """The files a memory is about: ``metadata["paths"]`` (a list, or one path as a string)
    or ``metadata["path"]``."""
    md = chunk.metadata
    raw = md.get("paths") or md.get("path") or []
    if isinstance(raw, str):  # one path given as text, not a list of its characters
        raw = [raw]
    return [_norm(p) for p in raw if isinstance(p, str) and p.strip()] if isinstance(raw, list) else []


def touches(memory_paths: Iterable[str], changed: Iterable[str]) -> list[str]:
    """The changed paths a memory is about: the same file, or a file under a directory it names."""
    mine = list(memory_paths)
    return sorted({c for c in changed for p in mine if c == p or c.startswith(p.rstrip("/") + "/")})


class CodeValidity:
    """Marks memories about changed files "to verify"."""

    def __init__(self, ctx: LifecycleContext) -> None:
        self.ctx = ctx

    def invalidate(self, paths: Iterable[str], commit: str | None = None, *, user_id: str | None = None,
                   factor: float = 0.5) -> InvalidationReport:
        """Mark the active memories whose ``paths`` cover any of ``paths`` "to verify" and
        multiply their weight by ``factor`` (once: a memory already marked keeps its lowered
        weight and records the new paths)."""
        if isinstance(paths, str) or not isinstance(paths, Iterable):
            raise InvalidInputError("paths must be a list of file paths")
        changed = sorted({_norm(str(check_text("path", p))) for p in paths})
        if commit is not None:
            check_text("commit", commit)
        check_number("factor", factor, low=0.0, high=1.0)
        report = InvalidationReport()
        if not changed:
            return report
        # Memories about code are few; a full scan is read without the lock, then each hit is
        # re-read and written under it.
        scope = build_filter(None, user_id=user_id)
        hits = {c.id: t for c in self.ctx.backend.scan(scope) if (t := touches(code_paths(c), changed))}
        if not hits:
            return report
        new: list[tuple[KnowledgeChunk, bool]] = []  # (as written, newly marked)

        def change(current: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk]:
            # On the records as the write reads them: an edit another process made since the
            # search found them is kept.
            new.clear()
            for cid, c in current.items():
                md = dict(c.metadata)
                old = md.get(VERIFY_KEY)
                if isinstance(old, dict):
                    md[VERIFY_KEY] = dict(old, paths=sorted({*old.get("paths", []), *hits[cid]}), commit=commit,
                                          at=now.isoformat())
                    new.append((c.copy(metadata=md, relationships=[]), False))
                else:
                    md[VERIFY_KEY] = {"paths": hits[cid], "commit": commit, "at": now.isoformat(),
                                      "weight_before": c.weight}
                    lowered = max(self.ctx.config.min_weight, c.weight * factor) if not c.pinned else c.weight
                    new.append((c.copy(metadata=md, weight=lowered, relationships=[]), True))
            return [c for c, _ in new]

        with self.ctx.changes() as box:
            now = self.ctx.now()
            self.ctx.backend.modify(list(hits), change)
            for updated, marked in new:
                (report.marked if marked else report.updated).append(updated.id)
                if marked:
                    flag(self.ctx.backend, updated, "verify", now)
                box.emit(EventType.UPDATED, updated, fields=["metadata", "weight"], reason="verify",
                         paths=hits[updated.id], commit=commit)
        report.marked.sort()
        report.updated.sort()
        return report


def verified(chunk: KnowledgeChunk) -> KnowledgeChunk:
    """The memory with its "to verify" mark cleared and its weight given back."""
    md = dict(chunk.metadata)
    mark = md.pop(VERIFY_KEY, None)
    weight = mark.get("weight_before", chunk.weight) if isinstance(mark, dict) else chunk.weight
    return chunk.copy(metadata=md, weight=max(weight, chunk.weight), relationships=[])
