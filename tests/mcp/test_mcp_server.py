"""The MCP server, driven by the SDK's own client: over stdio (a ``beeweave mcp`` subprocess)
and over streamable HTTP on 127.0.0.1 (API keys required)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KEY = "test-key-0123456789"
TOOLS = {"save_memory", "search_memory", "get_memory", "list_memories", "update_memory", "delete_memory",
         "forget_user", "memory_feedback", "remember_turn", "session_context", "session_trace"}


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "HYPOTHESIS"))}
    out.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", BEEWEAVE_API_KEYS=f"{KEY}:team")
    return out


def cli(store: Path, *args: str) -> list[str]:
    return ["-m", "beeweave_core.cli", "--store", str(store), "--embedder", "beeweave:hashing-64", "mcp", *args]


def result(res: Any) -> Any:
    assert not res.is_error, res.content
    return res.structured_content if res.structured_content is not None else json.loads(res.content[0].text)


async def exercise(session: ClientSession) -> None:
    """Tools listed, a memory saved and found, scoped by user, bad arguments refused."""
    await session.initialize()
    listed = {t.name: t for t in (await session.list_tools()).tools}
    assert TOOLS <= set(listed)
    assert listed["save_memory"].input_schema["required"] == ["content"]  # user_id: the default user's, if any

    saved = result(await session.call_tool("save_memory", {"user_id": "alice", "content": "Alice's staging "
                                                           "database listens on port 5433.", "tags": ["ops"]}))
    other = result(await session.call_tool("save_memory", {"user_id": "bob", "content": "Bob's port is 9999."}))
    found = result(await session.call_tool("search_memory", {"user_id": "alice", "query": "staging database port"}))
    assert [m["id"] for m in found["memories"]] == [saved["id"]]  # only alice's memories
    best = found["memories"][0]["relevance"]
    gated = result(await session.call_tool("search_memory", {"user_id": "alice", "query": "staging database port",
                                                            "abstain_below": min(1.0, best + 1e-3)}))  # shown rounded to 4 places
    assert gated["memories"] == []  # nothing reaches the gate: nothing relevant
    got = result(await session.call_tool("get_memory", {"user_id": "alice", "memory_id": saved["id"]}))
    assert got["content"].endswith("port 5433.") and got["tags"] == ["ops"]
    result(await session.call_tool("update_memory", {"user_id": "alice", "memory_id": saved["id"],
                                                     "content": "Alice's staging database listens on port 6543."}))
    rated = result(await session.call_tool("memory_feedback", {"user_id": "alice", "memory_ids": [saved["id"]],
                                                              "signal": "up"}))
    assert rated["rated"] == [saved["id"]]

    resource = await session.read_resource("beeweave://users/alice/recent")
    [recent] = json.loads(resource.contents[0].text)
    assert recent["content"].endswith("port 6543.")

    for name, args, why in [
        ("get_memory", {"user_id": "alice", "memory_id": other["id"]}, "no memory"),  # bob's: as if absent
        ("save_memory", {"user_id": "alice", "content": "   "}, "empty"),
        ("search_memory", {"user_id": "alice", "query": "x", "k": "many"}, "k"),
        ("memory_feedback", {"user_id": "alice", "memory_ids": [saved["id"]], "signal": "sideways"}, "signal"),
        ("save_memory", {"content": "no user"}, "user_id"),
    ]:
        res = await session.call_tool(name, args)
        assert res.is_error and why in res.content[0].text, (name, res.content)
    deleted = result(await session.call_tool("delete_memory", {"user_id": "alice", "memory_id": saved["id"]}))
    assert deleted["deleted"] is True
    assert (await session.call_tool("get_memory", {"user_id": "alice", "memory_id": saved["id"]})).is_error
    assert result(await session.call_tool("get_memory", {"user_id": "bob", "memory_id": other["id"]}))["id"]


@pytest.mark.asyncio
async def test_stdio_lists_tools_saves_and_searches(tmp_path: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=cli(tmp_path / "m.db"), env=env(), cwd=str(ROOT))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await exercise(session)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve_http(store: Path, *args: str) -> Iterator[str]:
    """``beeweave mcp --transport http`` on a free loopback port (``args``: more options); the
    server's URL once it accepts connections."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, *cli(store, "--transport", "http", "--port", str(port), *args)],
                            env=env(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    with serve_http(tmp_path / "h.db") as url:
        yield url


@pytest.mark.asyncio
async def test_http_with_the_right_key_works(http_server: str) -> None:
    async with create_mcp_http_client(headers={"X-API-Key": KEY}) as http, \
            streamable_http_client(http_server, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await exercise(session)


@pytest.mark.asyncio
async def test_http_refuses_a_missing_or_wrong_key(http_server: str) -> None:
    for headers, status in [({}, 401), ({"X-API-Key": "wrong-key-0000"}, 403),
                            ({"Authorization": "Bearer wrong-key-0000"}, 403)]:
        async with create_mcp_http_client(headers=headers) as http:
            response = await http.post(http_server, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert response.status_code == status
        with pytest.raises(Exception) as failed:  # and the SDK's client cannot get a session
            async with create_mcp_http_client(headers=headers) as http, \
                    streamable_http_client(http_server, http_client=http) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
        assert failed.group_contains(MCPError, match="error response"), repr(failed.value)
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"}) as http, \
            streamable_http_client(http_server, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        assert TOOLS <= {t.name for t in (await session.list_tools()).tools}


def test_http_refuses_a_non_loopback_address(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, *cli(tmp_path / "x.db", "--transport", "http", "--host", "0.0.0.0")],
                         env=env(), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "loopback" in out.stderr


def test_http_without_keys_does_not_start(tmp_path: Path) -> None:
    e = env()
    del e["BEEWEAVE_API_KEYS"]
    e.pop("BEEWEAVE_API_KEYS_FILE", None)
    out = subprocess.run([sys.executable, *cli(tmp_path / "x.db", "--transport", "http")],
                         env=e, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "API keys" in out.stderr
