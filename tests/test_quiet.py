"""Using the library prints nothing: no jieba dictionary messages, no model-loading bars.

Run in a fresh interpreter, because jieba and the model load once per process, and
with the real default model, because its loader is what draws the bars.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from beeweave_core.quiet import quiet_jieba, quiet_model_loading

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

_SCRIPT = textwrap.dedent(
    """
    import logging
    import beeweave_core
    from beeweave_core import BeeWeave

    with BeeWeave() as memory:                  # the default model, in memory
        memory.add("The user prefers answers in Chinese.", user_id="alice", session_id="s1")
        memory.add("用户对花生过敏。", user_id="alice", session_id="s1")   # Chinese: loads jieba
        memory.add_many([{"content": f"note {i} about the deploy", "user_id": "alice"} for i in range(5)])
        memory.ingest({"user_id": "alice", "query": "我们的预算是多少？",      # the worker: extraction, jieba's TF-IDF
                       "response": "预算是每晚不超过两万日元，住在京都车站旁边的酒店。"})
        assert memory.flush(60), "the queue did not drain"
        hits = memory.search("what is alice allergic to", user_id="alice", k=3, abstain_below=0)  # the closest
        assert hits, "no hits"
    # the library handed jieba's logger back as it found it
    assert logging.getLogger("jieba").level == logging.DEBUG, logging.getLogger("jieba").level
    """
)


@pytest.mark.model
def test_importing_and_using_the_library_prints_nothing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "HYPOTHESIS", "HF_HUB_DISABLE", "TQDM", "TRANSFORMERS_VERBOSITY"))}
    env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    out = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout == ""
    assert out.stderr == ""


def test_quiet_jieba_restores_the_level_the_application_set() -> None:
    logger = logging.getLogger("jieba")
    before = logger.level
    try:
        for level in (logging.NOTSET, logging.DEBUG, logging.ERROR):
            logger.setLevel(level)
            with quiet_jieba():
                assert not logger.isEnabledFor(logging.DEBUG)
                assert logger.isEnabledFor(logging.ERROR)  # real problems still show
            assert logger.level == level
    finally:
        logger.setLevel(before)


def test_quiet_model_loading_silences_transformers_bars_and_puts_the_hook_back(capsys) -> None:
    from transformers.utils import logging as tf_logging

    mine = []

    def hook(factory, args, kwargs):
        mine.append(kwargs.get("disable"))
        return factory(*args, **kwargs)

    previous = tf_logging.set_tqdm_hook(hook)
    try:
        with quiet_model_loading():
            for _ in tf_logging.tqdm(range(3), desc="Loading weights"):
                pass
        for _ in tf_logging.tqdm(range(3), desc="after", disable=False):
            pass
        assert mine == [True, False]  # the application's hook still runs, and is back afterwards
        assert tf_logging.set_tqdm_hook(previous) is hook
    finally:
        tf_logging.set_tqdm_hook(previous)
    err = capsys.readouterr().err
    assert "Loading weights" not in err


def test_the_cli_draws_no_progress_bar_into_a_pipe(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").write_text(
        '{"user_id": "alice", "query": "Where are the deploy logs?", "response": "In Grafana Loki."}\n')
    (tmp_path / "guide.md").write_text("# Deploys\n\nDeploys go through make deploy.\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    env.pop("BEEWEAVE_STORE", None)
    out = subprocess.run([sys.executable, "-m", "beeweave_core.cli", "--store", "m.db", "--embedder",
                          "beeweave:hashing-64", "ingest", "events.jsonl", "guide.md", "--user-id", "alice"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # stdout is a pipe: no bar (on a terminal there is one)
    assert "queued 1 event(s)" in out.stdout


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_the_cli_draws_its_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").write_text(
        '{"user_id": "alice", "query": "Where are the deploy logs?", "response": "In Grafana Loki."}\n')
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    env.pop("BEEWEAVE_STORE", None)
    leader, follower = os.openpty()  # standard output is a terminal
    try:
        out = subprocess.run([sys.executable, "-m", "beeweave_core.cli", "--store", "m.db", "--embedder",
                              "beeweave:hashing-64", "ingest", "events.jsonl"], cwd=tmp_path, env=env,
                             stdout=follower, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(follower)
        os.close(leader)
    assert out.returncode == 0, out.stderr
    assert "beeweave ingest" in out.stderr  # the bar, on standard error
