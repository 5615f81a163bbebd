"""A process for the atomicity kill tests: ``python atomic_child.py MODE PATH``. It prints
``ready`` once open, then repeats its multi-step write (printing ``ok <n>`` after each) until
it is killed with SIGKILL:

* ``reembed``: the store API a re-embed uses: ``modify`` of every record with vectors of
  another dimension and the embedder metadata in the same call (``modify(None, change, meta=)``).
* ``update``: ``BeeWeave.update(id, content=...)`` of ten memories (delete and re-insert).
* ``fact``: ``BeeWeave.remember_fact`` with new content each time.
* ``forget``: ``delete_user`` of a user with many memories (once), then ``add``s of another.
* ``close``: adds, then ``close()`` (graph and snapshot written), then a reopen, again.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from beeweave_core import BeeWeave, HashingEmbedder, KnowledgeChunk
from beeweave_core.store.base import ChunkRow
from beeweave_core.store.sqlite import SQLiteStore


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def reembed(path: str) -> None:
    store = SQLiteStore(path)
    say("ready")
    for n in range(10**6):
        dim = 24 if json.loads(store.get_meta("embedder") or "{}").get("dim") == 16 else 16
        rng = np.random.default_rng(n)

        def switch(current: dict[str, KnowledgeChunk], dim: int = dim, rng: np.random.Generator = rng
                   ) -> list[ChunkRow]:
            return [ChunkRow(c, (v := rng.standard_normal(dim).astype(np.float32)) / np.linalg.norm(v),
                             c.content.split()) for c in current.values()]

        store.modify(None, switch, meta={"embedder": json.dumps({"name": f"test-{dim}", "dim": dim})})
        say(f"ok {n}")


def update(path: str) -> None:
    m = BeeWeave(path, embedder=HashingEmbedder(32))
    say("ready")
    for n in range(10**6):
        for i in range(10):
            m.update(f"m{i}", content=f"version {n} of memory {i} about apples and pears")
        say(f"ok {n}")


def fact(path: str) -> None:
    m = BeeWeave(path, embedder=HashingEmbedder(32))
    say("ready")
    for n in range(10**6):
        m.remember_fact("home_city", f"lives in town{n}", user_id="u")
        say(f"ok {n}")


def forget(path: str) -> None:
    m = BeeWeave(path, embedder=HashingEmbedder(32))
    say("ready")
    m.backend.delete_user("gone")
    say("ok 0")
    for n in range(1, 10**6):
        m.add(f"more words number {n}", user_id="kept")
        say(f"ok {n}")


def close(path: str) -> None:
    say("ready")
    for n in range(10**6):
        tag = f"{os.getpid()}x{n}"  # ids unique across the runs of the test
        m = BeeWeave(path, embedder=HashingEmbedder(32))
        m.add_many([{"content": f"note {n} {i} about the garden", "user_id": "u", "chunk_id": f"n{tag}-{i}"}
                    for i in range(20)], show_progress=False)
        m.search("garden note", k=3)
        m.close()
        say(f"ok {tag}")


if __name__ == "__main__":
    {"reembed": reembed, "update": update, "fact": fact, "forget": forget, "close": close}[sys.argv[1]](sys.argv[2])
