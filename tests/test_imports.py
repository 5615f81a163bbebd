"""The public surface is a contract, and importing BeeWeave has no side effects:
no heavy dependency is imported, and no process-wide setting changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import beeweave_core

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent

EXPECTED_ALL = [
    "BeeWeave",
    "SearchConfig",
    "IndexConfig",
    "SessionContext",
    "ScoringConfig",
    "ScopeConfig",
    "WriteRule",
    "scope_owner",
    "NetworkConfig",
    "ExpandOptions",
    "Candidate",
    "Reranker",
    "CrossEncoderReranker",
    "EventBus",
    "LifecycleConfig",
    "TierConfig",
    "MergeOnInsert",
    "SessionConfig",
    "ConversationContext",
    "FeedbackSignal",
    "ForgetAction",
    "ReviewDecision",
    "ExpiryRule",
    "MaintenanceReport",
    "MaintenanceSchedule",
    "TimeRange",
    "Lineage",
    "InvalidationReport",
    "Watch",
    "MemoryVersion",
    "ReviewItem",
    "EventType",
    "MemoryEvent",
    "KnowledgeChunk",
    "ProcessedContent",
    "Relationship",
    "SearchHit",
    "HitSource",
    "ContentType",
    "ChunkStatus",
    "MemoryTier",
    "Intent",
    "RelationType",
    "FusionMode",
    "Filter",
    "Tokenizer",
    "TokenizerConfig",
    "Embedder",
    "SentenceTransformerEmbedder",
    "LangChainEmbedder",
    "LlamaIndexEmbedder",
    "HashingEmbedder",
    "DEFAULT_MODEL_NAME",
    "DEFAULT_TOP_K",
    "MINILM_MODEL_NAME",
    "E5Embedder",
    "BeeWeaveError",
    "InvalidInputError",
    "EmptyContentError",
    "DimensionMismatchError",
    "InvalidVectorError",
    "UnknownFilterError",
    "DuplicateIdError",
    "NotFoundError",
    "EmbedderMismatchError",
    "EmbedderChangedError",
    "TokenizerMismatchError",
    "SchemaVersionError",
    "StoreClosedError",
    "MissingDependencyError",
    "StoreUnavailableError",
    "ModelLoadError",
    "PermissionDeniedError",
    "KnowledgeEvent",
    "ToolCall",
    "DeadLetter",
    "IngestConfig",
    "QueueFullPolicy",
    "PatternConfig",
    "HotPattern",
    "AdmissionRules",
    "SourceRule",
    "Extractor",
    "OfflineExtractor",
    "LLMExtractor",
    "Redactor",
    "PiiPattern",
    "PiiKind",
    "QueueFullError",
    "InvalidEventError",
    "ExtractionError",
    "BeeWeaveClient",
    "AuthenticationError",
    "MemoryAPI",
    "__version__",
]

HEAVY = ["torch", "sentence_transformers", "transformers", "faiss", "jieba", "Stemmer", "tqdm"]


def test_all_is_exactly_the_public_surface() -> None:
    assert sorted(beeweave_core.__all__) == sorted(EXPECTED_ALL)
    assert len(beeweave_core.__all__) == len(set(beeweave_core.__all__))
    for name in beeweave_core.__all__:
        assert hasattr(beeweave_core, name), name


def test_every_error_is_exported_and_a_beeweave_error() -> None:
    from beeweave_core import errors as errors_module

    assert set(errors_module.__all__) <= set(beeweave_core.__all__), "an error class is not exported"
    for name in errors_module.__all__:
        assert issubclass(getattr(errors_module, name), beeweave_core.BeeWeaveError), name


# Run in a fresh interpreter: this process has long since imported everything.
_PROBE = textwrap.dedent(
    """
    import json, logging, os, sys, warnings
    import numpy  # a hard dependency that installs warning filters of its own

    def state():
        loggers = {n: l.level for n, l in logging.root.manager.loggerDict.items() if isinstance(l, logging.Logger)}
        return {
            "env": dict(os.environ),
            "warnings": [repr(f) for f in warnings.filters],
            "root": [logging.root.level, len(logging.root.handlers)],
            "loggers": loggers,
            "disable": logging.root.manager.disable,
            "recursion": sys.getrecursionlimit(),
        }

    before = state()
    import __MODULE__
    after = state()
    new_loggers = {n: lv for n, lv in after["loggers"].items() if n not in before["loggers"]}
    changed_loggers = {n: lv for n, lv in before["loggers"].items() if after["loggers"].get(n) != lv}
    print(json.dumps({
        "heavy": [m for m in __HEAVY__ if m in sys.modules],
        "env": before["env"] == after["env"],
        "warnings": before["warnings"] == after["warnings"],
        "root": before["root"] == after["root"],
        "disable": before["disable"] == after["disable"],
        "recursion": before["recursion"] == after["recursion"],
        "new_loggers_with_levels": {n: lv for n, lv in new_loggers.items() if lv != logging.NOTSET},
        "changed_loggers": changed_loggers,
    }))
    """
)


@pytest.mark.parametrize("module", ["beeweave_core", "beeweave_core.store.sqlite", "beeweave_core.engine"])
def test_import_has_no_side_effects(module: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "HYPOTHESIS"))}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", _PROBE.replace("__MODULE__", module).replace("__HEAVY__", repr(HEAVY))], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["heavy"] == [], f"importing {module} imported {report['heavy']}"
    assert report["env"], "os.environ changed"
    assert report["warnings"], "warnings filters changed"
    assert report["root"], "root logger level or handlers changed"
    assert report["disable"] and report["recursion"]
    assert report["new_loggers_with_levels"] == {}
    assert report["changed_loggers"] == {}
    assert out.stderr == "", out.stderr


def test_version_matches_the_package_metadata() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{beeweave_core.__version__}"' in text


# A missing extra is named before anything happens. The probes run in a fresh interpreter
# with the extra's modules blocked (``sys.modules[name] = None`` makes importing them fail).
_BLOCKED = textwrap.dedent(
    """
    import sys
    for name in __BLOCK__:
        sys.modules[name] = None
    from beeweave_core.cli import main
    sys.exit(main(__ARGV__))
    """
)


@pytest.mark.parametrize(("block", "argv", "extra"), [
    (["fastapi"], ["--store", "stores", "serve", "--port", "1"], "server"),
    (["uvicorn"], ["--store", "stores", "serve", "--port", "1"], "server"),
    (["psycopg"], ["--store", "postgresql://nobody@127.0.0.1:1/none", "serve", "--port", "1"], "postgres"),
    (["psycopg"], ["--store", "postgresql://nobody@127.0.0.1:1/none", "search", "anything"], "postgres"),
])
def test_a_missing_extra_is_named_before_anything_is_printed(tmp_path, block, argv, extra) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "HYPOTHESIS"))}
    env.update(PYTHONPATH=str(ROOT), BEEWEAVE_API_KEYS="key-0001:acme")
    code = _BLOCKED.replace("__BLOCK__", repr(block)).replace("__ARGV__", repr(argv))
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("beeweave: error:"), out.stderr
    assert f'pip install "beeweave-memory[{extra}]"' in lines[0]
    assert "serving" not in out.stderr
    assert not (tmp_path / "stores").exists()  # nothing was opened or created


def test_the_onnx_backend_names_its_packages_when_built(monkeypatch) -> None:
    import importlib.util

    from beeweave_core import MissingDependencyError, SentenceTransformerEmbedder

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(MissingDependencyError, match="pip install onnxruntime onnx"):
        SentenceTransformerEmbedder(backend="onnx")
