"""Fixtures for the ingestion tests: a controllable clock and stores that close themselves."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.ingest import IngestConfig
from tests.ingest.ingest_support import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_memory(clock: Clock) -> Iterator[Callable[..., BeeWeave]]:
    """``make_memory(path=None, **ingest_config)``: a BeeWeave with the hashing embedder and the
    test clock; every one is closed at the end of the test."""
    opened: list[BeeWeave] = []

    def make(path: Any = None, *, embedder: Any = None, **config: Any) -> BeeWeave:
        m = BeeWeave(path, embedder=embedder or HashingEmbedder(32), clock=clock, ingest=IngestConfig(**config))
        opened.append(m)
        return m

    yield make
    for m in opened:
        m.close()
