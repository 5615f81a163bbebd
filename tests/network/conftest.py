"""Fixtures of the knowledge-network tests: stores on a controllable clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from beeweave_core import BeeWeave, HashingEmbedder, NetworkConfig, ScoringConfig
from beeweave_core.lifecycle import LifecycleConfig
from tests.lifecycle.lifecycle_support import Clock
from tests.network.net_support import DIM


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make(clock: Clock) -> Iterator[Callable[..., BeeWeave]]:
    """``make(path=None, *, network=None, scoring=None)``: a store on the test clock with the
    hashing embedder; accesses are written at once (no timer thread); closed at the end."""
    opened: list[BeeWeave] = []

    def _make(path: str | Path | None = None, *, network: NetworkConfig | None = None,
              scoring: ScoringConfig | None = None) -> BeeWeave:
        m = BeeWeave(path, embedder=HashingEmbedder(DIM), clock=clock, scoring=scoring, network=network,
                     lifecycle=LifecycleConfig(access_flush_interval=0.0))
        opened.append(m)
        return m

    yield _make
    for m in opened:
        m.close()  # closing twice is allowed


@pytest.fixture
def mem(make: Callable[..., BeeWeave]) -> BeeWeave:
    return make()
