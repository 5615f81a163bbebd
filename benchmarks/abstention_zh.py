"""Does "nothing relevant" work in Chinese? The abstention measure on the MemDaily dev split.

Usage:
    python benchmarks/abstention_zh.py [DATA_DIR] [--per-file 20]
                                       [--answerable benchmarks/abstention_zh_answerable.json] [--dump PATH]

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

A MemDaily file holds memories of other kinds beside its own, so an "other kind" question
may be answered by the store it is asked of after all ("刚才路过的那个商场是啥商场来着？", a
places question, asked of an items file that holds "我刚才路过的那个商场是大悦城。"). Each such
query is keyed ``<asked file>|<source file>:<index of the question among the source file's
questions>`` (the question itself, not its place in the random draw).

``--answerable FILE`` (JSON ``{"about": ..., "answerable": {KEY: reason}}``) prints the table
again without the "other kind" queries FILE judges answerable (counted neither as asked nor
as silenced) and says how many it left out. ``abstention_zh_answerable.json`` holds one
reader's judgment of the "other kind" queries that passed the gate at ``--per-file 20`` on
2026-12-06 (see its ``about``); queries the gate silenced were not read, so the second table
bounds from below what a better relevance could reach, and is not a labelled measure.

``--dump PATH`` writes (JSON) every "other kind" query that passes the gate: its key, the
question, the file it is asked of, and its three hits of highest relevance (content and
relevance), for a reader to judge.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import argparse
import json
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
    parser.add_argument("--answerable", type=Path, default=None,
                        help="JSON of the 'other kind' queries judged answerable: print the table again without them")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write the 'other kind' queries that pass the gate, with their top 3 hits, to this JSON file")
    args = parser.parse_args()
    answerable = set(json.loads(args.answerable.read_text(encoding="utf-8"))["answerable"]) if args.answerable else set()
    left_out = [0, 0]  # [silenced, asked] of the judged-answerable "other kind" queries
    seen: set[str] = set()
    passing: list[dict] = []
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

        def silent(query: str) -> tuple[bool, list]:
            hits = memory.search(query, user_id="u", k=K, abstain_below=0)  # every hit: the gate is applied here
            best = max((h.relevance or 0.0 for h in hits), default=0.0)
            return best < DEFAULT_ABSTAIN_BELOW, hits

        for q in by_file.get(f.conv_id, []):
            quiet, hits = silent(q.question)
            r = recall_at_k([h.id for h in hits], q.evidence, K)
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
                # Sampling the indices draws the same questions as sampling the pool did.
                for i in rnd.sample(range(len(pool)), min(args.per_file, len(pool))):
                    q = pool[i]
                    key = f"{f.conv_id}|{other.conv_id}:{i}"
                    seen.add(key)
                    quiet, hits = silent(q.question)
                    counts["other kind"][0] += quiet
                    counts["other kind"][1] += 1
                    if key in answerable:
                        left_out[0] += quiet
                        left_out[1] += 1
                    if not quiet:
                        top = sorted(hits, key=lambda h: h.relevance or 0.0, reverse=True)[:3]
                        passing.append({"key": key, "question": q.question, "asked": f.conv_id,
                                        "hits": [{"content": h.chunk.content, "relevance": round(h.relevance or 0.0, 3)}
                                                 for h in top]})
        for g in GENERIC:
            counts["generic"][0] += silent(g)[0]
            counts["generic"][1] += 1
        memory.close()
        print(f"{f.conv_id}: done", file=sys.stderr)
    print(f"gate DEFAULT_ABSTAIN_BELOW = {DEFAULT_ABSTAIN_BELOW}; k = {K}")
    table(counts)
    print(f"on-topic R@10 kept: {kept / base if base else 0.0:.3f} (R@10 without the gate {base / max(counts['on-topic'][1], 1):.3f})")
    if args.dump is not None:
        args.dump.write_text(json.dumps(passing, ensure_ascii=False, indent=1), encoding="utf-8")
        print(f"{len(passing)} 'other kind' queries that pass the gate written to {args.dump}")
    if args.answerable is not None:
        unknown = answerable - seen
        if unknown:
            print(f"warning: {len(unknown)} keys of {args.answerable.name} name no query of this run", file=sys.stderr)
        print(f"\nWithout the {left_out[1]} 'other kind' queries {args.answerable.name} judges answerable "
              f"({left_out[0]} of them silenced, {left_out[1] - left_out[0]} passing):")
        less = dict(counts)
        less["other kind"] = [counts["other kind"][0] - left_out[0], counts["other kind"][1] - left_out[1]]
        table(less)


def table(counts: dict[str, list[int]]) -> None:
    print("| queries | asked | silenced |")
    print("|---|---|---|")
    for name, (s, n) in counts.items():
        print(f"| {name} | {n} | {s / max(n, 1):.3f} |")
    off = [counts["other kind"], counts["generic"]]
    print(f"| off-topic together | {sum(n for _, n in off)} | {sum(s for s, _ in off) / max(sum(n for _, n in off), 1):.3f} |")


if __name__ == "__main__":
    main()
