"""Fixtures of the lifecycle tests: a controllable clock and stores that use it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from beeweave_core import BeeWeave, HashingEmbedder
from beeweave_core.lifecycle import LifecycleConfig
from tests.lifecycle.lifecycle_support import DIM, Clock
from tests.postgres.pg_support import new_tenant, pg_url  # noqa: F401  (pg_url is a fixture)


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


@pytest.fixture(params=["sqlite", "postgres"])
def reopen(request: pytest.FixtureRequest, make: Callable[..., BeeWeave], tmp_path: Path) -> Callable[..., BeeWeave]:
    """Opens the same store (a SQLite file, or a PostgreSQL tenant) each time it is called:
    after a close (a restart), or while another is open (a second process or host)."""
    if request.param == "sqlite":
        path = tmp_path / "memory.db"
        return lambda **options: make(path, **options)
    url, tenant = request.getfixturevalue("pg_url"), new_tenant("lifecycle")
    return lambda **options: make(url, tenant=tenant, **options)
