"""The documentation keeps up with the code.

Every ``beeweave`` command and option and every REST route is documented in docs/ (the
lists come from the parser and the OpenAPI spec, so a new command or route without docs
fails here); the README's Python blocks run as written, offline; the README stays a
user's README and measurements live in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re
import socket
from pathlib import Path

import pytest

from beeweave_core.cli import COMMANDS, build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _docs_text() -> str:
    return "\n".join(p.read_text() for p in sorted(DOCS.glob("*.md")))


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _long_options(parser: argparse.ArgumentParser) -> list[str]:
    return [s for a in parser._actions for s in a.option_strings if s.startswith("--") and s != "--help"]


# -- the CLI ------------------------------------------------------------------------------------------------
def test_every_cli_command_is_documented() -> None:
    cli_doc = (DOCS / "cli.md").read_text()
    subs = _subparsers(build_parser())
    assert list(subs) == list(COMMANDS)
    missing = [name for name in COMMANDS if f"`beeweave {name}" not in cli_doc]
    assert not missing, f"docs/cli.md does not document: {missing} (write `beeweave <name> ...` there)"


def test_every_cli_option_is_documented() -> None:
    cli_doc = (DOCS / "cli.md").read_text()
    parser = build_parser()
    missing = [f"beeweave {opt}" for opt in _long_options(parser) if f"`{opt}" not in cli_doc]
    for name, sub in _subparsers(parser).items():
        missing += [f"beeweave {name} {opt}" for opt in _long_options(sub) if f"`{opt}" not in cli_doc]
    assert not missing, f"docs/cli.md does not mention these options (as `--option`): {missing}"


# -- the REST API -------------------------------------------------------------------------------------------
def _routes() -> list[str]:
    from beeweave_core.server import ServerConfig, create_app

    spec = create_app(ServerConfig(None, {"docs-test-key": "docs"})).openapi()
    return [f"{method.upper()} {path}" for path, ops in spec["paths"].items() for method in ops]


def test_every_rest_route_is_documented() -> None:
    routes = _routes()
    assert "POST /api/v1/search" in routes and "GET /healthz" in routes  # the spec is what we think it is
    docs = _docs_text()
    missing = [r for r in routes if f"`{r}" not in docs]
    assert not missing, f"docs/ does not document these routes (write `METHOD /path` as in the spec): {missing}"


# -- the README ---------------------------------------------------------------------------------------------
def test_the_readme_is_a_users_readme() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 210, "the README is for users; details go to docs/"
    for command in ('pip install -e . && python -m beeweave_core.demo',
                    'pip install torch==2.13.0 -e ".[test]" && python -m pytest'):
        assert command in text
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install torch==2.13.0 -e ".[test]"' in ci and "python -m pytest" in ci  # CI runs the second
    for extra in ("langchain", "llamaindex", "server", "postgres"):
        assert f'pip install "beeweave-memory[{extra}]"' in text, extra


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to '-'."""
    heads = re.findall(r"^#+ (.+)$", path.read_text(), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_every_doc_is_indexed_and_every_link_resolves() -> None:
    links = re.findall(r"\]\(([^)#\s]+)", README.read_text())
    for doc in sorted(DOCS.glob("*.md")):
        assert f"docs/{doc.name}" in links, f"the README's index does not link docs/{doc.name}"
    for source in [README, *sorted(DOCS.glob("*.md"))]:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)", source.read_text()):
            if "://" in target:
                continue
            path = (source.parent / target) if target else source
            assert path.exists(), f"{source.name} links {target}, which does not exist"
            if anchor:
                assert anchor in _anchors(path), f"{source.name} links {target}#{anchor}: no such heading"


_DOTTED = re.compile(r"\b(beeweave_(?:core|langchain|llamaindex)(?:\.[A-Za-z_]\w*)*)")
_FROM_IMPORT = re.compile(r"^from (beeweave_\w+(?:\.\w+)*) import ([\w, ]+)$", flags=re.M)


def _resolve(dotted: str) -> object:
    """``a.b.C`` as a module, or an attribute of the longest importable module prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


@pytest.mark.parametrize("path", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_every_name_the_docs_give_exists(path: Path) -> None:
    text = path.read_text()
    for dotted in sorted(set(_DOTTED.findall(text))):
        try:
            _resolve(dotted.rstrip("."))
        except (ImportError, AttributeError) as exc:
            raise AssertionError(f"{path.name} names {dotted}, which does not exist ({exc})") from None
    for module, names in _FROM_IMPORT.findall(text):
        for name in (n.strip() for n in names.split(",")):
            assert hasattr(importlib.import_module(module), name), f"{path.name}: from {module} import {name}"


def _core_classes() -> set[str]:
    found: set[str] = set()
    for source in (ROOT / "beeweave_core").rglob("*.py"):
        found |= set(re.findall(r"^class ([A-Z]\w*)", source.read_text(), flags=re.M))
    return found


@pytest.mark.parametrize("path", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_every_type_the_docs_name_is_importable_from_beeweave_core(path: Path) -> None:
    """A type named bare (`IngestConfig`) is one ``from beeweave_core import`` away; one that
    is not public API is named with its module (`beeweave_core.scoring.RankFields`)."""
    import beeweave_core

    text = path.read_text()
    dotted = {d.rsplit(".", 1)[-1] for d in _DOTTED.findall(text)}
    classes = _core_classes()
    for span in re.findall(r"`([^`\n]+)`", text):
        for name in re.findall(r"(?<![\w.])([A-Z]\w+)", span):
            if name in classes and name not in dotted:
                assert hasattr(beeweave_core, name), (
                    f"{path.name} names `{name}`: export it from beeweave_core or name its module")


_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


@pytest.mark.parametrize("path", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_measurements_live_in_results_md(path: Path) -> None:
    text = path.read_text()
    for phrase in ("this session", "load average", "previous session"):
        assert phrase not in text.lower(), f"{path.name}: {phrase!r} belongs in benchmarks/RESULTS.md"
    assert not _HASH.findall(text), f"{path.name}: commit hashes {_HASH.findall(text)} belong in benchmarks/RESULTS.md"


def _offline_connect(real):  # type: ignore[no-untyped-def]
    def connect(self, address):  # type: ignore[no-untyped-def]
        host = address[0] if isinstance(address, tuple) else address
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in ("127.0.0.1", "::1", "localhost"):
            raise OSError(f"the README's examples must run offline; one connected to {address!r}")
        return real(self, address)
    return connect


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.parametrize("index", range(len(_python_blocks(README.read_text()))))
def test_the_readmes_python_blocks_run_as_written(index: int, tmp_path: Path, monkeypatch) -> None:
    code = _python_blocks(README.read_text())[index]
    monkeypatch.chdir(tmp_path)  # a block may write memory.db: in a fresh directory
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", _offline_connect(socket.socket.connect))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"README.md python block {index + 1}", "exec"), {"__name__": "__readme__"})
    assert out.getvalue().strip(), "each block shows its result"


def test_the_readme_has_python_blocks() -> None:
    assert len(_python_blocks(README.read_text())) >= 4  # Python, ingestion, LangChain, LlamaIndex
