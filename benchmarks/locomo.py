"""BeeWeave's default configuration on LoCoMo, side by side with the peers in one run.

Usage:
    python benchmarks/locomo.py [DATA_DIR] [--systems beeweave,bm25,faiss,langchain,llamaindex]
                                [--limit-convs N]

DATA_DIR defaults to ../shared/data/locomo (the development split; its README defines the
measure). Every turn is one memory: id = dia_id, user = the conversation, session = the
session number, timestamp = the session's date. Questions of categories 1-4 with evidence
are asked; recall@k is the share of a question's evidence turns in the top k. Query times
include the query's embedding for every system.
"""

from __future__ import annotations

import os

# Scripts may set these (library code may not): nothing here may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import locomo_peers  # noqa: E402
from locomo_data import Turn  # noqa: E402

from beeweave_core import BeeWeave  # noqa: E402
from beeweave_core.embedders import SentenceTransformerEmbedder  # noqa: E402


class BeeWeaveDefault:
    """BeeWeave with its defaults: a fresh embedded store per conversation, one user per conversation."""

    name = "beeweave"
    label = "BeeWeave (default: BM25 + MiniLM, session context, z-score fusion)"

    def __init__(self) -> None:
        self._embedder = SentenceTransformerEmbedder()  # the default model, loaded once for all stores
        self._memory: BeeWeave | None = None
        self._user = ""

    def index(self, turns: Sequence[Turn]) -> None:
        if self._memory is not None:
            self._memory.close()
        self._memory = BeeWeave(embedder=self._embedder)
        self._user = f"conv-{turns[0].conv_id}" if turns else "empty"
        self._memory.add_many(
            [{"content": t.content, "user_id": self._user, "chunk_id": t.dia_id, "session_id": str(t.session),
              "timestamp": t.timestamp} for t in turns],
            show_progress=False,
        )

    def query(self, text: str, k: int) -> list[str]:
        assert self._memory is not None
        return [h.id for h in self._memory.search(text, user_id=self._user, k=k)]


locomo_peers.SYSTEMS = {"beeweave": lambda enc: BeeWeaveDefault(), **locomo_peers.SYSTEMS}

if __name__ == "__main__":
    locomo_peers.main()
