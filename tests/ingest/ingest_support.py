"""Helpers for the ingestion tests."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from beeweave_core import BeeWeave
from beeweave_core.filters import build_filter


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, start: datetime = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def everything(m: BeeWeave, **filters: Any) -> list:
    """Every stored memory, any status, oldest first."""
    return list(m.backend.scan(build_filter({"status": ["active", "pending", "archived", "merged", "expired"],
                                             **filters}), order="timestamp"))


class SlowModel:
    """A fake extraction model (a function from prompt to text, for ``LLMExtractor``): answers
    after ``latency`` seconds and records how many calls overlapped (``peak``). Also used by
    benchmarks/llm_extraction.py."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.running = self.peak = self.calls = 0
        self._lock = threading.Lock()

    def __call__(self, prompt: str) -> str:
        with self._lock:
            self.running += 1
            self.calls += 1
            self.peak = max(self.peak, self.running)
        time.sleep(self.latency)
        with self._lock:
            self.running -= 1
        return json.dumps({"summary": "The user asked and the agent answered.", "tags": ["question", "answer", "agent"],
                           "intent": "information_query", "facts": []})
