"""Rerankers: a protocol, a cross-encoder (any sentence-transformers CrossEncoder by
name or local path, e.g. a bge-reranker), and MMR for diversity."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import InvalidInputError, MissingDependencyError, ModelLoadError
from .records import HitSource, SearchHit

__all__ = ["Reranker", "CrossEncoderReranker", "mmr"]


@runtime_checkable
class Reranker(Protocol):
    """Reorders hits for a query; returns new hits (never mutates the input)."""

    def rerank(self, query: str, hits: Sequence[SearchHit]) -> list[SearchHit]: ...


class CrossEncoderReranker:
    """Scores (query, memory) pairs with a sentence-transformers ``CrossEncoder``.

    Args:
        model: a model name (found in the local cache when offline) or a local directory,
            e.g. "BAAI/bge-reranker-base".
        device: torch device.
        batch_size: pairs per forward pass.
        max_length: token limit per pair.
    """

    def __init__(self, model: str, *, device: str = "cpu", batch_size: int = 32, max_length: int | None = 512) -> None:
        if not isinstance(model, str) or not model:
            raise InvalidInputError("model must be a model name or a path")
        self.model_name = model
        self.device, self.batch_size, self.max_length = device, batch_size, max_length
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._model is None:
            with self._lock:
                if self._model is None:
                    try:
                        from sentence_transformers import CrossEncoder
                    except ImportError as exc:
                        raise MissingDependencyError('CrossEncoderReranker needs sentence-transformers: pip install "beeweave-memory[sentence-transformers]"') from exc
                    from .quiet import quiet_model_loading

                    try:
                        with quiet_model_loading():  # a library draws no "Loading weights" bars
                            self._model = CrossEncoder(self.model_name, device=self.device,
                                                       max_length=self.max_length)
                    except (OSError, ValueError, RuntimeError) as exc:
                        raise ModelLoadError(f"cannot load the cross-encoder {self.model_name!r}: {exc}") from exc
        return self._model

    def rerank(self, query: str, hits: Sequence[SearchHit]) -> list[SearchHit]:
        if not hits:
            return []
        model = self._load()
        raw = model.predict([(query, h.chunk.content) for h in hits], batch_size=self.batch_size,
                            show_progress_bar=False)
        scores = np.asarray(raw, dtype=np.float64).reshape(len(hits), -1)[:, -1]
        order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))
        out = []
        for rank, i in enumerate(order, start=1):
            h = hits[i]
            out.append(replace(h, score=float(scores[i]),
                               sources={**h.sources, "rerank": HitSource(rank=rank, score=float(scores[i]))}))
        return out


def mmr(hits: Sequence[SearchHit], vectors: Mapping[str, np.ndarray], k: int, lambda_: float = 0.5) -> list[SearchHit]:
    """Maximal marginal relevance: trade relevance against similarity to what is already chosen.

    Relevance is the hit's score rescaled to [0, 1] over the candidates so it is on
    the same scale as cosine similarity.
    """
    if not 0.0 <= lambda_ <= 1.0:
        raise InvalidInputError("mmr lambda must be between 0 and 1")
    cand = [h for h in hits if h.id in vectors]
    if not cand:
        return list(hits[:k])
    scores = np.array([h.score for h in cand])
    span = scores.max() - scores.min()
    rel = (scores - scores.min()) / span if span > 0 else np.ones(len(cand))
    mat = np.stack([vectors[h.id] for h in cand]).astype(np.float64)
    sim = mat @ mat.T
    chosen: list[int] = []
    left = list(range(len(cand)))
    while left and len(chosen) < k:
        if chosen:
            redundancy = sim[np.ix_(left, chosen)].max(axis=1)
        else:
            redundancy = np.zeros(len(left))
        value = lambda_ * rel[left] - (1 - lambda_) * redundancy
        best = left[int(np.argmax(value))]
        chosen.append(best)
        left.remove(best)
    return [cand[i] for i in chosen]
