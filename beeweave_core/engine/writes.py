"""The records part: validate -> embed -> write, and read, change and delete memories.

Every argument is checked before the backend is called, so bad input changes nothing.
Each batch of new memories is inserted with its graph links (the ``link`` hook's reads
and edges, in the insert's transaction where the backend can); after it is committed the
``on_insert`` hooks run (created events, lifecycle rules, watches); after a deletion the
``on_delete`` hooks run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ..embedders import as_embedder
from ..errors import DuplicateIdError, InvalidInputError, NotFoundError, StoreUnavailableError
from ..events import EventType
from ..filters import build_filter
from ..lifecycle.history import record_version
from ..records import ALL_STATUSES, KnowledgeChunk, ProcessedContent
from ..store.base import ChunkRow, check_model
from ..validation import (
    check_chunk,
    check_content,
    check_id,
    check_json,
    check_number,
    check_text,
    check_timestamp,
    check_user,
    check_vector,
    id_list,
)
from .reembed import reembed
from .shared import Shared

if TYPE_CHECKING:
    from ..ingest.write_policy import WritePolicy

__all__ = ["Records", "RECORD_KEYS"]

logger = logging.getLogger(__name__)

RECORD_KEYS = frozenset({"content", "user_id", "session_id", "agent_id", "chunk_id", "tags", "metadata", "timestamp",
                         "embedding", "entities", "summary", "intent", "expires_at", "pinned", "weight", "confidence",
                         "status", "tier"})


def _says(chunk: KnowledgeChunk) -> tuple[str, str]:
    """What a memory says: an edit that changes this keeps the earlier version."""
    return chunk.raw_content, chunk.content


class Records:
    """Adding, reading, changing and deleting memories (see the methods of ``BeeWeave``)."""

    def __init__(self, shared: Shared, policy: WritePolicy | None = None) -> None:
        self.shared = shared
        # Redaction and admission for what callers write directly (ingestion applies its own
        # and writes with trusted=True); None on a bare Records (tests of the part alone).
        self.policy = policy

    # -- writing -------------------------------------------------------------------------
    def add(self, content: str, *, user_id: str, session_id: str | None = None, agent_id: str | None = None,
            chunk_id: str | None = None, tags: Iterable[str] = (), metadata: Mapping[str, Any] | None = None,
            timestamp: datetime | str | float | None = None, embedding: Sequence[float] | None = None,
            trusted: bool = False, **fields: Any) -> str:
        record: dict[str, Any] = dict(fields, content=content, user_id=user_id, session_id=session_id,
                                      agent_id=agent_id, chunk_id=chunk_id, tags=list(tags) if isinstance(
                                          tags, (list, tuple, set, frozenset)) else tags, metadata=metadata,
                                      timestamp=timestamp, embedding=embedding)
        return self.add_many([record], show_progress=False, trusted=trusted)[0]

    def add_many(self, records: Iterable[Mapping[str, Any] | KnowledgeChunk], *, batch_size: int = 512,
                 show_progress: bool | None = None, link: bool = True, trusted: bool = False) -> list[str]:
        if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, Iterable):
            raise InvalidInputError("add_many takes a list of records (dicts or KnowledgeChunks)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidInputError("batch_size must be a positive integer")
        if not isinstance(trusted, bool):
            raise InvalidInputError("trusted must be True or False")
        policy = None if trusted else self.policy
        items = [self.to_chunk(r) if policy is None else self._policed(r, policy) for r in records]
        ids = [c.id for c, _ in items]
        if len(set(ids)) != len(ids):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise DuplicateIdError(f"the id {dup!r} appears twice in this batch")
        # One batch is refused whole by the insert itself (DuplicateIdError before it writes):
        # only a batch split in several needs this check first, a round trip per add saved.
        existing = self.shared.backend.contains(ids) if len(items) > batch_size else set()
        if existing:
            raise DuplicateIdError(f"a chunk with id {sorted(existing)[0]!r} already exists")
        progress = None
        if show_progress:  # a library prints nothing unless asked (the CLI asks on a terminal)
            from tqdm.auto import tqdm

            progress = tqdm(total=len(items), desc="beeweave add", unit="mem")
        try:
            linker = self.shared.hooks.link if link else None
            for start in range(0, len(items), batch_size):
                batch = items[start : start + batch_size]
                rows = self.rows(batch)
                chunks = [c for c, _ in batch]
                if linker is None:
                    self.shared.backend.insert(rows)
                elif not self.shared.backend.insert_linked(rows, *linker(chunks, {r.chunk.id: r.vector for r in rows})):
                    logger.warning("BeeWeave stored %d memories but the store became unavailable while linking "
                                   "them; BeeWeave.link() links them", len(chunks))
                try:
                    for hook in self.shared.hooks.on_insert:
                        hook(chunks, link)
                except StoreUnavailableError:
                    # The batch is committed: the add succeeded, so it must not be reported as
                    # refused. What the hooks derive (rule expiries, events) is missing for
                    # these memories.
                    logger.warning("BeeWeave stored %d memories but the store became unavailable while "
                                   "processing them", len(chunks), exc_info=True)
                if progress is not None:
                    progress.update(len(batch))
        finally:
            if progress is not None:
                progress.close()
        return ids

    def restore(self, chunks: Sequence[KnowledgeChunk], vectors: Mapping[str, Any] | None = None, *,
                batch_size: int = 512) -> None:
        """Write memories exactly as they were stored elsewhere (an import): every field kept,
        no write policy, no linking, no ``on_insert`` hook (nothing is derived twice, no
        ``memory.created``). A vector in ``vectors`` is used as given; a memory without one is
        embedded. The caller has checked the chunks (``check_chunk``) and their ids."""
        vectors = vectors or {}
        checked = [(c, None if c.id not in vectors else self.check_vector(vectors[c.id])) for c in chunks]
        for start in range(0, len(checked), batch_size):
            self.shared.backend.insert(self.rows(checked[start : start + batch_size]))

    def _policed(self, r: Mapping[str, Any] | KnowledgeChunk,
                 policy: WritePolicy) -> tuple[KnowledgeChunk, np.ndarray | None]:
        # Checked as given first: redaction rewrites values (a set in the metadata would come
        # out as text), and bad input must be refused, not repaired.
        self.to_chunk(r)
        return self.to_chunk(policy.direct(r))

    def announce_created(self, chunks: list[KnowledgeChunk], link: bool) -> None:
        """The ``on_insert`` hook that sends ``memory.created``."""
        for c in chunks:
            self.shared.emit(EventType.CREATED, c)

    def to_chunk(self, r: Mapping[str, Any] | KnowledgeChunk) -> tuple[KnowledgeChunk, np.ndarray | None]:
        """A validated chunk (and its given vector, if any) from a record dict or a chunk."""
        if isinstance(r, KnowledgeChunk):
            check_chunk(r)
            return r, None
        if not isinstance(r, Mapping):
            raise InvalidInputError(f"a record must be a dict or a KnowledgeChunk, got {type(r).__name__}")
        unknown = set(r) - RECORD_KEYS
        if unknown:
            raise InvalidInputError(f"unknown record keys {sorted(unknown)}; known: {sorted(RECORD_KEYS)}")
        content = check_content(r.get("content"))
        tags = r.get("tags") or ()
        if isinstance(tags, str) or not isinstance(tags, Iterable):
            raise InvalidInputError("tags must be a list of strings")
        tags = [check_id(t, "tag") for t in tags]
        metadata = r.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise InvalidInputError(f"metadata must be a mapping, got {type(metadata).__name__}")
        metadata = dict(metadata)
        check_json("metadata", metadata)
        extra = {k: r[k] for k in ("entities", "summary", "intent", "expires_at", "pinned", "weight", "confidence",
                                   "status", "tier") if r.get(k) is not None}
        for key in ("weight", "confidence"):
            if key in extra:
                check_number(key, extra[key])
        if "expires_at" in extra:
            extra["expires_at"] = check_timestamp(extra["expires_at"], "expires_at")
        kw: dict[str, Any] = dict(raw_content=content, user_id=check_user(r.get("user_id")),
                                  session_id=check_text("session_id", r.get("session_id"), optional=True),
                                  agent_id=check_text("agent_id", r.get("agent_id"), optional=True),
                                  tags=list(dict.fromkeys(tags)), metadata=metadata, **extra)
        chunk_id = check_text("chunk_id", r.get("chunk_id"), optional=True)
        if chunk_id is not None:
            kw["id"] = chunk_id
        ts = r.get("timestamp")
        kw["timestamp"] = check_timestamp(ts) if ts is not None else self.shared.clock()
        try:
            chunk = KnowledgeChunk(**kw)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(str(exc)) from None
        check_chunk(chunk)
        vec = r.get("embedding")
        return chunk, None if vec is None else self.check_vector(vec)

    def check_vector(self, vec: Any) -> np.ndarray:
        return check_vector(vec, self.shared.dim or self.shared.embedder.dim)

    def rows(self, batch: list[tuple[KnowledgeChunk, np.ndarray | None]]) -> list[ChunkRow]:
        """Backend rows for validated chunks: missing vectors embedded in one batch, terms tokenised."""
        need = [i for i, (_, v) in enumerate(batch) if v is None]
        vectors: list[np.ndarray | None] = [v for _, v in batch]
        if need:
            # A text the batch holds more than once (a tool polled until its job was done) is
            # embedded once: the model's cost is per text, and one text gets one vector.
            texts = [batch[i][0].content for i in need]
            distinct = list(dict.fromkeys(texts))
            embedded = dict(zip(distinct, (self.check_vector(v) for v in self.shared.embedder.embed_documents(distinct))))
            for i, text in zip(need, texts):
                vectors[i] = embedded[text].copy()
        ready = [v for v in vectors if v is not None]
        self.shared.record_embedder(len(ready[0]))
        tok = self.shared.tokenizer
        # Each row names the model its vector is for (a given vector too: it must be for the
        # model this BeeWeave uses); the backend refuses it if the store moved to another.
        model = self.shared.embedder.name
        return [ChunkRow(c, v, tok(c.content), model) for (c, _), v in zip(batch, ready)]

    # -- reading -------------------------------------------------------------------------
    def get(self, chunk_id: str) -> KnowledgeChunk:
        check_id(chunk_id)
        got = self.shared.backend.get([chunk_id])
        if chunk_id not in got:
            raise NotFoundError(f"no chunk with id {chunk_id!r}")
        return got[chunk_id]

    def get_many(self, chunk_ids: str | Iterable[str]) -> list[KnowledgeChunk]:
        ids = id_list(chunk_ids)
        got = self.shared.backend.get(ids)
        return [got[i] for i in ids if i in got]

    def count(self, *, user_id: str | None = None, filters: Mapping[str, Any] | None = None) -> int:
        if user_id is None and filters is None:
            return self.shared.backend.count(None)
        return self.shared.backend.count(build_filter(filters, user_id=user_id, now=self.shared.clock(),
                                                       declared=self.shared.declared_fields))

    # -- deleting ------------------------------------------------------------------------
    def delete(self, chunk_id: str) -> bool:
        return bool(self.delete_many([check_id(chunk_id)]))

    def delete_many(self, chunk_ids: str | Iterable[str], *,
                    only_if: Callable[[KnowledgeChunk], bool] | None = None,
                    first: Callable[[list[str]], None] | None = None) -> list[str]:
        """Delete and tell: ``memory.deleted`` events and the ``on_delete`` hooks. With
        ``only_if``, only the records it holds for when the delete reads them
        (``StoreBackend.delete_if``): a deletion decided earlier spares what changed since.
        ``first`` gets the ids deleted before they are announced (why they went comes first)."""
        ids = id_list(chunk_ids)
        backend = self.shared.backend
        before = backend.get(ids)  # the deleted records' sessions and tags, for the hooks and events
        gone = backend.delete(ids) if only_if is None else backend.delete_if(ids, only_if)
        if first is not None:
            first(gone)
        for cid in gone:
            self.shared.emit(EventType.DELETED, before.get(cid), chunk_id=cid)
        for hook in self.shared.hooks.on_delete:
            hook(before, gone)
        return gone

    def forget_user(self, user_id: str) -> int:
        """Delete everything of a user (``StoreBackend.delete_user``) and tell subscribers each
        memory is gone (``memory.deleted``, with its id and user only); return how many
        memories were deleted."""
        backend = self.shared.backend
        ids = backend.scan_ids(build_filter({"status": ALL_STATUSES}, user_id=user_id))
        deleted = int(backend.delete_user(user_id))
        for cid in ids:
            self.shared.emit(EventType.DELETED, None, chunk_id=cid, user_id=user_id)
        return deleted

    # -- changing ------------------------------------------------------------------------
    def update(self, chunk_id: str, *, trusted: bool = False, versioned: bool = True,
               **changes: Any) -> KnowledgeChunk:
        if not isinstance(versioned, bool):
            raise InvalidInputError("versioned must be True or False")
        return self.revise(chunk_id, changes, trusted=trusted, reason="edit" if versioned else None)

    def revise(self, chunk_id: str, changes: Mapping[str, Any], *, trusted: bool = False,
               reason: str | None = "edit") -> KnowledgeChunk:
        """``update``, whose earlier version, when the edit changes what the memory says (its
        text), goes to the memory's version history (``history()``) with ``reason``
        (``None``: replaced without a version, as a key-value store's put replaces a value).

        Only a new text makes a version: tags, metadata, weight, status and the like are
        bookkeeping the lifecycle changes all the time, and each version keeps the memory's
        whole state anyway. The version is written just before the record, under the write
        lock and after every check: bad input records nothing, and a crash in between leaves
        a spare version (the current state), never a lost one. Should another process change
        the text between the two, the state the edit really replaced is recorded too.
        """
        if "id" in changes:
            raise InvalidInputError("a chunk's id cannot change")
        if not isinstance(trusted, bool):
            raise InvalidInputError("trusted must be True or False")
        changes = dict(changes)
        if not trusted and self.policy is not None:
            # An edit must not store what add() would have redacted.
            changes = self.policy.changes(changes)
        if "content" in changes:
            changes["raw_content"] = changes.pop("content")
        pc = changes.get("processed_content")
        if pc is not None and not isinstance(pc, (ProcessedContent, dict)):
            raise InvalidInputError(
                f"processed_content must be a ProcessedContent or a dict, got {type(pc).__name__}")
        current = self.get(chunk_id)
        if not trusted and self.policy is not None:  # a new owner: the scopes' write rules apply
            self.policy.check_move(current, changes)
        new = self.changed(current, changes)  # every check runs before anything is written
        # Embedding is slow: done now, outside any lock, for the text this update gives.
        rows = self.rows([(new, None)]) if new.content != current.content else []
        replaced: list[KnowledgeChunk] = []  # the record as the write found it, if it said something else

        def change(found: dict[str, KnowledgeChunk]) -> list[KnowledgeChunk | ChunkRow]:
            fresh = found.get(chunk_id)
            if fresh is None:
                raise NotFoundError(f"no chunk with id {chunk_id!r} (deleted meanwhile)")
            out = self.changed(fresh, changes)
            replaced[:] = [fresh] if _says(fresh) != _says(out) else []
            if out.content == fresh.content:
                return [out]
            if rows and rows[0].chunk.content == out.content:
                return [ChunkRow(out, rows[0].vector, rows[0].terms, rows[0].model)]
            # Another update changed the text this one derives from: embed that (rare).
            vec = self.check_vector(self.shared.embedder.embed_documents([out.content])[0])
            return [ChunkRow(out, vec, self.shared.tokenizer(out.content), self.shared.embedder.name)]

        backend = self.shared.backend
        if rows:
            # A new text's vector is refused by the write if another process moved the store to
            # another model; asked first too, so such an edit records no version either.
            check_model(rows, backend.get_meta("embedder"))
        with self.shared.write_lock:  # no feedback, access or other update of this process interleaves
            before = None
            if reason is not None and _says(current) != _says(new):
                # Read again under the lock: another thread may have changed it meanwhile.
                before = backend.get([chunk_id]).get(chunk_id)
                if before is not None and _says(before) != _says(self.changed(before, changes)):
                    record_version(backend, before, reason, self.shared.clock())
                else:
                    before = None
            backend.modify([chunk_id], change)
            if reason is not None and replaced and (before is None or _says(replaced[0]) != _says(before)):
                record_version(backend, replaced[0], reason, self.shared.clock())
        out = self.get(chunk_id)
        self.shared.emit(EventType.UPDATED, out, fields=sorted(changes))
        return out

    def changed(self, chunk: KnowledgeChunk, changes: Mapping[str, Any]) -> KnowledgeChunk:
        """``chunk`` with ``changes`` (field -> value) applied, validated as on the way in."""
        data = chunk.to_dict()
        unknown = set(changes) - set(data)
        if unknown:
            raise InvalidInputError(f"unknown KnowledgeChunk fields: {sorted(unknown)}")
        if "raw_content" in changes and "processed_content" not in changes:
            data["processed_content"] = None  # derived from the old text: re-derive from the new one
        data.update(changes)
        data.pop("relationships")
        try:
            new = KnowledgeChunk.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(str(exc)) from None
        check_chunk(new)
        return new

    # -- moving to another model ------------------------------------------------------------
    def reembed(self, embedder: Any, *, batch_size: int = 256, show_progress: bool = False) -> int:
        if batch_size < 1:
            raise InvalidInputError("batch_size must be at least 1")
        return reembed(self.shared, as_embedder(embedder), batch_size=batch_size, show_progress=show_progress)
