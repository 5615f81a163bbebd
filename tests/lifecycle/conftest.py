"""Fixtures of the lifecycle tests: a controllable clock and stores that use it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.lifecycle import LifecycleConfig
from tests.lifecycle.lifecycle_support import DIM, Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make(clock: Clock) -> Iterator[Callable[..., BeeWeave]]:
    """``make(path_or_url=None, *, tenant=None, scoring=None, **lifecycle_options)``: a store on
    the test clock (SQLite by path, PostgreSQL by URL), closed at the end."""
    opened: list[BeeWeave] = []

    def _make(where: str | Path | None = None, *, tenant: str | None = None, scoring: Any = None,
              **options: Any) -> BeeWeave:
        options.setdefault("access_flush_interval", 0.0)
        kw: dict[str, Any] = dict(embedder=HashingEmbedder(DIM), clock=clock, scoring=scoring,
                                  lifecycle=LifecycleConfig(**options))
        if tenant is not None:
            m = BeeWeave.from_url(str(where), tenant=tenant, **kw)
        else:
            m = BeeWeave(where, **kw)
        opened.append(m)
        return m

    yield _make
    for m in opened:
        m.close()


@pytest.fixture
def mem(make: Callable[..., BeeWeave]) -> BeeWeave:
    return make()
