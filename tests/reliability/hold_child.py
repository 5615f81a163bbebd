"""A second process holding a store open: ``python hold_child.py PATH``. It opens the store,
searches (so its index and HNSW graph are built), prints ``ready``, waits for a line on stdin,
then searches and counts again (printing ``count <n>``) and closes (writing its graph and
snapshot), printing ``done``."""

from __future__ import annotations

import sys

from beeweave_core import BeeWeave, HashingEmbedder


def main(path: str) -> None:
    m = BeeWeave(path, embedder=HashingEmbedder(32))
    m.search("zorblax garden", k=5)
    print("ready", flush=True)
    sys.stdin.readline()
    hits = m.search("zorblax garden", k=5)
    print(f"count {m.count()} hits {' '.join(h.chunk.id for h in hits)}", flush=True)
    m.close()
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
