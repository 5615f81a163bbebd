"""Bringing an in-memory index up to the rows other writers committed: one rule, both backends.

The embedded store (``SQLiteStore``) and a PostgreSQL store's local index both hold a
``MemoryIndex`` of rows that other processes change. Each reads, from its own change log,
which ids changed and their current rows; what the index then does with them is the same,
and lives here: a row whose row number the index already holds was rewritten with the same
text (its fields change, not its terms or vector); any other held record leaves the index
with the term counts it was indexed with; every current row whose text is new goes in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from ..records import KnowledgeChunk
from .memory_index import IndexEntry, MemoryIndex

__all__ = ["ChangedRow", "apply_changes"]


class ChangedRow(NamedTuple):
    """A changed id's current row, as a catch-up read it.

    Attributes:
        seq: its row number (a new number means new text or vector: the row was replaced).
        doc: the stored record as JSON text.
        entry: the row as the index takes it; called only when the index must take it anew.
    """

    seq: int
    doc: str
    entry: Callable[[], IndexEntry]


def apply_changes(index: MemoryIndex, changed: Sequence[str], current: Mapping[str, ChangedRow],
                  held_counts: Callable[[str], dict[int, int] | None]) -> int | None:
    """Patch ``index`` with the ``current`` rows of the ``changed`` ids (an id without a row
    was deleted). ``held_counts(id)``: the term counts a held record was indexed with, which
    its removal takes back. Returns how many removals, rewrites and additions it made, or None, changing
    nothing, when a held record's counts are unknown (the caller rebuilds from the rows)."""
    gone: dict[str, dict[int, int]] = {}
    same: list[KnowledgeChunk] = []
    new: list[IndexEntry] = []
    for cid in changed:
        row, held = current.get(cid), index.seq_of(cid)
        if held is not None and row is not None and row.seq == held:
            same.append(KnowledgeChunk.from_stored(json.loads(row.doc)))
            continue
        if held is not None:
            counts = held_counts(cid)
            if counts is None:
                return None
            gone[cid] = counts
        if row is not None:
            new.append(row.entry())
    index.remove(gone)
    index.update(same)
    index.add(sorted(new, key=lambda e: e.seq))
    return len(gone) + len(same) + len(new)
