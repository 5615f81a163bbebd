"""Helpers of the lifecycle tests: a controllable clock and unit vectors."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np

START = datetime(2025, 3, 1, 12, tzinfo=timezone.utc)
DIM = 256  # wide enough that unrelated sentences are far apart


class Clock:
    """``now`` for a store; tests move it forward by hand."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


def unit(*values: float, dim: int = DIM) -> list[float]:
    """A unit vector whose first coordinates are ``values`` (the rest 0)."""
    v = np.zeros(dim, np.float32)
    v[: len(values)] = values
    return (v / np.linalg.norm(v)).tolist()
