"""One writer/searcher process of the PostgreSQL load test: ``python pg_load_worker.py JSON-ARGS``.

For ``seconds`` it adds small batches of memories (ids ``p<worker>-<n>``) for its own two
users, searches (scoped to one of them) and gives feedback to its memories; then prints
one JSON line of what it did: the ids it added, the feedback it gave per id and signal,
how often each id came back from its searches, and the errors it met (there must be
none). All workers share one tenant: its BM25 statistics, its index, its tables.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.lifecycle import LifecycleConfig
from beeweave_core.validation import MAX_WEIGHT  # the highest weight a memory may hold
from tests.support import WORDS

FIXED = datetime(2025, 6, 1, tzinfo=timezone.utc)


def main(args: dict) -> None:
    w, rnd = args["worker"], random.Random(args["worker"])
    memory = BeeWeave.from_url(args["url"], tenant=args["tenant"], embedder=HashingEmbedder(32), clock=lambda: FIXED,
                               lifecycle=LifecycleConfig(max_weight=MAX_WEIGHT, min_weight=0.0, access_flush_interval=0.2))
    added: list[str] = []
    feedback: dict[str, Counter] = defaultdict(Counter)
    hits: Counter = Counter()
    errors: list[str] = []
    ops = Counter()
    deadline = time.monotonic() + args["seconds"]
    n = 0
    while time.monotonic() < deadline:
        op = rnd.random()
        try:
            if op < 0.35:
                batch = [{"content": " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(4, 10))),
                          "user_id": f"w{w}u{(n + i) % 2}", "chunk_id": f"p{w}-{n + i}", "weight": 1000.0,
                          "session_id": f"s{w}"} for i in range(rnd.randint(1, 4))]
                memory.add_many(batch, show_progress=False)
                added += [r["chunk_id"] for r in batch]
                n += len(batch)
                ops["add"] += len(batch)
            elif op < 0.7:
                user = f"w{w}u{rnd.randrange(2)}"
                for h in memory.search(" ".join(rnd.choice(WORDS) for _ in range(3)), user_id=user, k=5):
                    if h.chunk.user_id != user:
                        errors.append(f"search for {user} returned {h.id} of {h.chunk.user_id}")
                    hits[h.id] += 1
                ops["search"] += 1
            else:
                if not added:
                    continue
                cid, signal = rnd.choice(added), rnd.choice(["used", "up"])
                memory.feedback(cid, signal)
                feedback[cid][signal] += 1
                ops["feedback"] += 1
        except Exception as exc:  # reported, and the test fails on any
            errors.append(f"{type(exc).__name__}: {exc}")
    memory.close()  # writes the pending access counts
    print(json.dumps({"added": added, "feedback": {k: dict(v) for k, v in feedback.items()}, "hits": dict(hits),
                      "errors": errors[:20], "ops": dict(ops)}), flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
