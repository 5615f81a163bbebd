"""One of several processes sharing one store file: ``python multiproc_worker.py JSON-ARGS``.

For ``seconds`` it ingests events (``<name>-ev<i>``), adds memories (``<name>-a<i>``, each
with its own marker word), updates some (tags, or new content keeping the marker), deletes
some, and searches for the marker another process published last (in ``<dir>/<name>.last``,
written only after that add returned): one search must find it. It reports each outcome on
stdout, one line at a time; a line starting ``ERROR`` is an error outside BeeWeaveError.
``dim`` is the hashing embedder's width.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.errors import BeeWeaveError
from beeweave_core.ingest import IngestConfig
from tests.support import WORDS


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def marker(name: str, i: int) -> str:
    return f"zq{name}x{i}"


def main(args: dict) -> None:
    name, workdir, peers = args["name"], Path(args["dir"]), args["peers"]
    rnd = random.Random(name)
    m = BeeWeave(args["path"], embedder=HashingEmbedder(args["dim"]), ingest=IngestConfig(batch_size=8))
    say("open")
    added: list[str] = []
    end = time.monotonic() + args["seconds"]
    i = 0
    while time.monotonic() < end:
        try:
            eid = f"{name}-ev{i}"
            m.ingest({"user_id": f"u{i % 2}", "id": eid, "session_id": f"s-{name}",
                      "query": "question " + " ".join(rnd.choice(WORDS) for _ in range(5)),
                      "response": "answer " + " ".join(rnd.choice(WORDS) for _ in range(8))})
            say(f"acked {eid}")
            cid = m.add(f"{marker(name, i)} " + " ".join(rnd.choice(WORDS) for _ in range(6)), user_id="shared",
                        chunk_id=f"{name}-a{i}", session_id=f"s-{name}")
            say(f"added {cid}")
            added.append(cid)
            if i % 2 == 0:  # published adds (even) are never deleted: a peer may look for one a while later
                tmp = workdir / f"{name}.last.tmp"
                tmp.write_text(f"{i}")
                tmp.replace(workdir / f"{name}.last")  # whole, never half written
            if i % 3 == 1:
                m.update(added[-2], tags=[f"t{i}"])
                say(f"updated {added[-2]}")
            if i % 5 == 2:
                old = added[-2]
                m.update(old, content=f"{marker(name, int(old.rsplit('a', 1)[1]))} rewritten "
                         + " ".join(rnd.choice(WORDS) for _ in range(4)))
                say(f"rewrote {old}")
            if i % 7 == 3 and any(int(c.rsplit("a", 1)[1]) % 2 for c in added):
                gone = next(c for c in reversed(added) if int(c.rsplit("a", 1)[1]) % 2)
                added.remove(gone)
                m.delete(gone)
                say(f"deleted {gone}")
            peer = rnd.choice([p for p in peers if p != name])
            last = workdir / f"{peer}.last"
            if last.exists():
                j = int(last.read_text() or 0)
                hits = m.search(marker(peer, j), user_id="shared", k=10)
                seen = any(h.chunk.id == f"{peer}-a{j}" for h in hits)
                why = ""
                if not seen:
                    from beeweave_core.filters import build_filter

                    got = m.backend.get([f"{peer}-a{j}"]).get(f"{peer}-a{j}")
                    lex = m.backend.lexical_search({marker(peer, j): 1}, build_filter({}, user_id="shared"), 3)
                    why = (f" (stored: {got is not None}, status {got and got.status.value}, "
                           f"known term: {marker(peer, j) in m.backend.index.term_ids}, lexical {lex}, "
                           f"hits {[h.chunk.id for h in hits]})")
                say(f"search {peer}-a{j} {'seen' if seen else 'missed'}{why}")
        except BeeWeaveError as exc:
            say(f"beeweave-error {type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001  (what the test is looking for)
            say(f"ERROR {type(exc).__name__}: {exc}")
        i += 1
    try:
        say(f"flushed {m.flush(120)}")
        m.close()
    except BeeWeaveError as exc:
        say(f"beeweave-error {type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001
        say(f"ERROR {type(exc).__name__}: {exc}")
    say("done")


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
