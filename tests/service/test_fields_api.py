"""Declared metadata fields over REST and the client: an admin key declares, every key lists
them, and searches filter on them as the library does; undeclared keys get the engine's error."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from beeweave_core import InvalidInputError, UnknownFilterError
from beeweave_core.client import AuthenticationError, BeeWeaveClient
from beeweave_core.server import ServerConfig
from tests.service.service_support import EMBEDDER, LiveServer, start_server

ADMIN, SCOPED = "fields-admin-key", "fields-scoped-key"
KEYS = {ADMIN: "acme", SCOPED: {"tenant": "acme", "users": ["ann"]}}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    srv = start_server(ServerConfig(tmp_path_factory.mktemp("fields"), KEYS, embedder=EMBEDDER))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def admin(live: LiveServer) -> Iterator[BeeWeaveClient]:
    with live.client(ADMIN) as c:
        yield c


def test_declare_list_and_filter(live: LiveServer, admin: BeeWeaveClient) -> None:
    assert admin.declared_fields() == {}
    assert admin.declare_fields({"project_id": "str", "priority": "int"}) == {"project_id": "str", "priority": "int"}
    admin.add("backups run nightly at two", user_id="ann", metadata={"project_id": "p1", "priority": 2})
    admin.add("backups run weekly on sunday", user_id="ann", metadata={"project_id": "p2", "priority": 1})
    admin.add("backups of the wiki run hourly", user_id="ann", metadata={"project_id": "p1", "priority": True})
    hits = admin.search("backups run", user_id="ann", k=5, filters={"project_id": "p1"})
    assert {h.chunk.content for h in hits} == {"backups run nightly at two", "backups of the wiki run hourly"}
    hits = admin.search("backups run", user_id="ann", k=5, filters={"project_id": ["p1", "p2"], "priority": 2})
    assert [h.chunk.content for h in hits] == ["backups run nightly at two"]  # True is not the number 1 or 2
    with live.client(SCOPED) as scoped:  # any key lists them and filters on them
        assert scoped.declared_fields() == {"project_id": "str", "priority": "int"}
        assert len(scoped.search("backups", user_id="ann", k=5, filters={"priority": 1})) == 1


def test_only_an_admin_key_declares(live: LiveServer) -> None:
    with live.client(SCOPED) as scoped:
        with pytest.raises(AuthenticationError):
            scoped.declare_fields({"team": "str"})
        assert "team" not in scoped.declared_fields()


def test_undeclared_and_bad_fields_are_refused(live: LiveServer, admin: BeeWeaveClient) -> None:
    with pytest.raises(UnknownFilterError):
        admin.search("backups", user_id="ann", filters={"colour": "red"})
    with live.http(ADMIN) as http:
        raw = http.post("/api/v1/search", json={"query": "backups", "user_id": "ann", "filters": {"colour": "red"}})
    assert raw.status_code == 400 and "colour" in raw.text
    with live.http(ADMIN) as http:
        raw = http.post("/api/v1/search", json={"query": "backups", "user_id": "ann",
                                                "filters": {"project_id": {"a": 1}}})
    assert raw.status_code == 422  # a value must be a string, number or boolean (or a list of them)
    for bad in ({"bad name": "str"}, {"user_id": "str"}, {"size": "decimal"}):
        with pytest.raises(InvalidInputError):
            admin.declare_fields(bad)
    with pytest.raises(InvalidInputError):
        admin.declare_fields({"priority": "str"})  # declared as int already
    assert admin.declared_fields() == {"project_id": "str", "priority": "int"}
