"""Shared set-up for the LangChain adapter tests."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest


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


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
if str(EXAMPLES) not in sys.path:  # the examples' scripted chat model serves the tests too
    sys.path.insert(0, str(EXAMPLES))

