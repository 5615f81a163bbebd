"""What a storage backend and the engine exchange, and the contract that names it.

The contract itself, ``StoreBackend``, is a composition of small role protocols
(records, search index, edges, key-value, log, ...) with the ``Capabilities`` each backend
declares: see ``store/roles.py`` and docs/backends.md. This module holds the values that
cross it (``ChunkRow`` in, ``VerifyReport`` and a one-trip search's ``Candidates`` out),
the helpers both backends share, and the schema version; it re-exports the roles so
``from beeweave_core.store.base import StoreBackend`` keeps working.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence

from ..errors import BeeWeaveError, EmbedderChangedError
from ..records import KnowledgeChunk
from .exchange import Candidates, ChunkRow, TermEvidence, VerifyReport
from .roles import (
    Capabilities,
    Edges,
    Integrity,
    KeyValue,
    Lifecycle,
    Log,
    Meta,
    OwnsQueue,
    Records,
    RetrievesInOneTrip,
    SearchesTermsInOneTrip,
    SearchIndex,
    StoreBackend,
    Users,
)

__all__ = ["SCHEMA_VERSION", "Candidates", "Capabilities", "ChunkRow", "Edges", "Integrity", "KeyValue", "Lifecycle",
           "Log", "Meta", "OwnsQueue", "Records", "RetrievesInOneTrip", "SearchIndex", "SearchesTermsInOneTrip",
           "StaleCandidates", "StoreBackend", "TermEvidence", "Users", "VerifyReport", "check_model",
           "check_query_model", "model_name", "records_in_order", "split_changes"]

# Bumped by every named migration; a store newer than the code refuses to open.
SCHEMA_VERSION = 4


def split_changes(new: Sequence[KnowledgeChunk | ChunkRow],
                  given: Mapping[str, KnowledgeChunk]) -> tuple[list[KnowledgeChunk], list[ChunkRow]]:
    """What a ``modify`` change returned: (records to update, rows to replace). A record it
    was not given is a programming error and writes nothing."""
    chunks: list[KnowledgeChunk] = []
    rows: list[ChunkRow] = []
    for n in new:
        cid = n.chunk.id if isinstance(n, ChunkRow) else n.id
        if cid not in given:
            from ..errors import InvalidInputError

            raise InvalidInputError(f"modify: the change returned {cid!r}, a record it was not given")
        if isinstance(n, ChunkRow):
            rows.append(n)
        else:
            chunks.append(n)
    return chunks, rows


def check_model(rows: Sequence[ChunkRow], recorded: str | None) -> None:
    """Refuse rows whose vectors are for another model than the store's: ``recorded`` is the
    store's meta ``embedder`` (JSON with the model's ``name``) as read inside the write's
    transaction, under its write lock. A backend calls this before it stores a vector, so a
    BeeWeave still on the model another process re-embedded the store away from (the switch
    is one transaction that sets this meta) stores nothing instead of an old-model vector
    that new-model queries would be compared with and nothing would repair. A store with no
    model recorded yet, or rows with no ``model``, are not checked.

    Refused rather than embedded again with the new model: that writer may not be able to
    load it (an embeddings object only the other process holds, a model not installed or not
    downloadable offline), loading one inside an ``add`` would cost seconds and memory nobody
    asked for, and its searches would still embed queries with the old model. An error it
    can act on (reopen) beats a write acknowledged with a vector nothing can search."""
    models = {r.model for r in rows if r.model is not None}
    name = model_name(recorded)
    if name is None or not models:
        return
    stale = sorted(models - {name})
    if stale:
        raise EmbedderChangedError(
            f"the store is now embedded with {name!r}, not {stale[0]!r}: it was moved to that model (a re-embed, "
            f"by another process or another BeeWeave on this store) after this one was opened, so this write "
            f"stored nothing (its vectors would be the old model's); open the store again (without embedder= it "
            f"uses {name!r}) and retry")


def model_name(recorded: str | None) -> str | None:
    """The model's name in the store's meta ``embedder`` (JSON ``{"name", "dim"}``, the
    engine's), or None when none is recorded (or the value is not the engine's: not checked)."""
    if recorded is None:
        return None
    try:
        info = json.loads(recorded)
    except ValueError:
        return None
    name = info.get("name") if isinstance(info, dict) else None
    return None if name is None else str(name)


def check_query_model(model: str | None, recorded: str | None) -> None:
    """Refuse a search whose query vector is for another model than the vectors it would be
    compared with: ``recorded`` is the model's name (``model_name``) the store recorded as of
    the state the backend answers from (read with the vectors that state brought in, e.g. by
    the catch-up of an in-memory index), ``model`` the one the query was embedded with (None,
    or nothing recorded: not checked). A BeeWeave opened before another process re-embedded
    the store still embeds queries with the old model: compared with the new model's vectors,
    the vector half of every score is meaningless (same dimension: wrong memories, no error)
    or cannot be computed (another dimension). It cannot go on; reopened, it uses the new model."""
    if model is None or recorded is None or model == recorded:
        return
    raise EmbedderChangedError(
        f"the store is now embedded with {recorded!r}, not {model!r}: it was moved to that model (a re-embed, by "
        f"another process or another BeeWeave on this store) after this one was opened, so a query embedded with "
        f"{model!r} cannot be compared with its vectors; open the store again (without embedder= it uses "
        f"{recorded!r}), or restart the server, and search again")


def records_in_order(get: Callable[[Sequence[str]], dict[str, KnowledgeChunk]],
                     ids: Sequence[str]) -> Iterator[KnowledgeChunk]:
    """``scan`` from ``scan_ids``: the records of ``ids`` in that order, read 500 at a time
    (one that vanished meanwhile is skipped)."""
    for i in range(0, len(ids), 500):
        part = ids[i : i + 500]
        got = get(part)
        for cid in part:
            if cid in got:
                yield got[cid]


class StaleCandidates(BeeWeaveError):
    """``Candidates.records`` of an ``optimistic`` retrieve: the candidates were ranked from
    a state of the store that other writes have since moved past. The caller retrieves
    again, not optimistically (the engine does; it never reaches a user)."""
