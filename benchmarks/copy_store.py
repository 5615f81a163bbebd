"""How long moving an embedded store to PostgreSQL takes: ``beeweave copy`` of a SQLite store
of the scale corpus (benchmarks/scale_data.py: LoCoMo turns in copies, text vectors, spread
over users, each memory edited once in ten so that versions travel too) into a PostgreSQL
tenant, beside a copy into another SQLite file in the same run.

    python benchmarks/copy_store.py [DATA_DIR] [--n 10000] [--users 10] [--url URL]

Without ``--url`` a PostgreSQL 18 + pgvector 0.8 server is started for the run
(benchmarks/pg_server.py). The copy is the CLI's own code (``cmd_copy``), vectors carried,
nothing embedded; the check afterwards compares every user's export and one search per user.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from locomo_data import DEFAULT_DATA_DIR  # noqa: E402
from pg_server import local_postgres, schema_url  # noqa: E402
from scale_data import ScaleCorpus, Vectors, ensure_text_embeddings  # noqa: E402

from beeweave_core import BeeWeave  # noqa: E402
from beeweave_core.cli_commands import cmd_copy  # noqa: E402
from beeweave_core.server import open_memory  # noqa: E402
from beeweave_core.server.service import MemoryService  # noqa: E402

# A model known by name (so that the copy opens the destination with it) and of the corpus
# vectors' width; the vectors themselves are the corpus's, never computed.
EMBEDDER = "beeweave:hashing-384"


def build(path: Path, corpus: ScaleCorpus, vectors: Vectors, n: int, users: int) -> float:
    t0 = time.perf_counter()
    with BeeWeave(str(path), embedder=EMBEDDER) as m:
        vecs = vectors.store(0, n)
        records = [mem.record(vecs[i]) for i, mem in enumerate(corpus.memories(0, n, users))]
        m.add_many(records, batch_size=4096, link=False, trusted=True, show_progress=False)
        for rec in records[::10]:  # a version each
            m.update(rec["chunk_id"], content=rec["content"] + " (edited)")
    return time.perf_counter() - t0


def copy(src: Path, to: str, tenant: str | None) -> float:
    args = SimpleNamespace(store=str(src), tenant=None, embedder=None, api_key=None, to=to, to_tenant=tenant,
                           users=None)
    t0 = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            cmd_copy(args)
        finally:
            sys.stdout = stdout
    return time.perf_counter() - t0


def same(src: Path, dst: Any, tenant: str | None, users: int) -> bool:
    def comparable(svc: MemoryService, user: str) -> Any:
        data = svc.export_user(user)
        return (sorted((c["id"], c["raw_content"], c["status"], c["access_count"]) for c in data["chunks"]),
                sorted((v["chunk_id"], v["reason"]) for v in data["versions"]))

    with open_memory(src) as a, open_memory(dst, tenant=tenant) as b:
        sa, sb = MemoryService(a), MemoryService(b)
        for u in range(users):
            user = f"user-{u}"
            if comparable(sa, user) != comparable(sb, user):
                return False
            q = "what did they talk about at the weekend"
            if [h.id for h in a.search(q, user_id=user, k=5)] != [h.id for h in b.search(q, user_id=user, k=5)]:
                return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data_dir", nargs="?", default=str(DEFAULT_DATA_DIR))
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--users", type=int, default=10)
    ap.add_argument("--url", help="a PostgreSQL server (default: start one for the run)")
    a = ap.parse_args()
    corpus = ScaleCorpus.load(Path(a.data_dir))
    vectors = Vectors(corpus, "text", ensure_text_embeddings(a.data_dir))
    with tempfile.TemporaryDirectory() as tmp, (nullcontext(a.url) if a.url else local_postgres()) as url:
        src = Path(tmp) / "src.db"
        built = build(src, corpus, vectors, a.n, a.users)
        print(f"source: {a.n:,} memories over {a.users} users, {a.n // 10:,} edited (built in {built:.1f} s)")
        print("| destination | memories | copy s | memories/s | exports and searches equal |")
        print("|---|---|---|---|---|")
        for label, to, tenant in (("SQLite file", str(Path(tmp) / "dst.db"), None),
                                  ("PostgreSQL tenant", schema_url(url, "copy_bench"), "moved")):
            took = copy(src, to, tenant)
            print(f"| {label} | {a.n:,} | {took:.1f} | {a.n / took:,.0f} | {same(src, to, tenant, a.users)} |")


if __name__ == "__main__":
    main()
