"""Search latency with the query's embedding included, for questions and for dialogue queries.

Usage:
    python benchmarks/query_latency.py [DATA_DIR] [--size 10000] [--queries 200] [--dialogues 50]
        [--models default,minilm]

DATA_DIR defaults to ../shared/data/locomo (the development split). A store of ``--size``
memories is built as ``scale_data`` builds one (LoCoMo turns replayed, sessions kept, one
user) with seeded random memory vectors (the model is not run over the memories: only the
query side is timed, and vector search costs the same whatever the vectors hold). Then,
with the bundled model embedding every query (the query-embedding cache is cleared before
each search, so every search pays for its embedding):

- question p50 / p95: LoCoMo questions, k=10;
- dialogue p50 / p95: queries of about 2,000 characters, each the conversation so far
  ("Name: text" lines, the last turns of a LoCoMo session up to 2,000 characters, then a
  question), in English and in Chinese (the Chinese dialogue is a fixed sample of everyday
  turns, repeated to length): what an agent passing its recent context as the query sends.

Every query is searched once untimed first (loading the model and jieba, and building each
query term's context postings, which a store does once per term), then timed.

The targets of issues 24 and 42: question p50 ≤ 30 ms at 10k memories, a 2,000-character
dialogue ≤ 60 ms. ``--models`` runs the same queries with each model in turn: ``default``
(multilingual-e5-small), ``minilm`` (all-MiniLM-L6-v2, the former default, onnxruntime where
it works), ``minilm-torch``. Times depend on the machine's load; compare rows from one run.
"""

from __future__ import annotations

import os

# Scripts may set these (library code may not): nothing here may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo_data import DEFAULT_DATA_DIR, Conversation  # noqa: E402
from scale_data import ScaleCorpus, unit_vectors  # noqa: E402

from beeweave_core import BeeWeave  # noqa: E402
from beeweave_core.embedders import SentenceTransformerEmbedder, as_embedder  # noqa: E402

DIALOGUE_CHARS = 2000

_ZH_TURNS = (
    "用户：我下周要去杭州出差，顺便想去西湖边走走。",
    "助手：好的，需要我帮你查一下那几天的天气吗？",
    "用户：要的，另外我表妹也在杭州，她在一所中学当语文老师。",
    "助手：明白了，要不要把和表妹吃饭也加到行程里？",
    "用户：可以，她喜欢吃川菜，不太能吃甜的。",
    "助手：我记下了：表妹喜欢川菜，不吃甜食。",
)


def english_dialogues(convs: Sequence[Conversation], count: int) -> list[str]:
    """The last turns of LoCoMo sessions up to ~2,000 characters, then a question turn."""
    out: list[str] = []
    for conv in convs:
        sessions: dict[int, list[str]] = {}
        for t in conv.turns:
            sessions.setdefault(t.session, []).append(t.content)
        for turns in sessions.values():
            picked: list[str] = []
            size = 0
            for line in reversed(turns):
                if size + len(line) > DIALOGUE_CHARS:
                    break
                picked.append(line)
                size += len(line) + 1
            speaker = turns[-1].split(":", 1)[0]
            out.append("\n".join([*reversed(picked), f"{speaker}: What did we say about that last time?"]))
            if len(out) == count:
                return out
    return out


def chinese_dialogues(count: int) -> list[str]:
    out = []
    for i in range(count):
        lines: list[str] = []
        j = i
        while sum(len(x) + 1 for x in lines) < DIALOGUE_CHARS:
            lines.append(_ZH_TURNS[j % len(_ZH_TURNS)])
            j += 1
        lines.append(f"用户：我表妹第{i}次说她喜欢吃什么来着？")
        out.append("\n".join(lines))
    return out


def timed(memory: BeeWeave, user: str, queries: Sequence[str], clear: Callable[[], None]) -> list[float]:
    times = []
    for q in queries:  # warm-up: the model, jieba, each query term's context postings (built once)
        memory.search(q, user_id=user, k=10)
    for q in queries:
        clear()
        start = time.perf_counter()
        memory.search(q, user_id=user, k=10)
        times.append((time.perf_counter() - start) * 1000)
    return times


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--size", type=int, default=10_000, help="memories in the store (default 10,000)")
    parser.add_argument("--queries", type=int, default=200, help="timed questions (default 200)")
    parser.add_argument("--dialogues", type=int, default=50, help="timed dialogues per language (default 50)")
    parser.add_argument("--models", default="default,minilm",
                        help="models side by side: default, minilm, minilm-torch (default: default,minilm)")
    args = parser.parse_args(argv)
    corpus = ScaleCorpus.load(args.data_dir)
    vectors = unit_vectors(7, 0, args.size)
    records = [m.record(vectors[i]) for i, m in enumerate(corpus.memories(0, args.size, users=1))]
    user = "user-0"
    questions = [q.question for q in corpus.questions[: args.queries]]
    rows = [("question", questions), ("dialogue, English, ~2,000 chars", english_dialogues(corpus.convs, args.dialogues)),
            ("dialogue, Chinese, ~2,000 chars", chinese_dialogues(args.dialogues))]
    print(f"{args.size} memories, one user; query embedding included")
    print("| model | query | n | mean chars | p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|")
    makers = {"default": lambda: as_embedder(None), "minilm": lambda: SentenceTransformerEmbedder(),
              "minilm-torch": lambda: SentenceTransformerEmbedder(backend="torch")}
    for model in args.models.split(","):
        embedder = makers[model]()
        memory = BeeWeave(embedder=embedder)
        memory.add_many(records, show_progress=False, link=False)
        clear = memory._search._cache.clear  # every timed search pays for its query's embedding
        for label, queries in rows:
            times = timed(memory, user, queries, clear)
            p95 = statistics.quantiles(times, n=20)[-1] if len(times) > 1 else times[0]
            chars = statistics.mean(len(q) for q in queries)
            print(f"| {model} ({getattr(embedder, 'runtime', 'onnx')}) | {label} | {len(times)} | {chars:.0f} | "
                  f"{statistics.median(times):.1f} | {p95:.1f} |")
        memory.close()


if __name__ == "__main__":
    main()
