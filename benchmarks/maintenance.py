"""Maintenance that never blocks (issue 23): search latency while ``maintain()`` runs, and
how the time of a run grows with the store.

Usage:
    python benchmarks/maintenance.py [--sizes 10000,40000,100000] [--users 10] [--dup 0.05]
                                     [--batch 256] [--searches 300] [--seed 0] [--alone]

For each size, a fresh embedded store (a SQLite file in a temporary directory) gets N
memories of ``--users`` users: random words with seeded random unit vectors (dim 384), a
``--dup`` share of them near-copies (cosine > 0.99) of another memory of the same user, so a
run has real merges to do. Vectors are given (no model runs). Then:

- idle: one thread runs ``--searches`` hybrid searches (k=10, one user's scope, a query
  vector given) back to back; p50/p99 in ms;
- during: ``maintain()`` runs in one thread (its first pass: it merges the near-copies) while
  a search thread searches in a loop and a writer thread gives one feedback signal every
  50 ms; the search p50/p99 over the searches that ran during the pass, the longest feedback
  wait, and the run's time.

"added p99" is the p99 during minus the p99 idle. ``--alone`` times ``maintain()`` with no
other thread instead (the growth of its time with N). The machine is shared: run it alone.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from beeweave_core import BeeWeave, HashingEmbedder, LifecycleConfig

WORDS = ("agent memory remembers preference python running database query vector search index weave bee "
         "garden deploy kubernetes cluster server latency cache user answer question language model embedding "
         "token filter session tag time weather coffee meeting project deadline budget report invoice travel "
         "flight hotel backup restore release window incident review design test").split()
DIM = 384


def build(path: Path, n: int, users: int, dup: float, seed: int, batch: int) -> tuple[BeeWeave, np.ndarray]:
    rng = np.random.default_rng(seed)
    rnd = random.Random(seed)
    vecs = rng.standard_normal((n, DIM)).astype(np.float32)
    texts = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(6, 16))) for _ in range(n)]
    owner = [i % users for i in range(n)]
    for i in range(n):
        if i >= users and rnd.random() < dup:  # a near-copy of an earlier memory of the same user
            j = rnd.randrange(i // users) * users + owner[i]
            vecs[i] = vecs[j] + rng.standard_normal(DIM).astype(np.float32) * 0.05 * np.linalg.norm(vecs[j]) / DIM ** 0.5
            texts[i] = texts[j] + " again"
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    m = BeeWeave(path, embedder=HashingEmbedder(DIM),
                 lifecycle=LifecycleConfig(maintenance_batch=batch, access_flush_interval=2.0))
    block = 5000
    for a in range(0, n, block):
        m.add_many([{"content": texts[i], "user_id": f"u{owner[i]}", "chunk_id": f"m{i:07d}",
                     "embedding": vecs[i].tolist()} for i in range(a, min(n, a + block))], link=False)
    return m, vecs


def search_loop(m: BeeWeave, queries: list[tuple[str, str, list[float]]], stop: threading.Event | None,
                limit: int | None, out: list[float]) -> None:
    i = 0
    while (stop is None or not stop.is_set()) and (limit is None or i < limit):
        text, user, qv = queries[i % len(queries)]
        t = time.perf_counter()
        m.search(text, user_id=user, k=10, query_embedding=qv)
        out.append((time.perf_counter() - t) * 1000)
        i += 1


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(xs, p)) if xs else float("nan")


def run(n: int, args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        m, vecs = build(Path(d) / "m.db", n, args.users, args.dup, args.seed, args.batch)
        built = time.perf_counter() - t0
        rnd = random.Random(args.seed + 1)
        queries = []
        for _ in range(200):
            j = rnd.randrange(n)
            qv = vecs[j] + np.random.default_rng(j).standard_normal(DIM).astype(np.float32) * 0.03
            queries.append((" ".join(rnd.choice(WORDS) for _ in range(4)), f"u{j % args.users}",
                            (qv / np.linalg.norm(qv)).tolist()))
        search_loop(m, queries, None, 10, [])  # warm-up: graphs and caches built
        idle: list[float] = []
        search_loop(m, queries, None, args.searches, idle)
        during: list[float] = []
        waits: list[float] = []
        stop = threading.Event()
        report = []
        searcher = threading.Thread(target=search_loop, args=(m, queries, stop, None, during))

        def writer() -> None:
            k = 0
            while not stop.is_set():
                t = time.perf_counter()
                m.feedback(f"m{(k * 7919) % n:07d}", "used")
                waits.append((time.perf_counter() - t) * 1000)
                k += 1
                stop.wait(0.05)

        w = threading.Thread(target=writer)
        searcher.start()
        w.start()
        t = time.perf_counter()
        report.append(m.maintain())
        took = time.perf_counter() - t
        stop.set()
        searcher.join()
        w.join()
        m.close()
    return {"n": n, "build_s": built, "idle_p50": pct(idle, 50), "idle_p99": pct(idle, 99),
            "during_p50": pct(during, 50), "during_p99": pct(during, 99), "during_n": len(during),
            "feedback_max": max(waits) if waits else float("nan"), "feedback_p50": statistics.median(waits),
            "maintain_s": took, "merged": report[0].merged}


def run_alone(n: int, args: argparse.Namespace) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as d:
        m, vecs = build(Path(d) / "m.db", n, args.users, args.dup, args.seed, args.batch)
        m.search("warm up", user_id="u1", k=10, query_embedding=vecs[0].tolist())
        t = time.perf_counter()
        report = m.maintain()
        took = time.perf_counter() - t
        m.close()
    return took, report.merged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,40000,100000")
    ap.add_argument("--users", type=int, default=10)
    ap.add_argument("--dup", type=float, default=0.05)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--searches", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--alone", action="store_true", help="time maintain() with no concurrent searches or writes")
    args = ap.parse_args()
    if args.alone:
        print("| memories | maintain() s alone | merged |\n|---:|---:|---:|")
        for n in (int(s) for s in args.sizes.split(",")):
            took, merged = run_alone(n, args)
            print(f"| {n:,} | {took:.1f} | {merged:,} |", flush=True)
        return
    print("| memories | maintain() s | merged | search p50 / p99 idle (ms) | during (ms) | added p99 (ms) "
          "| searches during | feedback wait p50 / max (ms) | build s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in (int(s) for s in args.sizes.split(",")):
        r = run(n, args)
        print(f"| {n:,} | {r['maintain_s']:.1f} | {r['merged']:,} | {r['idle_p50']:.1f} / {r['idle_p99']:.1f} "
              f"| {r['during_p50']:.1f} / {r['during_p99']:.1f} | {r['during_p99'] - r['idle_p99']:+.1f} "
              f"| {r['during_n']:,} | {r['feedback_p50']:.1f} / {r['feedback_max']:.1f} | {r['build_s']:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
