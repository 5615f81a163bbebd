"""What every part of a BeeWeave shares: the store, the models, the clock, the events,
one write lock, and the ordered hooks through which parts hear of each other's work.

Parts never reach into each other: the front class (:class:`beeweave_core.BeeWeave`)
builds them around one :class:`Shared` and wires the hooks in a fixed, visible order.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from ..embedders import Embedder
from ..errors import DimensionMismatchError
from ..events import EventBus, EventType, MemoryEvent
from ..fields import declared_fields
from ..records import KnowledgeChunk, SearchHit
from ..scoring import ScoringConfig
from ..store.base import StoreBackend
from ..store.links import Derive, LinkReads
from ..tokenizer import Tokenizer
from .search_config import SearchConfig

__all__ = ["Shared", "Hooks"]

InsertHook = Callable[[list[KnowledgeChunk], bool], None]  # (new chunks, link) after each committed batch
SearchHook = Callable[[list[SearchHit], datetime], None]  # (hits returned, when)
DeleteHook = Callable[[dict[str, KnowledgeChunk], list[str]], None]  # (records before, ids gone)
# (new chunks, their vectors by id) -> what linking them reads, and how their edges follow
LinkHook = Callable[[Sequence[KnowledgeChunk], Mapping[str, np.ndarray]], tuple[LinkReads, Derive]]


@dataclass
class Hooks:
    """Ordered lists of callbacks, run in list order (the front class fills them)."""

    # Links new memories inside their insert (StoreBackend.insert_linked), before on_insert.
    link: LinkHook | None = None
    on_insert: list[InsertHook] = field(default_factory=list)
    on_search: list[SearchHook] = field(default_factory=list)
    on_delete: list[DeleteHook] = field(default_factory=list)
    # Before the backend persists; each gets the seconds left of flush()'s timeout (None: no limit).
    on_flush: list[Callable[[float | None], object]] = field(default_factory=list)
    on_close: list[Callable[[], None]] = field(default_factory=list)  # before the backend closes


class Shared:
    """The context every part is given.

    Attributes:
        backend: the storage backend (rows, indexes, edges, key-value state).
        embedder: the embedding model; ``reembed`` replaces it.
        tokenizer: the store's tokenizer (its configuration is recorded in the store).
        events: the in-process event bus.
        clock: returns "now" as an aware datetime; tests pass a controllable one.
        config / scoring: search defaults and ranking factors.
        write_lock: held around every read-modify-write of records (update, feedback,
            lifecycle changes, access write-back), so none of them interleave.
    """

    def __init__(self, backend: StoreBackend, embedder: Embedder, tokenizer: Tokenizer, *,
                 clock: Callable[[], datetime], config: SearchConfig, scoring: ScoringConfig) -> None:
        self.backend = backend
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.clock = clock
        self.config = config
        self.scoring = scoring
        self.events = EventBus()
        self.hooks = Hooks()
        self.write_lock = threading.RLock()
        self._dim: int | None = None

    @property
    def dim(self) -> int | None:
        """The store's vector dimension (None until the first vector is stored)."""
        if self._dim is None:  # cached: asked on every search with a query vector
            stored = self.backend.get_meta("embedder")
            self._dim = json.loads(stored)["dim"] if stored else None
        return self._dim

    def declared_fields(self) -> dict[str, str]:
        """The store's declared metadata fields, read from the backend each time (another
        process may declare one); filters only ask when a key is not built in."""
        return declared_fields(self.backend)

    def record_embedder(self, dim: int) -> None:
        """Remember the model and dimension with the first vectors; refuse another dimension."""
        if self._dim == dim:
            return
        stored = self.backend.get_meta("embedder")
        if stored is None:
            self.backend.set_meta("embedder", json.dumps({"name": self.embedder.name, "dim": dim}))
            self._dim = dim
        elif json.loads(stored)["dim"] != dim:
            raise DimensionMismatchError(
                f"vectors of dimension {dim} cannot go into a store of dimension {json.loads(stored)['dim']}")

    def switch_embedder(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._dim = int(embedder.dim)

    def emit(self, type_: EventType, chunk: KnowledgeChunk | None, *, chunk_id: str | None = None,
             user_id: str | None = None, **data: Any) -> None:
        """An event about ``chunk`` (or, with no record at hand, about ``chunk_id`` of ``user_id``)."""
        if not self.events.active:
            return
        self.events.emit(MemoryEvent(
            type_, chunk.id if chunk else chunk_id, chunk.user_id if chunk else user_id,
            chunk.agent_id if chunk else None, tuple(chunk.tags) if chunk else (), data, self.clock()))
