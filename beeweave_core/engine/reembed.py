"""Moving a store to another embedding model: resumable, all or nothing.

Embedding every memory is the slow part (minutes for 100k memories), so it is checkpointed:
each batch's vectors go to the store's key-value table (namespace ``reembed``, under the
batch's user, so that forgetting a user forgets them too) as soon as they are computed,
keyed by the new model and each memory's text digest. A run killed halfway starts again
where it stopped; a memory whose text changed meanwhile is embedded again. The store keeps
its old vectors and model until the last step, which reads every record under the backend's
write lock (``modify(None, ...)``) and writes every new vector and the new model's name in that
transaction, so another process's edit, delete or add just before it is neither reverted nor
left on the old model; then the checkpoint is deleted.

Another BeeWeave on the store opened before the switch (another process, usually) still
embeds with the old model. Every vector the engine writes names its model (``ChunkRow.model``)
and the backend refuses it, in the write's own transaction, when the store's recorded model is
another (``store.base.check_model``): that writer's adds and text edits raise
``EmbedderChangedError`` and store nothing until it opens the store again; its ingest worker
keeps the events queued. Its searches raise it too: each query vector names its model, and the
backend compares it with the model the store recorded for the vectors it searches, read where
they come in (``check_query_model``), so a stale process never ranks new-model vectors with an
old-model query.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..embedders import Embedder
from ..filters import build_filter
from ..records import ALL_STATUSES, KnowledgeChunk
from ..store.base import ChunkRow
from ..validation import check_vector

if TYPE_CHECKING:
    from .shared import Shared

__all__ = ["reembed"]

NAMESPACE = "reembed"


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def _load_checkpoint(shared: Shared, model: str) -> dict[str, tuple[str, np.ndarray]]:
    """Vectors already computed for ``model``: memory id -> (text digest, vector)."""
    done: dict[str, tuple[str, np.ndarray]] = {}
    for _key, value in shared.backend.kv_scan(NAMESPACE, model + "|"):
        vecs = np.frombuffer(base64.b64decode(value["vectors"]), dtype=np.float32).reshape(len(value["ids"]), -1)
        for cid, digest, vec in zip(value["ids"], value["digests"], vecs):
            done[cid] = (digest, vec)
    return done


def _clear_checkpoint(shared: Shared) -> None:
    for key, _ in list(shared.backend.kv_scan(NAMESPACE)):
        shared.backend.kv_delete(NAMESPACE, key)


def _pending(chunks: Iterable[KnowledgeChunk], done: dict[str, tuple[str, np.ndarray]]) -> list[KnowledgeChunk]:
    return [c for c in chunks if c.id not in done or done[c.id][0] != _digest(c.content)]


def _embed(shared: Shared, new: Embedder, chunks: Sequence[KnowledgeChunk], done: dict[str, tuple[str, np.ndarray]],
           batch_size: int, progress: object | None, checkpoint: bool) -> None:
    dim = int(new.dim)
    # One user's memories per batch: the checkpoint entry belongs to that user (forget-user finds it).
    for user, group in itertools.groupby(sorted(chunks, key=lambda c: (c.user_id, c.id)), key=lambda c: c.user_id):
        members = list(group)
        for start in range(0, len(members), batch_size):
            batch = members[start : start + batch_size]
            vecs = np.stack([check_vector(v, dim) for v in new.embed_documents([c.content for c in batch])])
            digests = [_digest(c.content) for c in batch]
            if checkpoint:
                shared.backend.kv_put(NAMESPACE, f"{new.name}|{batch[0].id}", {
                    "ids": [c.id for c in batch], "digests": digests,
                    "vectors": base64.b64encode(vecs.astype(np.float32).tobytes()).decode("ascii")}, user_id=user)
            for c, d, v in zip(batch, digests, vecs):
                done[c.id] = (d, v)
            if progress is not None:
                progress.update(len(batch))  # type: ignore[attr-defined]


def reembed(shared: Shared, new: Embedder, *, batch_size: int = 256, show_progress: bool = False) -> int:
    """Embed every memory with ``new`` and switch the store to it; returns how many memories."""
    backend = shared.backend
    everything = build_filter({"status": ALL_STATUSES})
    done = _load_checkpoint(shared, new.name)
    todo = _pending(backend.scan(everything), done)
    progress = None
    if show_progress:  # a library prints nothing unless asked (the CLI asks on a terminal)
        from tqdm.auto import tqdm

        progress = tqdm(total=len(todo), desc="beeweave reembed", unit="mem")
    try:
        _embed(shared, new, todo, done, batch_size, progress, checkpoint=True)
    finally:
        if progress is not None:
            progress.close()
    meta = json.dumps({"name": new.name, "dim": int(new.dim)})
    switched: list[int] = []

    def switch(current: dict[str, KnowledgeChunk]) -> list[ChunkRow]:
        # Every record as stored now, read under the backend's write lock: another process's
        # edit is kept, its delete stays deleted, and what it added or re-texted since the
        # pre-pass below is embedded here (a few records, while other writers wait).
        _embed(shared, new, _pending(current.values(), done), done, batch_size, None, checkpoint=False)
        switched.append(len(current))
        # No ``model`` on these rows: the switch is what sets the store's model (in this
        # transaction), and it rewrites every vector, whatever model the store had.
        return [ChunkRow(c, done[c.id][1], shared.tokenizer(c.content)) for c in current.values()]

    with shared.write_lock:
        # What was added or changed since the scan is embedded first, before the backend's
        # write lock, so other processes wait only for what changes in between. Then every
        # vector and the model's name in one transaction: a kill or a full disk leaves the
        # store wholly on the old model or wholly on the new one.
        _embed(shared, new, _pending(backend.scan(everything), done), done, batch_size, None, checkpoint=False)
        backend.modify(None, switch, meta={"embedder": meta})
        shared.switch_embedder(new)
    _clear_checkpoint(shared)
    return switched[-1]
