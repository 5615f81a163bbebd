"""How long ingest() keeps the agent's thread, and how fast the worker turns events into memories.

Usage:
    python benchmarks/ingest_latency.py [--events 5000] [--embedders hashing,minilm]
                                        [--gaps-ms 0,1] [--batch-size 64]
                                        (embedders: hashing, minilm, minilm-onnx, minilm-onnx-int8)

For each embedder, a fresh file store receives ``--events`` synthetic agent turns (English
and Chinese questions, answers of a few hundred characters, a tool call in a third of them,
ten turns per session) through ``ingest()`` on the main thread while the worker runs. The
table gives:

- ingest() latency on the caller's thread (p50, p99, p99.9, max), measured around each call;
- end-to-end throughput: events (and memories) per second from the first ingest() until
  ``flush()`` reports the queue drained (redaction, extraction, embedding, storing, linking
  and pattern counting included);
- the model's raw batched throughput on exactly the texts the worker embedded (recorded as
  it embedded them), with ``embed_documents`` in batches of the model's own batch size, in
  the same process right after the run; and the share of the worker's wall time spent
  inside the model, which is measured in the same window and so is not skewed by load
  that changes between the two measurements.

``--batch-size`` is the worker's batch (events per batch, ``IngestConfig.batch_size``).
Before timing, a few events go through a throwaway store with the same model, so one-time
loads (the model, jieba's dictionaries for Chinese keywords and tokens) are not counted, as
the model's loading is not counted on the raw side either.

``--gaps-ms`` lists the pauses between calls to measure, one run each: 0 is a tight loop
(5,000 calls take well under a second, while the worker is still warming up); 1 ms keeps
events arriving faster than the worker processes them, so every call competes with a
busy worker for the GIL. Latency depends on the machine being otherwise idle: the load
average is printed with the results.

``--trees A,B`` compares source trees side by side in one run (e.g. ``--trees /work/main,.``
for before and after a change): each run is a child process importing that tree's
``beeweave_core``, the trees take turns for ``--rounds`` rounds, and one table lists every
run. The child prints its row as JSON (``--json``).
"""

from __future__ import annotations

import os

# Scripts may set these (library code may not): nothing here may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

# The tree whose beeweave_core is measured: this checkout, or the one a --trees run names.
sys.path.insert(0, os.environ.get("BEEWEAVE_BENCH_TREE") or str(Path(__file__).resolve().parent.parent))

from beeweave_core import BeeWeave, HashingEmbedder  # noqa: E402
from beeweave_core.ingest import IngestConfig  # noqa: E402

TOPICS = ["password reset", "invoice export", "VPN access", "deployment to Kubernetes", "refund policy",
          "API rate limits", "database backup", "SSO login", "billing plan", "log retention"]
QUESTIONS = ["How do I {t}?", "What is the process for {t}?", "Why does {t} fail for me?",
             "Can you explain {t} in short?", "Write a script for {t}"]
CHINESE = ["怎么处理{t}的问题？", "请问{t}需要多久？", "{t}失败了怎么办"]
SENTENCES = ["Open the admin console and choose the right section.", "The change takes effect within five minutes.",
             "If it still fails, check the audit log for the request id.", "Ask the on-call engineer for access.",
             "The default limit is 100 requests per minute per key.", "Backups run nightly at 02:00 UTC.",
             "Contact support@example.com or call +1 (415) 555-2671 if you are blocked."]


def make_events(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    events = []
    for i in range(n):
        topic = rnd.choice(TOPICS)
        query = (rnd.choice(CHINESE) if rnd.random() < 0.2 else rnd.choice(QUESTIONS)).format(t=topic)
        response = " ".join(rnd.choice(SENTENCES) for _ in range(rnd.randint(3, 7)))
        steps = []
        if rnd.random() < 0.33:
            steps = [{"tool": "kb_search", "input": {"q": topic},
                      "output": {"hits": [f"{topic}: " + rnd.choice(SENTENCES) for _ in range(3)]}}]
        events.append({"id": f"bench-{i}", "user_id": f"user-{i % 50}", "session_id": f"s-{i // 10}",
                       "agent_id": "support-bot", "query": query, "response": response,
                       "intermediate_steps": steps})
    return events


def embedder_for(name: str) -> Any:
    if name == "hashing":
        return HashingEmbedder(64)
    if name in ("minilm", "minilm-onnx", "minilm-onnx-int8"):
        from beeweave_core.embedders import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(backend="onnx" if "onnx" in name else "torch", quantize=name.endswith("int8"))
    raise SystemExit(f"unknown embedder {name!r}: use hashing, minilm, minilm-onnx or minilm-onnx-int8")


def pct(sorted_values: list[float], p: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p))]


class RecordingEmbedder:
    """Passes calls to an embedder and records what it embedded and how long the model took."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.texts: list[str] = []
        self.seconds = 0.0
        self.calls = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed_documents(self, texts: Any) -> Any:
        t = time.perf_counter()
        out = self.inner.embed_documents(texts)
        self.seconds += time.perf_counter() - t
        self.texts.extend(texts)
        self.calls += 1
        return out

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)


def warm_up(embedder: Any) -> float:
    """Run a few events (English and Chinese) through a throwaway store: one-time loads."""
    t = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        memory = BeeWeave(Path(tmp) / "warm.db", embedder=embedder)
        try:
            for e in make_events(30, seed=99):
                memory.ingest(e)
            memory.flush(timeout=600)
            memory.search("warm up the query path", user_id="user-0")
        finally:
            memory.close()
    return time.perf_counter() - t


def run(name: str, events: list[dict[str, Any]], gap_ms: float, batch_size: int,
        raw_repeats: int) -> dict[str, Any]:
    inner = embedder_for(name)
    warm = warm_up(inner)
    embedder = RecordingEmbedder(inner)
    with tempfile.TemporaryDirectory() as tmp:
        memory = BeeWeave(Path(tmp) / "bench.db", embedder=embedder,
                          ingest=IngestConfig(batch_size=batch_size, max_pending=len(events) + 1))
        try:
            latencies = []
            start = time.perf_counter()
            for e in events:
                t = time.perf_counter()
                memory.ingest(e)
                latencies.append(time.perf_counter() - t)
                if gap_ms:
                    time.sleep(gap_ms / 1e3)
            enqueued = time.perf_counter() - start
            print(f"{name}: {len(events)} events ingested in {enqueued:.1f} s (warm-up {warm:.1f} s); "
                  "waiting for the worker...", file=sys.stderr, flush=True)
            if not memory.flush(timeout=3600):
                raise SystemExit("the queue did not drain within an hour")
            total = time.perf_counter() - start
            memories = memory.count(filters={"status": ["active", "pending"]})
        finally:
            memory.close()
    texts = list(embedder.texts)
    model_batch = int(getattr(inner, "batch_size", 64))
    raws = []
    for _ in range(raw_repeats):
        t = time.perf_counter()
        for i in range(0, len(texts), model_batch):
            inner.embed_documents(texts[i: i + model_batch])
        raws.append(len(texts) / (time.perf_counter() - t))
    latencies.sort()
    return {"embedder": name, "gap": gap_ms, "events": len(events), "p50": pct(latencies, 0.50) * 1e3,
            "p99": pct(latencies, 0.99) * 1e3, "p999": pct(latencies, 0.999) * 1e3, "max": latencies[-1] * 1e3,
            "enqueue_s": enqueued, "total_s": total, "events_per_s": len(events) / total,
            "memories": memories, "memories_per_s": memories / total, "texts": len(texts),
            "texts_per_s": len(texts) / total, "calls": embedder.calls, "model_share": embedder.seconds / total,
            "raw_texts_per_s": max(raws), "raws": raws, "model_batch": model_batch}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=5000)
    ap.add_argument("--embedders", default="hashing,minilm")
    ap.add_argument("--gaps-ms", default="0,1", help="pauses between ingest() calls, one run each")
    ap.add_argument("--batch-size", type=int, default=64, help="events per worker batch")
    ap.add_argument("--raw-repeats", type=int, default=2,
                    help="times the model alone embeds the texts after a run; the fastest counts")
    ap.add_argument("--trees", help="source trees to compare, comma-separated (a child process each)")
    ap.add_argument("--rounds", type=int, default=2, help="with --trees: how many times each tree runs")
    ap.add_argument("--json", action="store_true", help="print the rows as one JSON line (what --trees reads)")
    args = ap.parse_args(argv)
    if args.trees:
        compare_trees(args)
        return
    events = make_events(args.events)
    if args.json:
        rows = [run(name.strip(), events, float(gap), args.batch_size, args.raw_repeats)
                for name in args.embedders.split(",") for gap in args.gaps_ms.split(",")]
        print(json.dumps(rows))
        return
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, load average {load[0]:.1f} before the run; "
          f"{args.events} events, batch {args.batch_size}")
    rows = [run(name.strip(), events, float(gap), args.batch_size, args.raw_repeats)
            for name in args.embedders.split(",") for gap in args.gaps_ms.split(",")]
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    print(f"load average {load[0]:.1f} after the run\n")
    head = (f"{'embedder':<16} {'gap':>5} {'ingest p50':>10} {'p99':>8} {'p99.9':>8} {'max':>8} │ {'events/s':>9} "
            f"{'memories/s':>10} {'texts/s':>8} {'model texts/s':>13} {'pipeline/model':>14} {'in model':>8}")
    print_table(head, [f"{r['embedder']:<16} {r['gap']:>3g}ms {latencies(r)} │ "
                       f"{r['events_per_s']:>9.1f} {r['memories_per_s']:>10.1f} {r['texts_per_s']:>8.1f} "
                       f"{r['raw_texts_per_s']:>13.1f} {r['texts_per_s'] / r['raw_texts_per_s']:>13.1%} "
                       f"{r['model_share']:>8.1%}" for r in rows])
    for r in rows:
        print(f"{r['embedder']} {r['gap']:g}ms: {r['memories']} memories, {r['texts']} texts embedded in {r['calls']} "
              f"calls; model alone on the same texts in batches of {r['model_batch']}: "
              + ", ".join(f"{x:.1f}" for x in r["raws"]) + " texts/s")
    print("\nevents/s, memories/s, texts/s: from the first ingest() to a drained queue (all pipeline stages);"
          "\ntexts/s counts the texts the worker gave the model.")
    print("pipeline/model: the worker's texts/s as a share of the model alone on the same texts (fastest repeat).")
    print("in model: share of the worker's wall time spent inside embed_documents (same window, load-robust).")


def compare_trees(args: argparse.Namespace) -> None:
    """Run the measurement on each tree in turn, in child processes, and print one table."""
    trees = [str(Path(t).resolve()) for t in args.trees.split(",")]
    commits = {t: subprocess.run(["git", "-C", t, "log", "-1", "--format=%h"], capture_output=True,
                                 text=True).stdout.strip() or "?" for t in trees}
    load = os.getloadavg()
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, load average {load[0]:.1f} before the run; "
          f"{args.events} events, batch {args.batch_size}, {args.rounds} rounds")
    rows = []
    for rnd in range(args.rounds):
        for tree in trees:
            child = [sys.executable, __file__, "--json", "--events", str(args.events), "--embedders", args.embedders,
                     "--gaps-ms", args.gaps_ms, "--batch-size", str(args.batch_size), "--raw-repeats", "1"]
            env = {**os.environ, "BEEWEAVE_BENCH_TREE": tree, "PYTHONPATH": tree}
            out = subprocess.run(child, env=env, capture_output=True, text=True, check=True).stdout
            for r in json.loads(out.strip().splitlines()[-1]):
                rows.append({**r, "tree": tree, "commit": commits[tree], "round": rnd + 1,
                             "load": os.getloadavg()[0]})
    head = (f"{'tree':<28} {'commit':<8} {'round':>5} {'embedder':<9} {'gap':>6} {'ingest p50':>10} {'p99':>8} "
            f"{'p99.9':>8} {'max':>8} {'events/s':>9} {'load':>5}")
    print_table(head, [f"{r['tree'][-28:]:<28} {r['commit']:<8} {r['round']:>5} {r['embedder']:<9} {r['gap']:>4g}ms "
                       f"{latencies(r)} {r['events_per_s']:>9.1f} {r['load']:>5.1f}" for r in rows])


def latencies(r: dict[str, Any]) -> str:
    return f"{r['p50']:>8.3f}ms {r['p99']:>6.3f}ms {r['p999']:>6.3f}ms {r['max']:>6.2f}ms"


def print_table(head: str, lines: Iterable[str]) -> None:
    print(head)
    print("─" * len(head))
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
