"""The LangChain face's public surface is a contract; importing it loads no model and
changes no process-wide setting beyond what importing LangChain itself does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import beeweave_langchain

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ["torch", "sentence_transformers", "transformers", "faiss", "jieba", "Stemmer"]

# In a fresh interpreter; numpy and LangChain (with its HTTP stack) are imported first because
# they install warning filters of their own.
PROBE = textwrap.dedent("""
    import json, logging, os, sys, warnings
    import numpy, langchain_core.retrievers, langchain_classic.base_memory
    loggers = lambda: {n: l.level for n, l in logging.root.manager.loggerDict.items() if isinstance(l, logging.Logger)}
    env, filters, root, before = dict(os.environ), list(warnings.filters), (logging.root.level, len(logging.root.handlers)), loggers()
    import beeweave_langchain
    after = loggers()
    print(json.dumps({
        "heavy": [m for m in HEAVY if m in sys.modules],
        "same": [env == dict(os.environ), filters == list(warnings.filters),
                 root == (logging.root.level, len(logging.root.handlers))],
        "loggers": {n: lv for n, lv in after.items() if before.get(n, logging.NOTSET) != lv},
    }))
""")


def test_all_is_exactly_the_public_surface() -> None:
    assert sorted(beeweave_langchain.__all__) == ["BeeWeaveCallbackHandler", "BeeWeaveMemory", "BeeWeaveMiddleware",
                                                  "BeeWeaveRetriever", "BeeWeaveStore"]
    for name in beeweave_langchain.__all__:
        assert getattr(beeweave_langchain, name).__module__.startswith("beeweave_langchain.")


def test_import_loads_no_model_and_changes_no_setting() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "HYPOTHESIS"))}
    env["PYTHONPATH"] = str(ROOT)
    code = PROBE.replace("HEAVY", repr(HEAVY), 1)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"heavy": [], "same": [True, True, True], "loggers": {}}
