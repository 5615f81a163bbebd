"""Two agents in separate processes sharing one memory through PostgreSQL.

The scout investigates an incident and writes what it finds; the planner, in another
process, hears each new memory as it is committed (LISTEN/NOTIFY), and then answers
questions from the shared memory, citing which agent learned what. Both open the same
store with ``BeeWeave.from_url``: nothing is copied between them.

    python examples/postgres_two_agents.py [POSTGRESQL_URL] [--model]

Without a URL it starts a throw-away PostgreSQL with pgvector from the ``pgserver`` pip
package (``pip install pgserver``). Offline; ``--model`` uses the bundled MiniLM instead
of the instant hashing embedder.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import uuid
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the default model ships in a pip package

FINDINGS = [
    "The checkout service started timing out at 09:40 after the 09:35 deploy.",
    "Database connections from checkout hit the pool limit of 20 during the incident.",
    "The 09:35 deploy raised checkout's worker count from 8 to 32.",
    "Rolling back the deploy at 10:05 brought checkout latency back to normal.",
]
QUESTIONS = [
    "why did checkout time out?",
    "what fixed the checkout latency?",
    "how many database connections were allowed?",
]


def _open(url: str, tenant: str, use_model: bool) -> Any:
    from beeweave_core import BeeWeave, HashingEmbedder

    return BeeWeave.from_url(url, tenant=tenant, embedder=None if use_model else HashingEmbedder(256))


def scout(url: str, tenant: str, use_model: bool, planner_ready: Any) -> None:
    """Agent A: writes its findings one by one, as it makes them."""
    with _open(url, tenant, use_model) as memory:
        planner_ready.wait(60)
        for text in FINDINGS:
            memory.add(text, user_id="team", agent_id="scout", session_id="incident-42", tags=["incident"])


def planner(url: str, tenant: str, use_model: bool, planner_ready: Any, out: Any) -> None:
    """Agent B: hears the scout's memories arrive, then answers from the shared memory."""
    import threading

    from beeweave_core import EventType
    from beeweave_core.store.postgres.events import to_memory_event

    with _open(url, tenant, use_model) as memory:
        heard: list[str] = []
        all_heard = threading.Event()

        def on_created(event: Any) -> None:
            heard.append(event.chunk_id)
            out.put(f"[planner] heard {event.type.value} from {event.agent_id}: {memory.get(event.chunk_id).raw_content}")
            if len(heard) == len(FINDINGS):
                all_heard.set()

        memory.events.subscribe(on_created, types=[EventType.CREATED], agent_id="scout")
        # Forward other processes' events into this process's EventBus.
        listener = memory.backend.listen(lambda payload: memory.events.emit(to_memory_event(payload)))
        planner_ready.set()
        try:
            if not all_heard.wait(60):
                out.put("[planner] gave up waiting for the scout")
                return
        finally:
            listener.close()
        for question in QUESTIONS:
            hit = memory.search(question, user_id="team", k=1)[0]
            out.put(f"[planner] Q: {question}\n          A: {hit.chunk.raw_content} "
                    f"(learned by {hit.chunk.agent_id}, score {hit.score:.2f})")
        memory.add("Plan: cap checkout workers at 16 until the pool limit is raised.", user_id="team",
                   agent_id="planner", session_id="incident-42", tags=["incident", "plan"])
        out.put(f"[planner] wrote its plan; the shared memory now holds {memory.count()} memories")


def run(url: str, *, use_model: bool = False) -> list[str]:
    """Run both agents against ``url``; return what they reported, in order."""
    from beeweave_core.store.postgres import PostgresStore

    tenant = f"two-agents-{uuid.uuid4().hex[:8]}"  # a fresh memory for every run
    ctx = mp.get_context("spawn")
    ready, out = ctx.Event(), ctx.Queue()
    agents = [ctx.Process(target=planner, args=(url, tenant, use_model, ready, out), name="planner"),
              ctx.Process(target=scout, args=(url, tenant, use_model, ready), name="scout")]
    for p in agents:
        p.start()
    lines: list[str] = []
    try:
        while agents[0].is_alive() or not out.empty():
            try:
                lines.append(out.get(timeout=0.5))
                print(lines[-1], flush=True)
            except Exception:  # queue.Empty: keep waiting while the planner works
                continue
    finally:
        for p in agents:
            p.join(120)
    if any(p.exitcode != 0 for p in agents):
        raise SystemExit(f"an agent failed: {[(p.name, p.exitcode) for p in agents]}")
    store = PostgresStore(url, tenant=tenant)
    store.drop_tenant()  # leave the database as we found it
    store.close()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", nargs="?", default=os.environ.get("BEEWEAVE_PG_URL"))
    parser.add_argument("--model", action="store_true", help="embed with the bundled MiniLM model")
    args = parser.parse_args()
    url = args.url
    if url is None:
        import pgserver

        data = tempfile.mkdtemp(prefix="beeweave-demo-pg-")
        os.chmod(data, 0o755)  # pgserver runs PostgreSQL as its own user when started as root
        url = pgserver.get_server(data, cleanup_mode="delete").get_uri()
        print(f"started a throw-away PostgreSQL at {url}")
    run(url, use_model=args.model)


if __name__ == "__main__":
    main()
