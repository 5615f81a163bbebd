"""Helpers shared by several test modules: random data, reference predicates and
snapshots of a store's observable state."""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from beeweave_core import BeeWeave, ChunkStatus, HashingEmbedder, KnowledgeChunk
from beeweave_core.filters import FILTER_KEYS, build_filter
from beeweave_core.records import to_datetime

# English words with stop words and inflections, so the tokenizer's stemming and
# stop-word removal are part of what is compared.
WORDS = (
    "agent memory remembers preference python running runs ran runner database query vector search "
    "index weave bee honey garden deploy deployment kubernetes cluster server latency cache user answer "
    "question language chinese english model embedding token tokenizer filter session tag time weather "
    "coffee tea morning evening meeting project deadline budget report invoice travel flight hotel "
    "the a of and to is in it that was for on are with as"
).split()


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def sentence(rnd: random.Random, lo: int = 3, hi: int = 14, words: Sequence[str] = WORDS) -> str:
    return " ".join(rnd.choice(words) for _ in range(rnd.randint(lo, hi)))


def term_counts(tokens: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in tokens:
        out[t] = out.get(t, 0) + 1
    return out


def all_statuses_filter():
    return build_filter({"status": [s.value for s in ChunkStatus]})


def live_ids(m: BeeWeave) -> set[str]:
    return {c.id for c in m.backend.scan(all_statuses_filter())}


def search_results(m: BeeWeave, queries: Sequence[str], **kw: Any) -> list[list[tuple[str, float]]]:
    return [[(h.id, h.score) for h in m.search(q, **kw)] for q in queries]


# Searching records accesses (written later, in batches), so a store's own searches
# change these two fields; everything else must stay put.
ACCESS_FIELDS = ("access_count", "last_accessed")


def stable_dict(chunk: KnowledgeChunk) -> dict:
    """A chunk's dict without access bookkeeping, its relationships in a fixed order."""
    d = chunk.to_dict()
    for f in ACCESS_FIELDS:
        d.pop(f, None)
    d["relationships"] = sorted(d["relationships"], key=lambda r: (r["source_id"], r["target_id"], r["type"]))
    return d


def snapshot(m: BeeWeave, queries: Sequence[str] = ("python memory", "deploy kubernetes", "coffee")) -> dict:
    """Everything a caller can observe cheaply: count, stored records and search results."""
    chunks = sorted(json.dumps(stable_dict(c), sort_keys=True) for c in m.backend.scan(all_statuses_filter()))
    return {
        "count": m.count(),
        "chunks": chunks,
        "search": search_results(m, queries, k=10),
        "lexical": [m.backend.lexical_search(term_counts(m.tokenizer(q)), build_filter(None), 50) for q in queries],
        "embedder": m.backend.get_meta("embedder"),
    }


_ABSENT = object()  # a metadata key a memory does not have


def matches(chunk: KnowledgeChunk, filters: Mapping[str, Any] | None, user_id: str | None = None) -> bool:
    """A slow, obviously-correct reading of the filter semantics, for one chunk."""
    f = dict(filters or {})

    def as_set(v: Any) -> set[str]:
        vals = [v] if isinstance(v, str) or not hasattr(v, "__iter__") else list(v)
        return {getattr(x, "value", x) for x in vals}

    if user_id is not None and chunk.user_id != user_id:
        return False
    if "user_id" in f and chunk.user_id not in as_set(f["user_id"]):
        return False
    if "agent_id" in f and chunk.agent_id not in as_set(f["agent_id"]):
        return False
    if "session_id" in f and chunk.session_id not in as_set(f["session_id"]):
        return False
    statuses = as_set(f["status"]) if "status" in f else {"active"}
    if chunk.status.value not in statuses:
        return False
    if "type" in f and chunk.processed_content.type.value not in as_set(f["type"]):
        return False
    if "intent" in f and (chunk.intent is None or chunk.intent.value not in as_set(f["intent"])):
        return False
    any_tags = set()
    if "tags" in f:
        any_tags |= as_set(f["tags"])
    if "tags_any" in f:
        any_tags |= as_set(f["tags_any"])
    if any_tags and not any_tags & set(chunk.tags):
        return False
    if "tags_all" in f and not as_set(f["tags_all"]) <= set(chunk.tags):
        return False
    if "entities" in f and not as_set(f["entities"]) & set(chunk.entities):
        return False
    if "since" in f and chunk.timestamp < to_datetime(f["since"]):
        return False
    if "until" in f and chunk.timestamp > to_datetime(f["until"]):
        return False
    if "ids" in f and chunk.id not in as_set(f["ids"]):
        return False
    if "tier" in f and chunk.tier.value not in as_set(f["tier"]):
        return False
    for key, want in f.items():  # any other key is a declared metadata field: equal to one of
        if key in FILTER_KEYS:
            continue
        have = chunk.metadata.get(key, _ABSENT)
        if not any(w == have and isinstance(w, bool) == isinstance(have, bool)
                   and isinstance(w, str) == isinstance(have, str)
                   for w in (want if isinstance(want, (list, tuple, set)) else [want])):
            return False
    return True


def dt(year: int, month: int = 1, day: int = 1, hour: int = 0) -> datetime:
    return datetime(year, month, day, hour, tzinfo=timezone.utc)


@contextlib.contextmanager
def faiss_single_thread() -> Iterator[None]:
    """Build HNSW graphs on one thread: deterministic, and far faster on small CI
    machines where OpenMP oversubscribes the cores. Restores the setting after."""
    import faiss

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


class Recording(HashingEmbedder):
    """A small deterministic embedder that keeps every text it was given (privacy tests check
    that no planted personal data reaches the model)."""

    def __init__(self) -> None:
        super().__init__(32)
        self.seen: list[str] = []

    def embed_documents(self, texts: Any) -> np.ndarray:
        self.seen.extend(texts)
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        self.seen.append(text)
        return super().embed_query(text)


def frozen_clock() -> datetime:
    """A clock that never moves, for tests that compare scores across calls: weights decay
    continuously from timestamps, so the same search a millisecond later scores differently."""
    return FROZEN_NOW


FROZEN_NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
