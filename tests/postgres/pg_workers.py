"""Processes for the multi-process tests, run as ``python pg_workers.py ROLE JSON-ARGS``.

* ``writer``: adds memories through ``BeeWeave.from_url`` in batches; prints the ids.
* ``observer``: listens for the tenant's events, prints ``ready``, then waits until it
  has seen ``expect`` records and ``expect`` creation events; prints what it saw.
* ``inserter``: inserts a fixed batch through the backend; prints ``ok`` or the error.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parents[1]) not in sys.path:  # run as a script: the checkout, so ``tests.support`` imports
    sys.path.insert(0, str(HERE.parents[1]))

from beeweave_core import BeeWeave, DuplicateIdError, HashingEmbedder  # noqa: E402
from beeweave_core.store.postgres import PostgresStore  # noqa: E402
from tests.support import WORDS, sentence  # noqa: E402


def writer_records(writer: int, n: int, seed: int) -> list[dict]:
    rnd = random.Random(seed * 1000 + writer)
    return [{"content": sentence(rnd, 3, 10, WORDS[:50]), "user_id": "team", "agent_id": f"agent-{writer}",
             "chunk_id": f"w{writer}-{i}", "session_id": "shared" if i % 2 else f"own-{writer}",
             "timestamp": 1_700_000_000 + rnd.randint(0, 40) * 60, "tags": [f"writer-{writer}"]}
            for i in range(n)]


def writer(args: dict) -> None:
    records = writer_records(args["writer"], args["n"], args["seed"])
    with BeeWeave.from_url(args["url"], embedder=HashingEmbedder(32), tenant=args["tenant"]) as memory:
        for start in range(0, len(records), args["batch"]):
            memory.add_many(records[start : start + args["batch"]], link=False)
    print(json.dumps([r["chunk_id"] for r in records]), flush=True)


def observer(args: dict) -> None:
    seen: list[dict] = []
    lock = threading.Lock()

    def on_event(payload: dict) -> None:
        with lock:
            seen.append(payload)

    store = PostgresStore(args["url"], tenant=args["tenant"])
    listener = store.listen(on_event)
    print("ready", flush=True)
    deadline = time.monotonic() + args["timeout"]
    count = 0
    while time.monotonic() < deadline:
        count = store.count()
        with lock:
            created = sum(1 for p in seen if p["type"] == "memory.created")
        if count >= args["expect"] and created >= args["expect"]:
            break
        time.sleep(0.1)
    listener.close()
    store.close()
    with lock:
        print(json.dumps({"count": count, "events": seen}), flush=True)


def inserter(args: dict) -> None:
    import numpy as np

    from beeweave_core import KnowledgeChunk
    from beeweave_core.store.base import ChunkRow

    store = PostgresStore(args["url"], tenant=args["tenant"])
    rows = [ChunkRow(KnowledgeChunk(raw_content=f"same {i}", id=f"dup-{i}", user_id="team"),
                     np.eye(32, dtype=np.float32)[i], ["same"]) for i in range(args["n"])]
    try:
        store.insert(rows)
        print("ok", flush=True)
    except DuplicateIdError as exc:
        print(f"duplicate: {exc}", flush=True)
    finally:
        store.close()


if __name__ == "__main__":
    {"writer": writer, "observer": observer, "inserter": inserter}[sys.argv[1]](json.loads(sys.argv[2]))
