"""The LlamaIndex face's public surface is a contract, and importing it loads no model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import beeweave_llamaindex

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MODEL_MODULES = ["torch", "sentence_transformers", "transformers", "faiss"]


def test_all_is_exactly_the_public_surface() -> None:
    assert beeweave_llamaindex.__all__ == ["BeeWeaveRetriever", "BeeWeaveNodePostprocessor", "BeeWeaveMemoryBlock",
                                           "BeeWeaveMemory"]
    for name in beeweave_llamaindex.__all__:
        assert getattr(beeweave_llamaindex, name).__module__.startswith("beeweave_llamaindex.")


def test_import_loads_no_model_and_leaves_the_environment_alone() -> None:
    probe = (
        "import json, os, sys; before = dict(os.environ); import beeweave_llamaindex; "
        f"print(json.dumps({{'loaded': [m for m in {MODEL_MODULES!r} if m in sys.modules], "
        "'env_same': before == dict(os.environ)}))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "HYPOTHESIS"))}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"loaded": [], "env_same": True}
