"""What calibrated relevance's per-term BM25 reads cost on PostgreSQL: one round trip for all
query terms (``lexical_searches``) beside one call per term, interleaved, in one run.

Usage:
    python benchmarks/pg_relevance_trips.py [LOCOMO_DIR] [--n 10000] [--queries 60]

A store of ``n`` LoCoMo turns (repeated, numbered) with cheap deterministic vectors on a
throw-away pgserver; the LoCoMo questions are searched, and for each search's hits
``relevance.lexical_evidence`` runs both ways. Both must give the same evidence (checked).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo_data import DEFAULT_DATA_DIR, load_locomo  # noqa: E402
from pg_server import local_postgres, schema_url  # noqa: E402

from beeweave_core import BeeWeave, HashingEmbedder  # noqa: E402
from beeweave_core.filters import build_filter  # noqa: E402
from beeweave_core.query import prepare_query  # noqa: E402
from beeweave_core.relevance import lexical_evidence  # noqa: E402


class PerTerm:
    """The backend without its one-trip capability: lexical_evidence falls back to a call per term."""

    def __init__(self, backend: Any) -> None:
        self.lexical_search = backend.lexical_search


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    convs, questions = load_locomo(Path(args.data))
    texts = [t.content for c in convs for t in c.turns]
    with local_postgres() as url:
        with BeeWeave.from_url(schema_url(url, "trips"), embedder=HashingEmbedder(384), tenant="t") as m:
            m.add_many([{"content": f"{texts[i % len(texts)]} #{i}", "user_id": "u", "chunk_id": f"c{i}"}
                        for i in range(args.n)], show_progress=False, trusted=True)
            backend, tok = m.backend, m.parts.search.shared.tokenizer
            flt = build_filter(None, user_id="u")
            one, per = [], []
            for q in [q.question for q in questions[: args.queries]]:
                ids = [h.id for h in m.search(q, user_id="u", k=10)]
                terms = prepare_query(q, tok).terms
                t0 = time.perf_counter()
                a = lexical_evidence(backend, terms, flt, ids)
                t1 = time.perf_counter()
                b = lexical_evidence(PerTerm(backend), terms, flt, ids)  # type: ignore[arg-type]
                t2 = time.perf_counter()
                assert a == b, q
                one.append((t1 - t0) * 1000)
                per.append((t2 - t1) * 1000)
    print(f"{args.n} memories, {len(one)} searches' hits: lexical evidence p50 / p95 ms")
    print(f"| one round trip | {statistics.median(one):.1f} | {statistics.quantiles(one, n=20)[18]:.1f} |")
    print(f"| a call per term | {statistics.median(per):.1f} | {statistics.quantiles(per, n=20)[18]:.1f} |")


if __name__ == "__main__":
    main()
