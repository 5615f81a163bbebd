"""The LangChain face's public surface is a contract; importing it loads no model."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import beeweave_langchain
from test_imports import _PROBE, HEAVY, ROOT


def test_all_is_exactly_the_public_surface() -> None:
    assert sorted(beeweave_langchain.__all__) == ["BeeWeaveCallbackHandler", "BeeWeaveMemory", "BeeWeaveRetriever"]
    for name in beeweave_langchain.__all__:
        assert getattr(beeweave_langchain, name).__module__.startswith("beeweave_langchain.")


def test_import_loads_no_model_and_changes_no_setting() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "HYPOTHESIS"))}
    env["PYTHONPATH"] = str(ROOT)
    probe = _PROBE.replace("__MODULE__", "beeweave_langchain").replace("__HEAVY__", repr(HEAVY))
    # LangChain and its HTTP stack install warning filters of their own when imported.
    probe = probe.replace("before = state()", "import langchain_core.retrievers, langchain_classic.base_memory\n"
                                                "before = state()")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["heavy"] == [], f"importing beeweave_langchain imported {report['heavy']}"
    assert report["env"] and report["warnings"] and report["root"] and report["disable"] and report["recursion"]
    assert report["new_loggers_with_levels"] == {} and report["changed_loggers"] == {}
