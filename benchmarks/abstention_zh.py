"""Does "nothing relevant" work in Chinese? The abstention measure on the MemDaily dev split.

Usage:
    python benchmarks/abstention_zh.py [DATA_DIR] [--per-file 20]

One store per MemDaily file (as benchmarks/memdaily.py builds them: one user, every message
one memory, no session), searched with the default model and settings (k = 10, no gate),
then the default model's tuned gate (``DEFAULT_ABSTAIN_BELOW``) applied to each search's best
hit. Three kinds of query:

- on-topic: the file's own questions (their recall@10 with and without the gate);
- other kind: up to ``--per-file`` questions of each file of another kind (events, items,
  places, roles; the hybrid files mix the kinds and are left out of this side), asked of this
  file's store: "what is my colleague's phone number?" asked of a memory of events;
- generic: everyday off-topic questions in Chinese that no personal memory answers
  (``GENERIC`` below, written for this benchmark, not taken from any data set).

Prints the share of each kind the gate silences and the on-topic R@10 it keeps. Nothing is
tuned here: the gate is the one fitted on LoCoMo (English) by ``abstention.py --fit``.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo_data import recall_at_k  # noqa: E402
from memdaily_data import DEFAULT_DATA_DIR, load_memdaily  # noqa: E402

from beeweave_core import BeeWeave  # noqa: E402
from beeweave_core.embedders import as_embedder  # noqa: E402
from beeweave_core.relevance import DEFAULT_ABSTAIN_BELOW  # noqa: E402

K = 10
GENERIC = [
    "今天北京的天气怎么样？", "美元兑人民币的汇率是多少？", "水的沸点是多少度？", "地球到月球有多远？",
    "推荐一本好看的科幻小说。", "怎么做红烧肉？", "光速是多少？", "世界上最高的山是哪座？",
    "二战是哪一年结束的？", "如何提高睡眠质量？", "Python 怎么读取文件？", "明天会下雨吗？",
    "最近有什么好看的电影？", "怎样学好英语？", "一年有多少天？", "长城有多长？",
    "感冒了应该吃什么药？", "股票和基金有什么区别？", "太阳系有几颗行星？", "如何做一杯拿铁？",
    "中国的首都是哪里？", "跑步对身体有什么好处？", "怎么给手机省电？", "世界杯多久举办一次？",
    "鲸鱼是鱼吗？", "怎么养多肉植物？", "飞机为什么能飞？", "如何写一封求职信？",
    "圆周率的前十位是多少？", "熊猫吃什么？",
]


def kind(conv_id: str) -> str:
    return conv_id.split("_", 1)[1]  # "01_simple_events" -> "simple_events"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--per-file", type=int, default=20)
    args = parser.parse_args()
    files, questions = load_memdaily(args.data_dir)
    by_file: dict[str, list] = {}
    for q in questions:
        by_file.setdefault(q.conv_id, []).append(q)
    rnd = random.Random(0)
    embedder = as_embedder(None)
    counts = {"on-topic": [0, 0], "other kind": [0, 0], "generic": [0, 0]}  # [silenced, asked]
    kept = base = 0.0
    for f in files:
        memory = BeeWeave(embedder=embedder)
        memory.add_many([{"content": t.content, "user_id": "u", "chunk_id": t.dia_id, "timestamp": t.timestamp}
                         for t in f.turns], show_progress=False, trusted=True)

        def silent(query: str) -> tuple[bool, list[str]]:
            hits = memory.search(query, user_id="u", k=K, abstain_below=0)  # every hit: the gate is applied here
            best = max((h.relevance or 0.0 for h in hits), default=0.0)
            return best < DEFAULT_ABSTAIN_BELOW, [h.id for h in hits]

        for q in by_file.get(f.conv_id, []):
            quiet, ids = silent(q.question)
            r = recall_at_k(ids, q.evidence, K)
            base += r
            kept += 0.0 if quiet else r
            counts["on-topic"][0] += quiet
            counts["on-topic"][1] += 1
        mine = kind(f.conv_id).split("_")[1]
        if mine != "hybrid":
            for other in files:
                theirs = kind(other.conv_id).split("_")[1]
                if theirs in (mine, "hybrid"):
                    continue
                pool = by_file.get(other.conv_id, [])
                for q in rnd.sample(pool, min(args.per_file, len(pool))):
                    counts["other kind"][0] += silent(q.question)[0]
                    counts["other kind"][1] += 1
        for g in GENERIC:
            counts["generic"][0] += silent(g)[0]
            counts["generic"][1] += 1
        memory.close()
        print(f"{f.conv_id}: done", file=sys.stderr)
    print(f"gate DEFAULT_ABSTAIN_BELOW = {DEFAULT_ABSTAIN_BELOW}; k = {K}")
    print("| queries | asked | silenced |")
    print("|---|---|---|")
    for name, (s, n) in counts.items():
        print(f"| {name} | {n} | {s / max(n, 1):.3f} |")
    off = [counts["other kind"], counts["generic"]]
    print(f"| off-topic together | {sum(n for _, n in off)} | {sum(s for s, _ in off) / max(sum(n for _, n in off), 1):.3f} |")
    print(f"on-topic R@10 kept: {kept / base if base else 0.0:.3f} (R@10 without the gate {base / max(counts['on-topic'][1], 1):.3f})")


if __name__ == "__main__":
    main()
