"""``Last-Event-ID`` is parsed strictly (issue 47, item 11): the server sends ids of ASCII
digits, so any other value is refused with a 400 before the stream starts. ``²`` passed
``str.isdigit()`` and then failed ``int()``: a 500."""

from __future__ import annotations

import pytest

from beeweave_core.server import ServerConfig
from tests.service.service_support import EMBEDDER, start_server

ADMIN = "admin-key-of-acme"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_server(ServerConfig(tmp_path_factory.mktemp("sse"), {ADMIN: "acme"}, embedder=EMBEDDER))
    yield s
    s.stop()


# Headers travel as bytes; the server reads them as Latin-1, where b"\xb2" is "²".
@pytest.mark.parametrize("value", ["²".encode("latin-1"), "¹²³".encode("latin-1"), b"abc", b"-1", b"1.5",
                                   b"0x10", b"9" * 20, b"1 2"])
def test_a_last_event_id_the_server_never_sent_is_a_400(server, value):
    with server.http(ADMIN) as h:
        r = h.get("/api/v1/events", params={"max_seconds": 0.2}, headers={"Last-Event-ID": value})
    assert r.status_code == 400, (value, r.status_code, r.text)
    assert "Last-Event-ID" in r.json()["detail"]


@pytest.mark.parametrize("value", [b"0", b"7", b"", b"9223372036854775807"])
def test_an_event_id_or_an_empty_header_opens_the_stream(server, value):
    with server.http(ADMIN) as h:
        r = h.get("/api/v1/events", params={"max_seconds": 0.2}, headers={"Last-Event-ID": value})
    assert r.status_code == 200, (value, r.status_code, r.text)
