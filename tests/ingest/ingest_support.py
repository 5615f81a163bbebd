"""Helpers for the ingestion tests."""

from __future__ import annotations

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
