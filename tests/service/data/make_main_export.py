"""Writes ``export_at_b9675b0.json``: a user's export made by the code before parts owned their
data, which ``test_user_data`` imports with today's code. Run it against that checkout:

    PYTHONPATH=<checkout at b9675b0> python tests/service/data/make_main_export.py > tests/service/data/export_at_b9675b0.json
"""

import json
import sys
from datetime import datetime, timezone

from beeweave_core import BeeWeave
from beeweave_core.lifecycle.review import flag
from beeweave_core.server.service import MemoryService

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
m = BeeWeave(embedder="beeweave:hashing-64", clock=lambda: T0)
svc = MemoryService(m)
for i, text in enumerate(["I moved to Lyon in March.", "My sister Ana lives in Paris.",
                          "Ana works as a nurse at the Paris hospital.", "I drink green tea every morning."]):
    m.add(text, user_id="alice", session_id="s1", timestamp=T0.replace(hour=9 + i), chunk_id=f"a{i}")
m.add("I drink green tea every morning.", user_id="alice", chunk_id="a-dup", timestamp=T0)
m.maintain(user_id="alice")
m.update("a0", content="I moved to Lyon, France, in March.")
m.relate("a1", "a2", "supports", note="same person")
m.feedback(["a2"], "up")
svc.search("where does my sister live", user_id="alice")
m.remember_fact("drink", "My morning drink is green tea.", user_id="alice")
m.remember_opinion("Lyon is too rainy.", user_id="alice", topic="lyon weather", confidence=0.4)
m.remember_opinion("Lyon is sunny enough.", user_id="alice", topic="lyon weather", confidence=0.7)
flag(m.backend, m.get("a1"), "stale", T0)
m.watch("trips to Paris", user_id="alice")
m.flush()
svc.recorder.flush()
data = svc.export_user("alice")
svc.close()
json.dump(data, sys.stdout, indent=1, sort_keys=True, default=str)
