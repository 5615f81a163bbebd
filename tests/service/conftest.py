"""Fixtures of the service tests: a live server per module and a client per tenant."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from beeweave_core.client import BeeWeaveClient
from beeweave_core.server import ServerConfig
from tests.service.service_support import ACME_KEY, BETA_KEY, EMBEDDER, KEYS, LiveServer, start_server


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("tenants")
    srv = start_server(ServerConfig(root, KEYS, embedder=EMBEDDER, max_body_bytes=64 * 1024))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def acme(live: LiveServer) -> Iterator[BeeWeaveClient]:
    with live.client(ACME_KEY) as c:
        yield c


@pytest.fixture(scope="module")
def beta(live: LiveServer) -> Iterator[BeeWeaveClient]:
    with live.client(BETA_KEY) as c:
        yield c

