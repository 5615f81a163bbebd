"""A process for the crash tests to kill: ``python crash_child.py MODE JSON-ARGS``.

It reports on stdout, one line at a time (flushed), what it has committed; the test
kills it with SIGKILL at a moment of its choosing and checks the store on reopen.

* ``add_many``: adds batches of memories (ids ``b<batch>-<i>``) with relationship
  mining; prints ``committed <batch>`` after each ``add_many`` returns.
* ``maintain``: runs ``maintain()`` on a prepared store; prints ``start``, ``step`` as each
  merge or archive begins, and ``done``.
* ``ingest``: several threads call ``ingest()`` as fast as they can while the worker is
  busy storing; prints ``acked <event id>`` after each ``ingest()`` returns.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.ingest import IngestConfig
from beeweave_core.lifecycle import LifecycleConfig
from tests.support import WORDS

_print_lock = threading.Lock()


def say(line: str) -> None:
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def batch_records(batch: int, size: int) -> list[dict]:
    rnd = random.Random(batch)
    return [{"content": " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(4, 14))),
             "user_id": f"u{batch % 3}", "session_id": f"s{(batch + i) % 4}", "chunk_id": f"b{batch}-{i}",
             "tags": [rnd.choice(WORDS[:12])], "timestamp": 1_700_000_000 + batch * 1000 + i}
            for i in range(size)]


def add_many(args: dict) -> None:
    if args.get("hnsw_limit"):
        from tests.reliability.rel_support import small_hnsw

        small_hnsw(args["hnsw_limit"]).__enter__()
    memory = BeeWeave(args["path"], embedder=HashingEmbedder(32))
    say("open")
    for batch in range(args["start"], args["start"] + args["batches"]):
        memory.add_many(batch_records(batch, args["size"]), show_progress=False)
        if args.get("hnsw_limit"):
            memory.search("python memory", k=3)  # keeps the graph growing with the records
        say(f"committed {batch}")
    memory.close()
    say("done")


def maintain(args: dict) -> None:
    from beeweave_core.lifecycle.maintenance import Maintenance

    for name in ("_merge", "_forget"):  # say "step" as each merge or archive begins
        original = getattr(Maintenance, name)

        def step(self, *a, _original=original, **kw):
            say("step")
            return _original(self, *a, **kw)

        setattr(Maintenance, name, step)
    memory = BeeWeave(args["path"], embedder=HashingEmbedder(32),
                      lifecycle=LifecycleConfig(capacity=args["capacity"]))
    say("start")
    memory.maintain()
    say("done")
    time.sleep(3600)


def ingest(args: dict) -> None:
    memory = BeeWeave(args["path"], embedder=HashingEmbedder(32), ingest=IngestConfig(batch_size=16))
    say("open")

    def run(t: int) -> None:
        rnd = random.Random(t)
        for i in range(args["per_thread"]):
            eid = f"t{t}-{i}"
            memory.ingest({"user_id": f"u{t % 2}", "id": eid, "session_id": f"s{t}",
                           "query": f"question {i} about " + " ".join(rnd.choice(WORDS) for _ in range(6)),
                           "response": "answer: " + " ".join(rnd.choice(WORDS) for _ in range(12))})
            say(f"acked {eid}")

    threads = [threading.Thread(target=run, args=(t,)) for t in range(args["threads"])]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    say("all acked")
    time.sleep(3600)


if __name__ == "__main__":
    {"add_many": add_many, "maintain": maintain, "ingest": ingest}[sys.argv[1]](json.loads(sys.argv[2]))
