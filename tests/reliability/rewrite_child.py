"""A process rewriting memories of a shared store file: ``python rewrite_child.py PATH SECONDS``.

For ``SECONDS`` it replaces 1-5 of the permanent memories ``s0``..``s59`` at a time (new text,
so new row numbers), and inserts and deletes memories of its own; it prints ``ready`` once
it has started and ``rewrites <n>`` at the end. The permanent memories are never deleted.
"""

from __future__ import annotations

import random
import sys
import time

from beeweave_core.store.base import ChunkRow
from beeweave_core.store.sqlite import SQLiteStore
from tests import conformance_data

PERMANENT = [f"s{i}" for i in range(60)]


def row(rnd: random.Random, cid: str, n: int) -> ChunkRow:
    """A record with new text (version ``n``) and a new vector."""
    words = " ".join(f"w{rnd.randint(0, 50)}" for _ in range(5))
    return conformance_data.row(cid, f"{words} only{cid} v{n}", seed=rnd.randrange(2**31), user_id="u0")


def main(path: str, seconds: float) -> None:
    rnd = random.Random(1)
    store = SQLiteStore(path)
    print("ready", flush=True)
    n = rewrites = 0
    own: list[str] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        n += 1
        op = rnd.random()
        if op < 0.6:
            store.replace([row(rnd, c, n) for c in rnd.sample(PERMANENT, rnd.randint(1, 5))])
            rewrites += 1
        elif op < 0.8:
            store.insert([row(rnd, f"e{n}", n)])
            own.append(f"e{n}")
        elif own:
            store.delete([own.pop(rnd.randrange(len(own)))])
    store.close()
    print(f"rewrites {rewrites}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
