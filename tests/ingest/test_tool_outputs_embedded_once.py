"""An event whose tool calls return one text many times (a job polled until it is done) has
that text embedded once (issue 47, item 8: one event with 1,000 tool calls spent its time in
the model, one run per text). Every memory still gets its vector, the one the text gets alone."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from beeweave_core import BeeWeave, HashingEmbedder
from tests.ingest.ingest_support import everything


class CountingEmbedder(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(64)
        self.texts: list[str] = []

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return super().embed_documents(texts)


def test_a_text_the_batch_holds_many_times_is_embedded_once_and_each_memory_has_its_vector():
    emb = CountingEmbedder()
    mem = BeeWeave(None, embedder=emb)
    outputs = ["Job 42 is still running, 3 of 9 steps done", "Job 42 is still running, 3 of 9 steps done",
               "Job 42 finished: 9 of 9 steps done, report at /reports/42"] * 3
    steps = [{"tool": "job_status", "input": "job 42", "output": o} for o in outputs]
    mem.ingest({"id": "poll", "user_id": "ops", "query": "Is job 42 done?", "response": "Yes, it finished.",
                "intermediate_steps": steps})
    assert mem.flush(30)
    stored = everything(mem)
    tool_memories = [c for c in stored if c.metadata["ingest"]["role"] == "tool"]
    assert len(tool_memories) == len(outputs)  # every call is stored, as before
    assert sorted(emb.texts) == sorted(set(emb.texts))  # no text embedded twice
    assert len(emb.texts) == 1 + 2  # the turn and the two distinct outputs
    vectors = mem.backend.get_vectors([c.id for c in stored])
    reference = HashingEmbedder(64)
    for c in stored:  # the slow obvious reference: each text embedded alone
        assert np.allclose(vectors[c.id], reference.embed_documents([c.content])[0])
    mem.close()
