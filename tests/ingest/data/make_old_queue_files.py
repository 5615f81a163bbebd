"""How old_queue_files.tar.gz was made: run with the code of b9675b0 (the queue in files beside
the store), ``PYTHONPATH=<that tree> python make_old_queue_files.py <dir>/m.db``; it leaves a
store with a ``.queue`` file (pending and dead events) and an intake journal, killed without
closing; then each SQLite file was checkpointed and m.db, m.db.queue, m.db.queue.intake tarred.
Not a test: the fixture it made is what tests/ingest/test_ingest_queue_table.py opens."""
import os
import sys

from beeweave_core import BeeWeave
from beeweave_core.ingest import IngestConfig

db = sys.argv[1]
m = BeeWeave(db, embedder="beeweave:hashing-64", ingest=IngestConfig(autostart=False, journal_bytes=64 << 10))
m.add("a memory added before the upgrade", user_id="u", chunk_id="pre-1")
def ev(i):
    return {"id": f"old-{i}", "user_id": "u", "query": f"What is old code {i}?", "response": f"Old code {i} is kept in drawer {i}."}
for i in range(6):
    m.ingest(ev(i))
rt = m.parts.ingestion.runtime
rt._move_intake()  # old-0..5 now in the .queue file
q = rt.queue()
q.fail("old-5@u", "ValueError: made dead by the fixture")
for i in range(6, 10):
    m.ingest(ev(i))  # old-6..9 stay in the intake journal
print(rt._intake.count(), q.pending_count(), len(q.dead()), flush=True)
os._exit(0)  # like a kill: nothing closed
