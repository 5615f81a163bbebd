"""The distribution is ``beeweave-memory`` (``beeweave`` on PyPI is another project, issue 46 item 1):
pyproject, the installed metadata, ``beeweave --version`` and every install hint agree on it."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import beeweave_core

ROOT = Path(__file__).resolve().parent.parent
DIST = "beeweave-memory"
# `pip install beeweave`, `"beeweave[server]"`: the other project's name, with or without an extra.
_FOREIGN = re.compile(r"pip install \"?beeweave(?:\[|\b(?![-_]))")


def test_pyproject_names_the_distribution_and_its_extras_refer_to_it() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^name = "beeweave-memory"$', text, flags=re.M)
    assert re.findall(r'"(beeweave[\w-]*)\[', text) == [DIST, DIST]  # the test and all extras


def test_the_installed_metadata_is_the_new_name() -> None:
    assert importlib.metadata.version(DIST) == beeweave_core.__version__
    scripts = {e.name: e.value for e in importlib.metadata.entry_points(group="console_scripts")
               if e.dist is not None and e.dist.name == DIST}
    assert scripts == {"beeweave": "beeweave_core.cli:main"}


def test_beeweave_version_prints_the_version() -> None:
    out = subprocess.run([sys.executable, "-m", "beeweave_core.cli", "--version"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"beeweave {beeweave_core.__version__} ({DIST})", out


def test_no_hint_or_doc_names_the_other_projects_distribution() -> None:
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for package in ("beeweave_core", "beeweave_langchain", "beeweave_llamaindex"):
        paths += sorted((ROOT / package).rglob("*.py"))
    found = [f"{p.relative_to(ROOT)}:{n}" for p in paths for n, line in enumerate(p.read_text().splitlines(), 1)
             if _FOREIGN.search(line)]
    assert not found, found
    assert _FOREIGN.search('pip install "beeweave[server]"') and _FOREIGN.search("pip install beeweave")
    assert not _FOREIGN.search('pip install "beeweave-memory[server]"')


def test_the_wheel_ships_py_typed_for_each_package(tmp_path: Path) -> None:
    """The packages claim to be typed (PEP 561): a wheel built from the tree holds each ``py.typed``.
    Built from a copy, so that setuptools' build/ and egg-info stay out of the working tree."""
    packages = ("beeweave_core", "beeweave_langchain", "beeweave_llamaindex")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for package in packages:
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                          "-w", str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        typed = sorted(n for n in zf.namelist() if n.endswith("/py.typed"))
    assert typed == [f"{p}/py.typed" for p in packages]
