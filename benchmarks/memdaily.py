"""BeeWeave's default configuration on MemDaily (Chinese), side by side with the peers in one run.

Usage:
    python benchmarks/memdaily.py [DATA_DIR] [--systems beeweave,bm25-jieba,faiss,langchain,llamaindex]
                                  [--files 01_simple_events,...] [--lofo] [--vectors CACHE.pkl]
                                  [--one-session] [--per-trajectory]

DATA_DIR defaults to ../shared/data/memdaily (the development split; its README defines the
measure, ``memdaily_data`` implements it). One store per file, one user per file, every
message one memory with its time as timestamp and no session. Query times include the
query's embedding for every system. ``--one-session`` gives BeeWeave every message of a file
under one session id (a batch of notes sharing a session): session context must not fold
them into each other, so recall should equal the run without it.

``--per-trajectory`` is not the README's measure: every trajectory is its own user (its few
messages the whole store, as in MemSim's own setting), so "my boss" is one person again. A
file of the README's measure pools 100 unrelated trajectories under one user, where a question
such as "我表弟现在多大了呀？" has one gold message among many that state some cousin's age and
nothing in the question tells them apart; this run shows how much of the gap to perfect
recall is that pooling rather than the reading of the question.

``--lofo`` adds the leave-one-file-out check: for each of the 10 files, the setting of the
grid below that does best (mean R@10) on the other 9 files is measured on the held-out
file; the table compares the defaults with those tuned-elsewhere settings. If the defaults
are as good as what tuning on other files picks, the defaults were not fitted to these files.

``--vectors CACHE.pkl``: BeeWeave (and the check) take the default model's vectors of the
messages and questions from this cache (written on the first run; a development aid on a
busy machine). BeeWeave's query time then excludes the query's embedding, so report times
from a run without it. Recall is close to, not equal to, a run without it: a question that
search splits into its parts, or whose time phrase becomes a filter, is searched with the
whole question's vector instead of each part's (403 of the 1,000 questions; R@10 0.532 with
the cache against 0.548 without, 2026-12-06): report recall from a run without it too.
"""

from __future__ import annotations

import os

# Scripts may set these (library code may not): nothing here may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import argparse
import itertools
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import locomo_peers  # noqa: E402
from locomo_data import recall_at_k  # noqa: E402
from memdaily_data import DEFAULT_DATA_DIR, Message, Question, UserFile, load_memdaily  # noqa: E402

from beeweave_core import BeeWeave  # noqa: E402
from beeweave_core.embedders import as_embedder  # noqa: E402
from beeweave_core.engine import SearchConfig  # noqa: E402


class BeeWeaveDefault:
    """BeeWeave with its defaults: a fresh store per file, one user per file, no session."""

    name = "beeweave"
    label = "BeeWeave default configuration (BM25 + multilingual-e5-small, z-score fusion)"

    def __init__(self, embedder: Any = None, config: SearchConfig | None = None,
                 vectors: dict[str, np.ndarray] | None = None, session: str | None = None) -> None:
        self._session = session
        self._embedder = embedder or as_embedder(None)
        self._config = config
        self._vectors = vectors  # precomputed memory/query vectors (the tuning grid reuses them)
        self._memory: BeeWeave | None = None
        self._user = ""

    def index(self, turns: Sequence[Message]) -> None:
        if self._memory is not None:
            self._memory.close()
        self._memory = BeeWeave(embedder=self._embedder, config=self._config)
        self._user = turns[0].conv_id if turns else "empty"
        records: list[dict[str, Any]] = []
        for t in turns:
            rec: dict[str, Any] = {"content": t.content, "user_id": self._user, "chunk_id": t.dia_id,
                                   "timestamp": t.timestamp, "session_id": self._session}
            if self._vectors is not None:
                rec["embedding"] = self._vectors[t.content]
            records.append(rec)
        # An import of the dataset as it is: no redaction or admission changes it.
        self._memory.add_many(records, show_progress=False, trusted=True)

    def query(self, text: str, k: int) -> list[str]:
        assert self._memory is not None
        qvec = None if self._vectors is None else self._vectors[text]
        # the ranking is what is measured: the gate off (it would silence a question, not reorder it)
        return [h.id for h in self._memory.search(text, user_id=self._user, k=k, query_embedding=qvec,
                                                  abstain_below=0)]


def _jieba_tokens(text: str) -> list[str]:
    import jieba

    return [w for w in jieba.lcut_for_search(text.lower()) if w.strip()]


class RankBM25Jieba:
    name = "bm25-jieba"
    label = "rank_bm25 BM25Okapi over `jieba.lcut_for_search` (lowercased, blanks dropped)"

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._bm25: Any = None

    def index(self, turns: Sequence[Message]) -> None:
        from rank_bm25 import BM25Okapi

        self._ids = [t.dia_id for t in turns]
        self._bm25 = BM25Okapi([_jieba_tokens(t.content) for t in turns])

    def query(self, text: str, k: int) -> list[str]:
        scores = self._bm25.get_scores(_jieba_tokens(text))
        order = np.argsort(-scores, kind="stable")[:k]  # ties keep file order: reproducible
        return [self._ids[i] for i in order]


SYSTEMS = {
    "beeweave": lambda enc: BeeWeaveDefault(),
    "bm25-jieba": lambda enc: RankBM25Jieba(),
    "faiss": lambda enc: locomo_peers.MiniLMFaiss(enc()),
    "langchain": lambda enc: locomo_peers.LangChainEnsemble(enc()),
    "llamaindex": lambda enc: locomo_peers.LlamaIndexFusion(enc()),
}
LABELS = {
    "langchain": "LangChain EnsembleRetriever(BM25Retriever, FAISS), configured as in ../locomo/README.md",
    "llamaindex": "LlamaIndex QueryFusionRetriever(BM25Retriever, vector), configured as in ../locomo/README.md",
}

KS = (1, 3, 5, 10, 20)


# --- leave-one-file-out ------------------------------------------------------------------------

# The grid: knobs a user could set without touching the code (search weights, candidate depth).
GRID = {
    "vector": (0.25, 0.5, 1.0, 2.0),
    "lexical": (1.0,),
    "candidates": (50, 100),
}


def _per_question(system: Any, files: Sequence[UserFile], questions: Sequence[Question],
                  k: int) -> dict[str, list[float]]:
    """R@k of every question, per file."""
    by_file: dict[str, list[Question]] = {}
    for q in questions:
        by_file.setdefault(q.conv_id, []).append(q)
    out: dict[str, list[float]] = {}
    for f in files:
        system.index(f.turns)
        out[f.conv_id] = [recall_at_k(system.query(q.question, k), q.evidence, k) for q in by_file.get(f.conv_id, [])]
    return out


def model_vectors(files: Sequence[UserFile], questions: Sequence[Question],
                  cache: Path | None) -> dict[str, np.ndarray]:
    """The default model's vectors of every message and question, from ``cache`` if it has them all."""
    import pickle

    texts = list(dict.fromkeys([t.content for f in files for t in f.turns]))
    queries = list(dict.fromkeys(q.question for q in questions))
    vecs: dict[str, np.ndarray] = {}
    if cache is not None and cache.exists():
        with cache.open("rb") as fh:
            vecs = pickle.load(fh)  # our own file, written below
    if all(t in vecs for t in texts + queries):
        return vecs
    emb = as_embedder(None)
    vecs = dict(zip(texts, emb.embed_documents(texts), strict=True))
    vecs.update({q: emb.embed_query(q) for q in queries})
    if cache is not None:
        with cache.open("wb") as fh:
            pickle.dump(vecs, fh)
    return vecs


def lofo(files: Sequence[UserFile], questions: Sequence[Question], cache: Path | None) -> None:
    emb = as_embedder(None)
    vecs = model_vectors(files, questions, cache)
    settings = [dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())]
    default = SearchConfig()
    k = 10
    results: list[dict[str, list[float]]] = []
    for s in settings:
        cfg = SearchConfig(weights={"lexical": s["lexical"], "vector": s["vector"]}, candidates=s["candidates"])
        results.append(_per_question(BeeWeaveDefault(emb, cfg, vecs), files, questions, k))
    base = _per_question(BeeWeaveDefault(emb, default, vecs), files, questions, k)

    def mean(rows: list[float]) -> float:
        return sum(rows) / len(rows) if rows else 0.0

    print(f"\nleave-one-file-out (R@{k}; grid {GRID}; default {default.weights}, candidates {default.candidates})")
    print("| held-out file | default | tuned on the other 9 | setting picked |")
    print("|---|---|---|---|")
    tuned_all: list[float] = []
    base_all: list[float] = []
    for f in files:
        others = [g.conv_id for g in files if g.conv_id != f.conv_id]
        best = max(range(len(settings)),
                   key=lambda i: (mean([x for g in others for x in results[i][g]]), -i))
        tuned_all += results[best][f.conv_id]
        base_all += base[f.conv_id]
        print(f"| {f.conv_id} | {mean(base[f.conv_id]):.3f} | {mean(results[best][f.conv_id]):.3f} | {settings[best]} |")
    print(f"| all (question-weighted) | {mean(base_all):.3f} | {mean(tuned_all):.3f} | |")


def per_trajectory(files: Sequence[UserFile], questions: Sequence[Question]) -> tuple[list[UserFile], list[Question]]:
    """Each trajectory of each file as its own user: memory ids are ``<file>:<tid>:<mid>``."""
    def trajectory(dia_id: str) -> str:
        return dia_id.rsplit(":", 1)[0]

    out: dict[str, list[Message]] = {}
    for f in files:
        for t in f.turns:
            out.setdefault(trajectory(t.dia_id), []).append(replace(t, conv_id=trajectory(t.dia_id)))
    asked = [replace(q, conv_id=trajectory(q.evidence[0])) for q in questions
             if len({trajectory(e) for e in q.evidence}) == 1]
    return [UserFile(conv_id=c, turns=turns) for c, turns in out.items()], asked


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, from: {', '.join(SYSTEMS)}")
    parser.add_argument("--files", default=None, help="comma-separated file stems (default: all)")
    parser.add_argument("--lofo", action="store_true", help="add the leave-one-file-out check")
    parser.add_argument("--vectors", type=Path, default=None, help="a cache of the default model's vectors")
    parser.add_argument("--one-session", action="store_true", help="BeeWeave: every message of a file in one session")
    parser.add_argument("--per-trajectory", action="store_true",
                        help="every trajectory its own user (not the README's measure; see above)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.systems.split(",") if n.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        parser.error(f"unknown systems: {', '.join(unknown)}")
    started = time.perf_counter()
    files, questions = load_memdaily(args.data_dir, args.files.split(",") if args.files else None)
    if args.per_trajectory:
        files, questions = per_trajectory(files, questions)
    print(f"{len(files)} files, {sum(len(f.turns) for f in files)} messages, {len(questions)} questions",
          file=sys.stderr)
    encoder: locomo_peers.MiniLM | None = None

    def shared_encoder() -> locomo_peers.MiniLM:
        nonlocal encoder
        if encoder is None:
            encoder = locomo_peers.MiniLM()
        return encoder

    systems = [SYSTEMS[n](shared_encoder) for n in names]
    if "beeweave" in names and (args.vectors is not None or args.one_session):
        vecs = model_vectors(files, questions, args.vectors) if args.vectors is not None else None
        bw = BeeWeaveDefault(None, None, vecs, session="notes" if args.one_session else None)
        if args.one_session:
            bw.label += "; every message of a file in one session"
        systems[names.index("beeweave")] = bw
    for s in systems:
        s.label = LABELS.get(s.name, s.label)
    if systems:
        locomo_peers.print_table(locomo_peers.run(systems, files, questions, KS))  # type: ignore[arg-type]
    if args.lofo:
        lofo(files, questions, args.vectors)
    print(f"wall time {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
