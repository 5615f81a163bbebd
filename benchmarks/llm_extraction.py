"""Ingest throughput with a slow extraction model: how long 100 events take end to end when
each model call takes a second.

Usage:
    python benchmarks/llm_extraction.py [--events 100] [--latency 1.0]
                                        [--concurrency 16,8,1] [--embedder default|hashing]

A fake model (``tests.ingest.ingest_support.SlowModel``: ``time.sleep(latency)``, then a fixed
JSON answer) is wrapped in ``LLMExtractor``; a fresh file store ingests ``--events`` agent
turns (English and Chinese) through ``ingest()`` and the clock stops when ``flush()`` reports the queue drained, so
redaction, extraction, embedding and storing are all inside the figure. One run per
``IngestConfig.max_concurrency`` value listed (the default is 16). The peak number of model
calls in flight is printed beside the time: it must stay within the bound. The issue's bar is
100 events of a 1 s model in at most 15 s; one call at a time (``1``) shows the old worker's
rate, about one event per second.
"""

from __future__ import annotations

import os

# Scripts may set these (library code may not): nothing here may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from beeweave_core import BeeWeave, HashingEmbedder  # noqa: E402
from beeweave_core.ingest import IngestConfig, LLMExtractor  # noqa: E402
from tests.ingest.ingest_support import SlowModel  # noqa: E402  (the tests' fake model: one definition)


def events(n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        if i % 2:
            q, r = f"如何配置第{i}个服务的超时时间？", f"在配置文件里把第{i}个服务的 timeout 设为 30 秒，然后重启服务。"
        else:
            q, r = f"How do I rotate the API key of project {i}?", f"Open settings of project {i}, choose Keys, then Rotate."
        out.append({"id": f"bench-{i:04d}", "user_id": f"user{i % 5}", "session_id": f"s{i // 10}", "query": q,
                    "response": r})
    return out


def run(n: int, latency: float, concurrency: int, embedder: Any) -> tuple[float, int, int]:
    model = SlowModel(latency)
    cfg = IngestConfig(extractor=LLMExtractor(model), max_concurrency=concurrency)
    with tempfile.TemporaryDirectory() as tmp:
        with BeeWeave(Path(tmp) / "bench.db", embedder=embedder, ingest=cfg) as m:
            t0 = time.perf_counter()
            for e in events(n):
                m.ingest(e)
            if not m.flush(max(60.0, 3 * n * latency)):
                raise SystemExit("the queue did not drain")
            took = time.perf_counter() - t0
            stored = m.count()
    return took, model.peak, stored


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=100)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--concurrency", default="16,8,1", help="comma-separated max_concurrency values")
    ap.add_argument("--embedder", choices=["default", "hashing"], default="default",
                    help="the store's default model (loaded before timing) or the instant hashing embedder")
    args = ap.parse_args()
    embedder: Any = HashingEmbedder(256) if args.embedder == "hashing" else None
    if embedder is None:  # the bundled default model, loaded once before timing
        with BeeWeave() as warm:
            warm.warm_up()
            embedder = warm.embedder
    print(f"{args.events} events, model latency {args.latency} s, embedder {args.embedder}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print("| max_concurrency | seconds | events/s | peak calls in flight | memories |")
    print("|---|---|---|---|---|")
    for c in (int(x) for x in args.concurrency.split(",")):
        took, peak, stored = run(args.events, args.latency, c, embedder)
        print(f"| {c} | {took:.1f} | {args.events / took:.1f} | {peak} | {stored} |", flush=True)


if __name__ == "__main__":
    main()
