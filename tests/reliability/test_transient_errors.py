"""A model that cannot be loaded yet is a transient failure: the ingest worker keeps the
events queued and retries with backoff (like an unavailable store); none is dead-lettered,
and every one is stored once the model loads."""

from __future__ import annotations

import threading

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.errors import ModelLoadError
from beeweave_core.ingest import IngestConfig


class FlakyModel(HashingEmbedder):
    """Fails to load until ``ready`` is set (a model download or a GPU still busy)."""

    def __init__(self) -> None:
        super().__init__(64)
        self.ready = threading.Event()
        self.failures = 0

    def embed_documents(self, texts):
        if not self.ready.is_set():
            self.failures += 1
            raise ModelLoadError("the model is not loaded yet (simulated)")
        return super().embed_documents(texts)


def test_model_load_errors_are_retried_not_dead_lettered():
    model = FlakyModel()
    m = BeeWeave(embedder=model, ingest=IngestConfig(retry_max_delay=0.2))
    try:
        ids = [m.ingest({"user_id": "u", "query": f"question {i} about the deploy pipeline",
                         "response": f"answer {i}: the pipeline deploys on merge to main"}) for i in range(5)]
        assert not m.flush(1.5)  # cannot drain: the model is not there
        assert model.failures >= 2 and m.dead_letters() == [] and m.pending_events() == 5
        model.ready.set()
        assert m.flush(20)
        assert m.dead_letters() == []
        assert {c.id for c in m.get_many([f"{i}@u:0" for i in ids])} == {f"{i}@u:0" for i in ids}
    finally:
        m.close()
