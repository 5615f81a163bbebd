"""Shared set-up for the LangChain adapter tests: offline models, an in-memory store,
the examples' scripted chat model on the path, and async standard tests."""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach the network for a model

ROOT = Path(__file__).resolve().parents[2]
for path in (ROOT, ROOT / "examples"):  # the package from the checkout; the examples' scripted model
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from beeweave_core import BeeWeave, HashingEmbedder  # noqa: E402
from tests.support import frozen_clock  # noqa: E402


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder(32)


@pytest.fixture
def memory(embedder: HashingEmbedder) -> Iterator[BeeWeave]:
    """An in-memory store with the instant hashing embedder; the clock stands still, so two
    calls of one search score alike (weights decay continuously)."""
    m = BeeWeave(embedder=embedder, clock=frozen_clock)
    yield m
    m.close()


# The project runs pytest-asyncio in strict mode, and LangChain's standard tests define
# unmarked async tests (which may not be overridden). This wrapper runs inside
# pytest-asyncio's and marks every coroutine test of this folder before it looks.
@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_pycollect_makeitem(collector: Any, name: str, obj: object) -> Generator[None, Any, None]:
    outcome = yield
    result = outcome.get_result()
    for item in result if isinstance(result, list) else [result]:
        if isinstance(item, pytest.Function) and inspect.iscoroutinefunction(getattr(item, "obj", None)):
            item.add_marker(pytest.mark.asyncio)
