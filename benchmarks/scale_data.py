"""Synthetic stores of any size for the scale benchmark (benchmarks/scale.py).

Text: the LoCoMo development split replayed conversation by conversation. Copy ``c`` is
conversation ``c % 5`` with " (copy c)" appended to every turn, so that no two texts are
equal; each copy keeps its conversation's sessions (session id ``f"{c}-{session}"``) so
that session context is built as for real conversations, and belongs to user
``f"user-{c % users}"``.

Vectors (``Vectors``), the same for every system of a run so that only retrieval is timed;
``Precomputed`` hands them out where a system insists on calling an embedding model:

- ``random``: seeded uniformly random unit vectors (dim 384, MiniLM's) for memories, queries
  and additions. No structure at all: the worst case for an approximate (HNSW) search.
- ``text``: the real MiniLM embeddings of the LoCoMo turns and questions (computed once with
  the bundled model, offline, and cached outside the repository). Copy ``c`` of turn ``i``
  gets ``normalize(e_i + noise)``, with seeded Gaussian noise of standard deviation
  ``COPY_NOISE`` per dimension, so that a copy has a cosine of about 0.9 with its turn's
  embedding (and about 0.81 with another copy of the same turn). Copies stand for
  paraphrases, not duplicates: a million distinct memories of one conversation domain would
  be about as close as MiniLM puts paraphrases (0.8-0.9), and exact duplicates would give the
  graph ties that real memories do not have. Queries are the questions' own embeddings (no
  noise: a question is a real text, and one text always has one vector); an addition gets
  its source turn's embedding plus noise, like a copy.
"""

from __future__ import annotations

import bisect
import hashlib
import tempfile
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
VECTOR_MODES = ("random", "text")
# Per-dimension noise of a copy in "text" mode. For a unit e and noise n ~ N(0, s^2 I_d),
# cos(e, e + n) ~ 1 / sqrt(1 + d s^2); d s^2 = 1 / 0.9^2 - 1 gives a cosine of 0.9.
COPY_COSINE = 0.9
COPY_NOISE = float(np.sqrt((1 / COPY_COSINE**2 - 1) / DIM))
DEFAULT_CACHE_DIR = Path(tempfile.gettempdir()) / "beeweave-scale-vectors"


def gaussian_rows(seed: int, start: int, stop: int, dim: int = DIM) -> np.ndarray:
    """Rows ``start:stop`` of an endless seeded sequence of standard normal vectors (float32)."""
    out = np.empty((max(stop - start, 0), dim), np.float32)
    for block in range(start // _BLOCK, (stop + _BLOCK - 1) // _BLOCK):
        rng = np.random.default_rng([seed, block])
        vecs = rng.standard_normal((_BLOCK, dim), dtype=np.float32)
        lo, hi = max(start, block * _BLOCK), min(stop, (block + 1) * _BLOCK)
        out[lo - start : hi - start] = vecs[lo - block * _BLOCK : hi - block * _BLOCK]
    return out


def _unit(vecs: np.ndarray) -> np.ndarray:
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs


def unit_vectors(seed: int, start: int, stop: int, dim: int = DIM) -> np.ndarray:
    """Rows ``start:stop`` of an endless seeded sequence of random unit vectors (float32)."""
    return _unit(gaussian_rows(seed, start, stop, dim))


@dataclass(frozen=True)
class ScaleMemory:
    """One memory of a synthetic store: a LoCoMo turn in copy ``copy``."""

    id: str
    content: str
    user_id: str
    session_id: str
    source: Turn
    turn_no: int  # the source turn's position in one pass over every conversation

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
                           user_id=f"user-{copy % users}", session_id=f"{copy}-{turn.session}", source=turn,
                           turn_no=pos)

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

    def queries(self, count: int, users: int, vectors: Vectors | None = None) -> list[Query]:
        """LoCoMo questions (cycled), each asked by one user, with its vector (default: random)."""
        vecs = (vectors or Vectors(self)).queries(count)
        return [Query(self.questions[i % len(self.questions)].question, f"user-{i % users}", vecs[i])
                for i in range(count)]

    def turn_texts(self) -> list[str]:
        """The turns of one pass over every conversation, in ``turn_no`` order."""
        return [t.content for c in self.convs for t in c.turns]


def _embed_texts(corpus: ScaleCorpus, cache_dir: Path) -> Path:
    """Embed the corpus's turns and questions with the bundled MiniLM once; return the cache file.

    The file is named by a hash of the model and the texts, so another data split or model
    never reuses it. The default embedder's query and document prefixes are both empty, so
    embedding the questions as documents (batched) gives what ``embed_query`` gives.
    """
    from beeweave_core.embedders import DEFAULT_MODEL_NAME, SentenceTransformerEmbedder

    turns, questions = corpus.turn_texts(), [q.question for q in corpus.questions]
    unique = list(dict.fromkeys([*turns, *questions]))
    digest = hashlib.sha256("\0".join([DEFAULT_MODEL_NAME, *unique]).encode()).hexdigest()[:16]
    path = Path(cache_dir) / f"locomo-minilm-{digest}.npz"
    if path.exists():
        return path
    vecs = SentenceTransformerEmbedder(batch_size=64).embed_documents(unique)
    row = {t: i for i, t in enumerate(unique)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{np.random.default_rng().integers(1 << 30)}.tmp.npz")
    np.savez(tmp, turns=vecs[[row[t] for t in turns]], questions=vecs[[row[q] for q in questions]])
    tmp.replace(path)  # atomic: a concurrent or killed run never leaves a torn cache
    return path


def ensure_text_embeddings(data_dir: str, cache_dir: str | None = None) -> str:
    """Compute (or find) the cached MiniLM embeddings of a data split; return the file's path."""
    return str(_embed_texts(ScaleCorpus.load(Path(data_dir)), Path(cache_dir or DEFAULT_CACHE_DIR)))


class Vectors:
    """The vectors of one run (see the module docstring): ``random`` or ``text``.

    ``text`` needs the embeddings file that ``ensure_text_embeddings`` writes; it is read,
    never computed, here, so that benchmark workers never load the model.
    """

    def __init__(self, corpus: ScaleCorpus, mode: str = "random", embeddings: str | Path | None = None,
                 noise: float = COPY_NOISE) -> None:
        if mode not in VECTOR_MODES:
            raise ValueError(f"vector mode must be one of {VECTOR_MODES}, not {mode!r}")
        self.mode, self.noise = mode, noise
        if mode == "text":
            if embeddings is None:
                raise ValueError("text vectors need the embeddings file of ensure_text_embeddings")
            with np.load(embeddings) as data:
                self._turns, self._questions = data["turns"], data["questions"]
            if len(self._turns) != corpus.cycle or len(self._questions) != len(corpus.questions):
                raise ValueError(f"{embeddings} does not match the corpus")

    def _copies(self, turn_nos: np.ndarray, seed: int, start: int) -> np.ndarray:
        noise = gaussian_rows(seed, start, start + len(turn_nos))
        noise *= self.noise
        noise += self._turns[turn_nos]
        return _unit(noise)

    def store(self, start: int, stop: int) -> np.ndarray:
        """Vectors of memories ``start:stop`` of a store (``ScaleCorpus.memory_at`` order)."""
        if self.mode == "random":
            return unit_vectors(STORE_SEED, start, stop)
        return self._copies(np.arange(start, stop) % len(self._turns), STORE_SEED, start)

    def queries(self, count: int) -> np.ndarray:
        """Vectors of the first ``count`` queries (``ScaleCorpus.queries`` order)."""
        if self.mode == "random":
            return unit_vectors(QUERY_SEED, 0, count)
        return self._questions[np.arange(count) % len(self._questions)].copy()

    def added(self, additions: Sequence[ScaleMemory]) -> np.ndarray:
        """Vectors of ``ScaleCorpus.additions``."""
        if self.mode == "random":
            return unit_vectors(ADDED_SEED, 0, len(additions))
        return self._copies(np.array([m.turn_no for m in additions], np.int64), ADDED_SEED, 0)


class Precomputed:
    """Stands in for the embedding model: returns the vector precomputed for a known text.

    It is a BeeWeave ``Embedder`` (``name``, ``dim``, ``embed_documents``, ``embed_query``)
    and has the ``encode`` of locomo_peers' shared model, so the peers' LangChain and
    LlamaIndex adapters can wrap it unchanged. An unknown text is a benchmark bug: KeyError.
    """

    def __init__(self, name: str = "scale-benchmark:random-unit-384") -> None:
        self.name = name
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
