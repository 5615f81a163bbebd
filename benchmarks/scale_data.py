"""Synthetic stores of any size for the scale benchmark (benchmarks/scale.py).

Text: the LoCoMo development split replayed conversation by conversation. Copy ``c`` is
conversation ``c % 5`` with " (copy c)" appended to every turn, so that no two texts are
equal; each copy keeps its conversation's sessions (session id ``f"{c}-{session}"``) so
that session context is built as for real conversations, and belongs to user
``f"user-{c % users}"``.

Vectors: seeded random unit vectors (dim 384, MiniLM's), the same for every system, so
that only retrieval is timed. ``Precomputed`` hands them out where a system insists on
calling an embedding model.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

try:  # imported as a package module or as a script's sibling
    from .locomo_data import Conversation, Question, Turn, load_locomo
except ImportError:
    from locomo_data import Conversation, Question, Turn, load_locomo  # type: ignore[no-redef]

DIM = 384
# One seed per kind of vector, so that changing the number of queries or additions
# leaves the stored vectors as they were.
STORE_SEED, QUERY_SEED, ADDED_SEED = 1, 2, 3
_BLOCK = 8192  # vectors are generated in seeded blocks: any slice is reproducible alone


def unit_vectors(seed: int, start: int, stop: int, dim: int = DIM) -> np.ndarray:
    """Rows ``start:stop`` of an endless seeded sequence of random unit vectors (float32)."""
    out = np.empty((max(stop - start, 0), dim), np.float32)
    for block in range(start // _BLOCK, (stop + _BLOCK - 1) // _BLOCK):
        rng = np.random.default_rng([seed, block])
        vecs = rng.standard_normal((_BLOCK, dim), dtype=np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        lo, hi = max(start, block * _BLOCK), min(stop, (block + 1) * _BLOCK)
        out[lo - start : hi - start] = vecs[lo - block * _BLOCK : hi - block * _BLOCK]
    return out


@dataclass(frozen=True)
class ScaleMemory:
    """One memory of a synthetic store: a LoCoMo turn in copy ``copy``."""

    id: str
    content: str
    user_id: str
    session_id: str
    source: Turn

    def record(self, vector: np.ndarray) -> dict[str, Any]:
        """The memory as a BeeWeave ``add_many`` record with a precomputed vector."""
        return {"content": self.content, "user_id": self.user_id, "session_id": self.session_id,
                "chunk_id": self.id, "timestamp": self.source.timestamp, "embedding": vector}

    def turn(self) -> Turn:
        """The memory as a LoCoMo turn, the input of the peers in locomo_peers."""
        return replace(self.source, dia_id=self.id, content=self.content)


@dataclass(frozen=True)
class Query:
    text: str
    user_id: str
    vector: np.ndarray


class ScaleCorpus:
    """Memories, additions and queries built from the LoCoMo development split."""

    def __init__(self, convs: Sequence[Conversation], questions: Sequence[Question]) -> None:
        if not convs or not questions:
            raise ValueError("the scale corpus needs conversations with turns and questions")
        self.convs = list(convs)
        self.questions = list(questions)
        self._starts = np.cumsum([0] + [len(c.turns) for c in self.convs]).tolist()
        self.cycle = self._starts[-1]  # turns in one pass over every conversation

    @classmethod
    def load(cls, data_dir: Path) -> ScaleCorpus:
        return cls(*load_locomo(data_dir))

    def memory_at(self, index: int, users: int) -> ScaleMemory:
        """Memory number ``index`` of a store whose copies are spread over ``users`` users."""
        rep, pos = divmod(index, self.cycle)
        conv_no = bisect.bisect_right(self._starts, pos) - 1
        turn = self.convs[conv_no].turns[pos - self._starts[conv_no]]
        copy = rep * len(self.convs) + conv_no
        return ScaleMemory(id=f"{copy}:{turn.dia_id}", content=f"{turn.content} (copy {copy})",
                           user_id=f"user-{copy % users}", session_id=f"{copy}-{turn.session}", source=turn)

    def memories(self, start: int, stop: int, users: int) -> Iterator[ScaleMemory]:
        return (self.memory_at(i, users) for i in range(start, stop))

    def additions(self, count: int, n: int, users: int) -> list[ScaleMemory]:
        """New memories for a store of ``n``: each continues a session already in the store."""
        stride = max(n // max(count, 1), 1)
        out = []
        for i in range(count):
            m = self.memory_at((i * stride) % n, users)
            out.append(replace(m, id=f"added-{i}", content=f"{m.source.content} (added {i})"))
        return out

    def queries(self, count: int, users: int) -> list[Query]:
        """LoCoMo questions (cycled), each asked by one user, with a random query vector."""
        vecs = unit_vectors(QUERY_SEED, 0, count)
        return [Query(self.questions[i % len(self.questions)].question, f"user-{i % users}", vecs[i])
                for i in range(count)]


class Precomputed:
    """Stands in for the embedding model: returns the vector precomputed for a known text.

    It is a BeeWeave ``Embedder`` (``name``, ``dim``, ``embed_documents``, ``embed_query``)
    and has the ``encode`` of locomo_peers' shared model, so the peers' LangChain and
    LlamaIndex adapters can wrap it unchanged. An unknown text is a benchmark bug: KeyError.
    """

    name = "scale-benchmark:random-unit-384"

    def __init__(self) -> None:
        self._vectors: dict[str, np.ndarray] = {}

    def add(self, texts: Iterable[str], vectors: np.ndarray) -> None:
        self._vectors.update(zip(texts, vectors))

    @property
    def dim(self) -> int:
        return DIM

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._vectors[t] for t in texts]) if len(texts) else np.zeros((0, DIM), np.float32)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self._vectors[text]
