"""BeeWeave's default configuration on LoCoMo, side by side with the peers in one run.

Usage:
    python benchmarks/locomo.py [DATA_DIR] [--systems beeweave,bm25,faiss,langchain,llamaindex]
                                [--limit-convs N] [--backend embedded|postgres]
                                [--embedder default|minilm|minilm-torch|minilm-onnx|minilm-int8] [--as-notes]

DATA_DIR defaults to ../shared/data/locomo (the development split; its README defines the
measure). Every turn is one memory: id = dia_id, user = the conversation, session = the
session number, timestamp = the session's date. Questions of categories 1-4 with evidence
are asked; recall@k is the share of a question's evidence turns in the top k. Query times
include the query's embedding for every system. ``--embedder``: ``default`` (the default
model, multilingual-e5-small) or the former default all-MiniLM-L6-v2 on a chosen runtime:
``minilm`` (onnxruntime where it works), ``minilm-torch``, ``minilm-onnx`` (the same float
weights in onnxruntime) or ``minilm-int8`` (int8-quantized).

``--as-notes`` is the check that unrelated memories sharing a session are not folded into
each other: BeeWeave gets each conversation's turns as a batch of notes, shuffled (seed 0),
every one under one session id with one timestamp, the speaker's name after the text
instead of a speaker tag before it. Neighbours in that session are unrelated turns, so
session context may only hurt; the peers are unchanged (they have no sessions).
"""

from __future__ import annotations

import os

# Scripts may set these (library code may not): nothing here may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import locomo_peers  # noqa: E402
from locomo_data import Turn  # noqa: E402

from beeweave_core import BeeWeave  # noqa: E402
from beeweave_core.embedders import SentenceTransformerEmbedder, as_embedder  # noqa: E402


def _postgres_url() -> str:
    """BEEWEAVE_PG_URL, or a throwaway PostgreSQL + pgvector from the pgserver package."""
    url = os.environ.get("BEEWEAVE_PG_URL")
    if url:
        return url
    import tempfile

    import pgserver

    data = tempfile.mkdtemp(prefix="beeweave-locomo-pg-")
    os.chmod(data, 0o755)  # pgserver runs PostgreSQL as an unprivileged user when we are root
    server = pgserver.get_server(data, cleanup_mode="delete")
    _SERVERS.append(server)  # the server stops when its handle is collected: keep it for the run
    return server.get_uri()


_SERVERS: list[object] = []


class BeeWeaveDefault:
    """BeeWeave with its defaults: a fresh store per conversation, one user per conversation.

    ``backend="postgres"`` runs the same defaults on PostgreSQL + pgvector (a new tenant
    per conversation), to show both backends give the same recall.
    """

    name = "beeweave"

    def __init__(self, backend: str = "embedded", embedder: str = "default", as_notes: bool = False) -> None:
        self._as_notes = as_notes
        # the model, loaded once for all stores
        runtime = {"minilm": "auto", "minilm-torch": "torch", "minilm-onnx": "onnx", "minilm-int8": "onnx"}
        self._embedder = as_embedder(None) if embedder == "default" else SentenceTransformerEmbedder(
            backend=runtime[embedder], quantize=embedder == "minilm-int8")
        self._memory: BeeWeave | None = None
        self._user = ""
        self._backend = backend
        self._url = _postgres_url() if backend == "postgres" else None
        where = "PostgreSQL + pgvector" if backend == "postgres" else "embedded"
        model = "multilingual-e5-small" if embedder == "default" else embedder.replace("minilm", "MiniLM")
        self.label = f"BeeWeave {where} (default: BM25 + {model}, session context, z-score fusion)"
        if as_notes:
            self.label += "; turns as notes in one session"

    def index(self, turns: Sequence[Turn]) -> None:
        if self._memory is not None:
            self._memory.close()
        if self._url is not None:
            tenant = f"locomo-{turns[0].conv_id if turns else 'empty'}-{os.getpid()}-{time.time_ns()}"
            self._memory = BeeWeave.from_url(self._url, embedder=self._embedder, tenant=tenant)
        else:
            self._memory = BeeWeave(embedder=self._embedder)
        self._user = f"conv-{turns[0].conv_id}" if turns else "empty"
        records = [{"content": t.content, "user_id": self._user, "chunk_id": t.dia_id, "session_id": str(t.session),
                    "timestamp": t.timestamp} for t in turns]
        if self._as_notes:
            records = [_as_note(r) for r in records]
            random.Random(0).shuffle(records)
        self._memory.add_many(
            records,
            show_progress=False,
            trusted=True,  # an import of the dataset as it is: no redaction or admission changes it
        )

    def query(self, text: str, k: int) -> list[str]:
        assert self._memory is not None
        # the ranking is what is measured: the gate off (it would silence a question, not reorder it)
        return [h.id for h in self._memory.search(text, user_id=self._user, k=k, abstain_below=0)]


def _as_note(record: dict) -> dict:
    speaker, _, text = record["content"].partition(": ")
    return {**record, "content": f"{text} ({speaker})", "session_id": "notes", "timestamp": 0.0}


def main() -> None:
    # --backend picks where BeeWeave stores its memories; everything else is the peers' CLI.
    backend = "embedded"
    argv = sys.argv[1:]
    if "--backend" in argv:
        i = argv.index("--backend")
        backend = argv[i + 1]
        del argv[i : i + 2]
        if backend not in ("embedded", "postgres"):
            sys.exit("--backend must be 'embedded' or 'postgres'")
    embedder = "default"
    if "--embedder" in argv:
        i = argv.index("--embedder")
        embedder = argv[i + 1]
        del argv[i : i + 2]
        if embedder not in ("default", "minilm", "minilm-torch", "minilm-onnx", "minilm-int8"):
            sys.exit("--embedder must be 'default', 'minilm', 'minilm-torch', 'minilm-onnx' or 'minilm-int8'")
    as_notes = "--as-notes" in argv
    if as_notes:
        argv.remove("--as-notes")
    locomo_peers.SYSTEMS = {"beeweave": lambda enc: BeeWeaveDefault(backend, embedder, as_notes),
                            **locomo_peers.SYSTEMS}
    locomo_peers.main(argv)


if __name__ == "__main__":
    main()
