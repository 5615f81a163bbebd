"""``reembed`` is resumable: a run that dies halfway keeps the store on the old model, and
the next run embeds only what the first did not (and what changed since)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from beeweave_core import BeeWeave
from beeweave_core.embedders import HashingEmbedder


class Counting(HashingEmbedder):
    """A hashing embedder under another name that counts what it embeds and can die."""

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__(32)
        self.name = "test:counting-32"
        self.embedded: list[str] = []
        self.fail_after = fail_after

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail_after is not None and len(self.embedded) + len(texts) > self.fail_after:
            raise KeyboardInterrupt("killed")  # what a Ctrl-C halfway does
        self.embedded += list(texts)
        return super().embed_documents(texts)


def _store(path: Path) -> BeeWeave:
    memory = BeeWeave(path, embedder="beeweave:hashing-32")
    memory.add_many([{"content": f"memory {i} of user {i % 3}", "user_id": f"u{i % 3}"} for i in range(100)],
                    show_progress=False)
    return memory


def test_a_killed_reembed_resumes_where_it_stopped(tmp_path: Path) -> None:
    memory = _store(tmp_path / "s.db")
    killed = Counting(fail_after=50)
    with pytest.raises(KeyboardInterrupt):
        memory.reembed(killed, batch_size=10)
    assert 30 <= len(killed.embedded) <= 50
    assert memory.embedder.name == "beeweave:hashing-32"  # still wholly on the old model
    memory.close()

    memory = BeeWeave(tmp_path / "s.db")
    assert memory.embedder.name == "beeweave:hashing-32"
    changed = killed.embedded[0]  # embedded by the killed run, changed since: embedded again
    user = f"u{int(changed.split()[1]) % 3}"
    memory.update(memory.search(changed, user_id=user, k=1)[0].id, content="memory 7 changed")
    resumed = Counting()
    assert memory.reembed(resumed, batch_size=10) == 100
    done_before = set(killed.embedded) - {changed}
    assert sorted(resumed.embedded) == sorted(
        [f"memory {i} of user {i % 3}" for i in range(100) if f"memory {i} of user {i % 3}" not in done_before
         and f"memory {i} of user {i % 3}" != changed] + ["memory 7 changed"])
    assert memory.embedder.name == "test:counting-32"
    assert memory.search("memory 7 changed", user_id=user, k=1)[0].chunk.raw_content == "memory 7 changed"
    assert memory.verify().ok
    assert not list(memory._shared.backend.kv_scan("reembed"))  # the checkpoint is gone
    memory.close()


def test_forgetting_a_user_forgets_their_checkpointed_vectors(tmp_path: Path) -> None:
    memory = _store(tmp_path / "s.db")
    with pytest.raises(KeyboardInterrupt):
        memory.reembed(Counting(fail_after=60), batch_size=10)
    backend = memory._shared.backend
    before = len(list(backend.kv_scan("reembed")))
    assert before
    memory.forget_user("u0")
    remaining = [v for _, v in backend.kv_scan("reembed")]
    assert len(remaining) < before
    assert all(not any(memory_id.startswith("u0") for memory_id in v["ids"]) for v in remaining)
    memory.close()
