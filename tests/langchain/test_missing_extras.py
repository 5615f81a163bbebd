"""Without the extra installed, importing a face names the pip command that installs it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

# A finder in front of every other that refuses the given top-level packages, as if not installed.
BLOCK = textwrap.dedent("""
    import sys
    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
    sys.meta_path.insert(0, Refuse())
    try:
        import FACE
    except ImportError as exc:
        print(type(exc).__name__, exc, sep=": ")
    else:
        print("imported")
""")


def import_without(face: str, *blocked: str) -> str:
    code = BLOCK.replace("BLOCKED", repr(set(blocked))).replace("FACE", face)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "HYPOTHESIS"))}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize("blocked", ["langchain_core", "langchain_classic", "langgraph", "langchain"])
def test_langchain_face_names_its_extra(blocked: str) -> None:
    said = import_without("beeweave_langchain", blocked)
    assert said.startswith("MissingDependencyError: ") and 'pip install "beeweave-memory[langchain]"' in said, said
    assert blocked in said


def test_llamaindex_face_names_its_extra() -> None:
    said = import_without("beeweave_llamaindex", "llama_index")
    assert said.startswith("MissingDependencyError: ") and 'pip install "beeweave-memory[llamaindex]"' in said, said


def test_with_everything_installed_both_faces_import() -> None:
    assert import_without("beeweave_langchain", "nothing") == "imported"
    assert import_without("beeweave_llamaindex", "nothing") == "imported"
