"""One event with many tool calls, and flush(timeout) while it is processed (issue 47, item 8).

Usage:
    python benchmarks/tool_calls.py [--calls 125,500,1000] [--embedder alike|hashing|default] [--rest]
                                    [--distinct K]

For each N, a fresh SQLite store ingests one event whose N tool calls have distinct outputs
(each a memory of its own), and the time from ``ingest()`` to drained is measured, with the
model's share of it (``embed_documents`` timed). Right after the ingest, ``flush(0.5)`` is
called again and again until it reports the queue drained: the slowest call is printed (the
goal: about 0.5 s, not the event's whole processing time).

``--embedder alike`` (default) is a fake model that puts every output near one direction
(cosine ~0.98 with every other) while their words differ: each output is a near-duplicate of
every other by vector and none merges, the worst case for merge-on-insert (the old code read
~N²/2 memories). ``hashing`` is the tests' hashing embedder (few near-duplicates), ``default``
the store's default model (multilingual-e5-small): its embedding dominates.

``--distinct K``: the calls repeat K calls (same input, same output: a job polled until
done), so the batch holds K distinct texts; each is embedded once.

``--rest`` also runs the largest N through a server (child process on 127.0.0.1, alike
embedder): ``POST /ingest``, then ``POST /flush?timeout=0.5`` until drained (the slowest
answer).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # scripts may set it: nothing here may reach a model hub

import argparse  # noqa: E402
import hashlib  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_server import client, load_average, serve  # noqa: E402

from beeweave_core import BeeWeave, HashingEmbedder  # noqa: E402

DIM = 384


class AlikeEmbedder:
    """Every text near one direction (cosine ~0.98 between any two), deterministic per text."""

    name = "bench:alike-384"
    dim = DIM

    def _one(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        v = np.random.default_rng(seed).normal(0, 0.15 / np.sqrt(DIM), DIM).astype(np.float32)
        v[0] = 1.0
        return v / np.linalg.norm(v)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._one(t) for t in texts]) if len(texts) else np.zeros((0, DIM), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


class Timed:
    """Wraps a model: counts the seconds spent in ``embed_documents``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.seconds = 0.0

    @property
    def dim(self) -> int:  # on the class: BeeWeave recognises a model by its class's attributes
        return int(self.inner.dim)

    def embed_documents(self, texts: Sequence[str]) -> Any:
        t0 = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - t0

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)


def tool_event(n: int, tag: str, distinct: int | None = None) -> dict[str, Any]:
    """One event of ``n`` tool calls; with ``distinct``, call i repeats call i % distinct."""
    ids = [i % (distinct or n) for i in range(n)]
    steps = [{"tool": "crm_lookup", "input": f"ticket {i}",
              "output": f"Ticket {i} of customer {i * 7 + 3} was escalated to team {i % 13} on day {i % 28}, "
                        f"priority {i % 5}, region {['north', 'south', 'east', 'west'][i % 4]}"} for i in ids]
    return {"user_id": "ops", "session_id": tag, "query": f"Summarise the open tickets ({tag})",
            "response": f"I looked up {n} tickets and summarised them by team.", "intermediate_steps": steps}


def model(name: str) -> Any:
    if name == "alike":
        return AlikeEmbedder()
    if name == "hashing":
        return HashingEmbedder(DIM)
    from beeweave_core.embedders import as_embedder

    return as_embedder(None)


def run_one(n: int, embedder: str, distinct: int | None = None) -> dict[str, float]:
    emb = Timed(model(embedder))
    mem = BeeWeave(Path(tempfile.mkdtemp(prefix="beeweave-tools-")) / "s.db", embedder=emb)
    try:
        mem.ingest(tool_event(3, "warm-up"))  # loads (tokenizer, model) not counted
        mem.flush(None)
        emb.seconds = 0.0
        t0 = time.perf_counter()
        mem.ingest(tool_event(n, f"n{n}", distinct))
        short, calls = 0.0, 0
        while True:  # flush(0.5) again and again while the event is processed: the slowest return
            t1 = time.perf_counter()
            drained = mem.flush(0.5)
            short, calls = max(short, time.perf_counter() - t1), calls + 1
            if drained:
                break
        total = time.perf_counter() - t0
        return {"n": n, "total": total, "model": emb.seconds, "short_flush": short, "calls": calls}
    finally:
        mem.close()


def run_rest(n: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="beeweave-tools-rest-"))
    with serve({"store": root, "embedder": "tool_calls:AlikeEmbedder", "max_flush_timeout": 60}) as url, \
            client(url) as h:
        h.post("/api/v1/ingest", json=tool_event(3, "warm-up")).raise_for_status()
        h.post("/api/v1/flush", params={"timeout": 30}).raise_for_status()
        t0 = time.perf_counter()
        h.post("/api/v1/ingest", json=tool_event(n, f"n{n}")).raise_for_status()
        short, calls = 0.0, 0
        while True:  # POST /flush?timeout=0.5 again and again while the event is processed
            t1 = time.perf_counter()
            drained = h.post("/api/v1/flush", params={"timeout": 0.5}).json()["drained"]
            short, calls = max(short, time.perf_counter() - t1), calls + 1
            if drained:
                break
        return {"n": n, "total": time.perf_counter() - t0, "short_flush": short, "calls": calls}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calls", default="125,500,1000")
    p.add_argument("--embedder", default="alike", choices=["alike", "hashing", "default"])
    p.add_argument("--rest", action="store_true")
    p.add_argument("--distinct", type=int, default=None, help="the calls repeat this many distinct calls")
    args = p.parse_args()
    print(f"load average before: {load_average()}")
    rows = [run_one(int(n), args.embedder, args.distinct) for n in args.calls.split(",")]
    rest = run_rest(max(int(n) for n in args.calls.split(","))) if args.rest else None
    print(f"load average after: {load_average()}")
    print("| tool calls | embedder | ingest to drained s | of which the model s | without the model s | "
          "slowest of the flush(0.5) calls until drained s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n']}{'' if args.distinct is None else f' ({args.distinct} distinct)'} | {args.embedder} | {r['total']:.2f} | {r['model']:.2f} | {r['total'] - r['model']:.2f} "
              f"| {r['short_flush']:.2f} (of {r['calls']}) |")
    if rest is not None:
        print(f"| {rest['n']} via REST | alike | {rest['total']:.2f} | | | "
              f"POST /flush?timeout=0.5: {rest['short_flush']:.2f} (of {rest['calls']}) |")


if __name__ == "__main__":
    main()
