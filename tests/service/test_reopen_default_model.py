"""A store reopens offline with the model it recorded (the default, or MiniLM, the former default).

The store records ``sentence-transformers/all-MiniLM-L6-v2``; the CLI and the server take
the model from the store, so they reopen it by that name, which must load the bundled
package's copy and never the Hugging Face hub. With HF_HUB_OFFLINE=1 a lookup on the hub
fails at once (ModelLoadError) instead of retrying for a minute, so a regression fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from beeweave_core import DEFAULT_MODEL_NAME, SentenceTransformerEmbedder
from beeweave_core.embedders import as_embedder
from beeweave_core.server import ServerConfig
from tests.service.service_support import ACME_KEY, start_server

pytestmark = [pytest.mark.model, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EVENTS = [
    {"user_id": "alice", "query": "Which port does staging listen on?",
     "response": "Staging listens on port 5433 behind the VPN.", "session_id": "s1", "id": "ev-port"},
    {"user_id": "alice", "query": "Who reviews database migrations?",
     "response": "Migrations are reviewed by Priya before every release.", "session_id": "s1", "id": "ev-review"},
]


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("BEEWEAVE_STORE", None)
    return env


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "beeweave_core.cli", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300)


def test_the_recorded_name_and_its_bare_form_are_the_bundled_model() -> None:
    for name in (DEFAULT_MODEL_NAME, "all-MiniLM-L6-v2"):
        emb = as_embedder(name)
        assert emb.name == name  # a store that recorded either name keeps matching it
        assert emb.dim == 384    # known without loading, like the default's
    bare = as_embedder("all-MiniLM-L6-v2").embed_query("where do deploy logs go")  # loads offline
    default = SentenceTransformerEmbedder().embed_query("where do deploy logs go")
    np.testing.assert_allclose(bare, default, atol=1e-6)  # the same, bundled, model


@pytest.fixture(scope="module")
def default_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store built through the CLI with no --embedder: the bundled MiniLM."""
    d = tmp_path_factory.mktemp("reopen")
    (d / "events.jsonl").write_text("\n".join(json.dumps(e) for e in EVENTS) + "\n")
    r = _cli("--store", "team.db", "ingest", "events.jsonl", cwd=d)
    assert r.returncode == 0, r.stderr
    assert "all queued events are processed" in r.stdout
    return d / "team.db"


def test_the_cli_reopens_a_default_model_store_and_searches_it(default_store: Path) -> None:
    r = _cli("--store", str(default_store), "search", "staging port", "--user-id", "alice", "--json",
             cwd=default_store.parent)
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)
    assert hits, r.stdout
    assert "5433" in json.dumps(hits[0], ensure_ascii=False)


def test_a_server_reopened_on_a_default_model_store_answers_a_search(default_store: Path) -> None:
    srv = start_server(ServerConfig(default_store, {ACME_KEY: "acme"}))  # no embedder: the store's own
    try:
        with srv.http(ACME_KEY) as http:
            r = http.post("/api/v1/search", json={"query": "who reviews migrations", "user_id": "alice", "k": 2})
        assert r.status_code == 200, r.text
        hits = r.json()["hits"]
        assert hits and "Priya" in json.dumps(hits[0], ensure_ascii=False)
    finally:
        srv.stop()


def test_a_store_built_with_the_former_default_reopens_with_it(tmp_path: Path) -> None:
    """A store built with all-MiniLM-L6-v2 (the default before multilingual-e5-small) keeps it:
    opened without embedder= in Python and by the CLI, it is searched with MiniLM."""
    from beeweave_core import BeeWeave
    from beeweave_core.embedders import MINILM_MODEL_NAME

    path = tmp_path / "old.db"
    with BeeWeave(path, embedder=SentenceTransformerEmbedder()) as memory:
        memory.add("Staging listens on port 5433 behind the VPN.", user_id="alice")
    with BeeWeave(path) as memory:
        assert memory.embedder.name == MINILM_MODEL_NAME
        assert "5433" in memory.search("staging port", user_id="alice", k=1)[0].chunk.raw_content
    r = _cli("--store", str(path), "search", "staging port", "--user-id", "alice", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "5433" in r.stdout
    with BeeWeave(path) as memory:  # and moves to the new default when asked
        assert memory.reembed() == 1 and memory.embedder.name == DEFAULT_MODEL_NAME
    with BeeWeave(path) as memory:
        assert memory.embedder.name == DEFAULT_MODEL_NAME
        assert "5433" in memory.search("which port does staging use", user_id="alice", k=1)[0].chunk.raw_content
