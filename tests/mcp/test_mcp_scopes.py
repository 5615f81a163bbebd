"""Scopes through MCP: a user's search_memory finds shared knowledge (the tenant's, a granted
project's) and never another user's; over HTTP a key reads and writes only the shared scopes
its settings name (the REST API's rules, server/auth.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("mcp")

from mcp import Client  # noqa: E402

from beeweave_core.mcp.server import build_server  # noqa: E402
from tests.mcp.test_mcp_server import result, serve_http  # noqa: E402
from tests.mcp.test_mcp_users import _calls, error  # noqa: E402
from tests.scopes_faces import ALICE_FACT, BOB_FACT, PROJECT_FACT, TENANT_FACT, scoped_memory  # noqa: E402

ADMIN, ALICE, BOB = "admin-key-0123456", "alice-key-0123456", "bob-key-01234567"


def contents(res: Any) -> set[str]:
    return {m["content"] for m in result(res)["memories"]}


@pytest.mark.asyncio
async def test_a_users_search_finds_shared_knowledge_never_another_users() -> None:
    with scoped_memory() as m:
        async with Client(build_server(m)) as client:
            async def search(user: str, **more: Any) -> set[str]:
                args = {"user_id": user, "query": "staging", "k": 10, "abstain_below": 0, **more}
                return contents(await client.call_tool("search_memory", args))

            assert await search("bob") == {TENANT_FACT, BOB_FACT}
            assert await search("alice") == {TENANT_FACT, PROJECT_FACT, ALICE_FACT}
            assert await search("bob", scopes=["project:atlas"]) == {PROJECT_FACT}

            # what bob's search returned he may read by id and rate; a scope he does not read is absent
            ids = {c.raw_content: c.id for c in m.get_many([h.id for h in m.search("staging", k=10, abstain_below=0)])}
            got = await client.call_tool("get_memory", {"user_id": "bob", "memory_id": ids[TENANT_FACT]})
            assert result(got)["content"] == TENANT_FACT
            rated = await client.call_tool("memory_feedback", {
                "user_id": "bob", "memory_ids": [ids[TENANT_FACT]], "signal": "used"})
            assert result(rated)["rated"] == [ids[TENANT_FACT]]
            assert "no memory" in error(await client.call_tool("get_memory", {"user_id": "bob",
                                                                              "memory_id": ids[PROJECT_FACT]}))


@pytest.mark.asyncio
async def test_http_keys_read_and_write_the_shared_scopes_they_name(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({
        ADMIN: "team",
        ALICE: {"tenant": "team", "users": ["alice"], "write_scopes": ["project:atlas"]},
        BOB: {"tenant": "team", "users": ["bob"]}}))
    with serve_http(tmp_path / "h.db", "--api-keys", str(keys)) as url:
        [seed] = await _calls(url, ADMIN, [("save_memory", {"user_id": "scope:tenant",
                                                            "content": "Staging refunds take five days."})])
        assert result(seed)["id"]
        wrote, private = await _calls(url, ALICE, [
            ("save_memory", {"user_id": "scope:project:atlas/module:parser",
                             "content": "The staging parser keeps its tokens in tokens.py."}),
            ("save_memory", {"content": "Alice's staging locker code is 4411."})])
        assert result(wrote)["id"] and result(private)["id"]
        refused, mine, peek = await _calls(url, BOB, [
            ("save_memory", {"user_id": "scope:project:atlas", "content": "Bob's view of the staging parser."}),
            ("search_memory", {"query": "staging", "k": 10, "abstain_below": 0}),
            ("search_memory", {"query": "staging", "k": 10, "abstain_below": 0,
                               "scopes": ["project:atlas/module:parser"]})])
        assert "may not write" in error(refused)
        assert contents(mine) == {"Staging refunds take five days."}  # the tenant's; never alice's locker code
        assert "no data of scope" in error(peek)
        [hers] = await _calls(url, ALICE, [("search_memory", {"query": "staging", "k": 10, "abstain_below": 0,
                                                              "scopes": ["user", "project:atlas/module:parser"]})])
        assert contents(hers) == {"The staging parser keeps its tokens in tokens.py.",
                                  "Alice's staging locker code is 4411."}
