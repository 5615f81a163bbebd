"""Helpers of the knowledge-network tests: vectors with known cosines, times, and readers
of the stored edges (the hand-moved clock is the lifecycle tests' one)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

import numpy as np

from beeweave_core import BeeWeave, Relationship
from tests.lifecycle.lifecycle_support import START
from tests.support import live_ids

DIM = 64  # enough orthogonal axes for every test's memories


def axis(i: int, dim: int = DIM) -> list[float]:
    """The i-th basis vector: memories on different axes have cosine 0."""
    v = np.zeros(dim, np.float64)
    v[i] = 1.0
    return v.tolist()


def at_cosine(cos: float, other_axis: int, dim: int = DIM) -> list[float]:
    """A unit vector whose cosine with ``axis(0)`` is ``cos`` (the rest lies on ``other_axis``)."""
    v = np.zeros(dim, np.float64)
    v[0] = cos
    v[other_axis] = np.sqrt(1.0 - cos * cos)
    return v.tolist()


def at(t: int) -> datetime:
    """``t`` minutes after START."""
    return START + timedelta(minutes=t)


def all_edges(m: BeeWeave) -> list[Relationship]:
    """Every stored edge (of memories in any status)."""
    return m.backend.edges(sorted(live_ids(m)))


def pairs(edges: Iterable[Relationship], kind: str | None = None) -> set[tuple[str, str]]:
    """(source, target) of the edges, of one type if ``kind`` is given."""
    return {(e.source_id, e.target_id) for e in edges if kind is None or e.type.value == kind}


def typed(edges: Iterable[Relationship]) -> set[tuple[str, str, str, float]]:
    return {(e.source_id, e.target_id, e.type.value, round(float(e.weight), 6)) for e in edges}
