"""Talk to ``beeweave mcp`` the way Claude Desktop or Cursor do: the MCP SDK's client over stdio.

The example starts the server as a subprocess on a fresh store, lists its tools, saves two
memories for alice and one for bob, searches alice's, rates the hit and reads alice's
"recent memories" resource.

    python examples/mcp_client.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[1]


def payload(result: Any) -> Any:
    if result.is_error:
        raise RuntimeError(result.content[0].text)
    return result.structured_content


async def converse(store: Path, embedder: str | None) -> dict[str, Any]:
    args = ["-m", "beeweave_core.cli", "--store", str(store)]
    if embedder:
        args += ["--embedder", embedder]
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    params = StdioServerParameters(command=sys.executable, args=[*args, "mcp"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = sorted(t.name for t in (await session.list_tools()).tools)
        print("tools:", ", ".join(tools))
        for user, text in [("alice", "Alice is allergic to peanuts."), ("alice", "Alice drinks oolong tea."),
                           ("bob", "Bob is allergic to cats.")]:
            payload(await session.call_tool("save_memory", {"user_id": user, "content": text}))
        found = payload(await session.call_tool("search_memory", {"user_id": "alice", "query": "food allergy",
                                                                  "k": 2}))["memories"]
        for m in found:
            print(f"  {m['score']:.3f}  {m['content']}")
        payload(await session.call_tool("memory_feedback", {"user_id": "alice", "memory_ids": [found[0]["id"]],
                                                            "signal": "used"}))
        recent = json.loads((await session.read_resource("beeweave://users/alice/recent")).contents[0].text)
        print("alice's recent memories:", [m["content"] for m in recent])
        return {"tools": tools, "found": [m["content"] for m in found], "recent": [m["content"] for m in recent]}


def main(store: str | Path | None = None, embedder: str | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(converse(Path(store) if store else Path(tmp) / "mcp-memory.db", embedder))


if __name__ == "__main__":
    main()
