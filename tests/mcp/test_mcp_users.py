"""MCP (issue 46, item 5): the server reports BeeWeave's version; a default user
(``beeweave mcp --user-id`` / ``BEEWEAVE_USER_ID``) for calls that name none; tools to list a
user's memories and to forget a user; over HTTP, the REST API's scoped-key rules."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

from beeweave_core import BeeWeave, __version__  # noqa: E402
from beeweave_core.mcp.server import build_server  # noqa: E402
from tests.mcp.test_mcp_server import result, serve_http  # noqa: E402

EMBEDDER = "beeweave:hashing-64"
ADMIN, ALICE, PAIR = "admin-key-0123456", "alice-key-0123456", "pair-key-01234567"


def error(res: Any) -> str:
    assert res.is_error, res.content
    return res.content[0].text


@pytest.mark.asyncio
async def test_version_default_user_list_and_forget(tmp_path: Path) -> None:
    with BeeWeave(tmp_path / "m.db", embedder=EMBEDDER) as memory:
        async with Client(build_server(memory, default_user_id="alice")) as client:
            assert client.server_info is not None and client.server_info.version == __version__
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert {"list_memories", "forget_user"} <= set(tools)
            assert "user_id" not in tools["save_memory"].input_schema.get("required", [])

            ids = [result(await client.call_tool("save_memory", {"content": f"Alice's note {i} about the "
                                                                 "offsite hotel."}))["id"] for i in range(3)]
            bob = result(await client.call_tool("save_memory", {"user_id": "bob", "content": "Bob's note."}))["id"]
            found = result(await client.call_tool("search_memory", {"query": "offsite hotel", "k": 5}))
            assert {m["id"] for m in found["memories"]} == set(ids)  # the default user's, not bob's

            first = result(await client.call_tool("list_memories", {"limit": 2}))
            rest = result(await client.call_tool("list_memories", {"limit": 2, "cursor": first["next_cursor"]}))
            assert [m["id"] for m in first["memories"] + rest["memories"]] == ids and rest["next_cursor"] is None
            assert [m["id"] for m in result(await client.call_tool("list_memories", {"user_id": "bob"}))["memories"]] \
                == [bob]

            assert "confirm" in error(await client.call_tool("forget_user", {"confirm": False}))
            assert result(await client.call_tool("forget_user", {"confirm": True})) == {"user_id": "alice",
                                                                                          "deleted": 3}
            assert result(await client.call_tool("list_memories", {}))["memories"] == []
            assert result(await client.call_tool("get_memory", {"user_id": "bob", "memory_id": bob}))["id"] == bob


@pytest.mark.asyncio
async def test_without_a_default_user_calls_name_one(tmp_path: Path) -> None:
    with BeeWeave(tmp_path / "m.db", embedder=EMBEDDER) as memory:
        async with Client(build_server(memory)) as client:
            assert "BEEWEAVE_USER_ID" in error(await client.call_tool("list_memories", {}))


def test_the_default_user_comes_from_the_flag_or_the_environment(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import beeweave_core.mcp.server as mcp_server
    from beeweave_core.cli import build_parser
    from beeweave_core.mcp.cli import run

    seen: list[Any] = []
    monkeypatch.setattr(mcp_server, "build_server", lambda memory, **kw: SimpleNamespace(
        run=lambda transport: seen.append(kw.get("default_user_id"))))
    store = ["--store", str(tmp_path / "m.db"), "--embedder", EMBEDDER]
    monkeypatch.setenv("BEEWEAVE_USER_ID", "carol")
    assert run(build_parser().parse_args([*store, "mcp"])) == 0
    assert run(build_parser().parse_args([*store, "mcp", "--user-id", "dave"])) == 0  # the flag wins
    monkeypatch.delenv("BEEWEAVE_USER_ID")
    assert run(build_parser().parse_args([*store, "mcp"])) == 0
    assert seen == ["carol", "dave", None]


@pytest.fixture
def scoped_server(tmp_path: Path) -> Iterator[str]:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({ADMIN: "team", ALICE: {"tenant": "team", "users": ["alice"]},
                                PAIR: {"tenant": "team", "users": ["alice", "bob"], "admin": False}}))
    with serve_http(tmp_path / "h.db", "--api-keys", str(keys)) as url:
        yield url


async def _calls(url: str, key: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    out = []
    async with create_mcp_http_client(headers={"X-API-Key": key}) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        for name, args in calls:
            out.append(await client.call_tool(name, args))
    return out


@pytest.mark.asyncio
async def test_http_keys_scoped_to_users_follow_the_rest_rules(scoped_server: str) -> None:
    url = scoped_server
    [bob] = await _calls(url, ADMIN, [("save_memory", {"user_id": "bob", "content": "Bob's locker code is 4411."})])
    bob_id = result(bob)["id"]
    # A one-user key: its user is the default; another user's memories are absent or refused.
    saved, others = await _calls(url, ALICE, [("save_memory", {"content": "Alice's desk is by the window."}),
                                              ("save_memory", {"user_id": "bob", "content": "not mine"})])
    assert result(saved)["id"] and "may not write memories of user 'bob'" in error(others)
    listed, peek, get, search, forget = await _calls(url, ALICE, [
        ("list_memories", {}), ("list_memories", {"user_id": "bob"}),
        ("get_memory", {"user_id": "bob", "memory_id": bob_id}),
        ("search_memory", {"user_id": "bob", "query": "locker code"}), ("forget_user", {"confirm": True})])
    assert [m["user_id"] for m in result(listed)["memories"]] == ["alice"]
    for res in (peek, get, search):
        assert "no data of user 'bob'" in error(res)
    assert "admin API key" in error(forget)  # a key scoped to users is no admin unless it says so
    [forgotten] = await _calls(url, ADMIN, [("forget_user", {"user_id": "alice", "confirm": True})])
    assert result(forgotten) == {"user_id": "alice", "deleted": 1}
    # A two-user key without admin: names its user, may not forget.
    unnamed, forget_bob, delete_bob = await _calls(url, PAIR, [
        ("list_memories", {}), ("forget_user", {"user_id": "bob", "confirm": True}),
        ("delete_memory", {"user_id": "bob", "memory_id": bob_id})])
    assert "covers several users" in error(unnamed)
    assert "admin API key" in error(forget_bob)
    assert result(delete_bob)["deleted"] is True


OTHER = "other-tenant-key-01"


@pytest.mark.asyncio
async def test_http_serves_one_tenant_and_refuses_another_tenants_key(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """With the REST keys file, a key of another tenant reads nothing here: the server serves
    the tenant named by --tenant, and refuses the others' keys as unknown (issue 47, item 6)."""
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({ADMIN: "team", OTHER: {"tenant": "rival", "users": ["alice"]}}))
    monkeypatch.setenv("BEEWEAVE_TENANT", "team")  # the global --tenant, as an operator sets it
    with serve_http(tmp_path / "stores", "--api-keys", str(keys)) as url:
        await _calls(url, ADMIN, [("save_memory", {"user_id": "alice", "content": "Alice's locker code is 9000."})])
        async with create_mcp_http_client(headers={"X-API-Key": OTHER}) as http:
            response = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert response.status_code == 403  # as an unknown key: this server is not its tenant's


def test_keys_of_several_tenants_need_a_tenant(tmp_path: Path) -> None:
    from beeweave_core import InvalidInputError
    from beeweave_core.cli import build_parser
    from beeweave_core.mcp.cli import run

    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({ADMIN: "team", OTHER: "rival"}))
    args = build_parser().parse_args(["--store", str(tmp_path / "h.db"), "--embedder", EMBEDDER, "mcp",
                                      "--transport", "http", "--api-keys", str(keys)])
    with pytest.raises(InvalidInputError, match="pass --tenant"):
        run(args)
    assert not (tmp_path / "h.db").exists()  # refused before the store was opened
