"""The parser of the ``beeweave`` command line (its commands are :mod:`beeweave_core.cli_commands`,
its entry point :mod:`beeweave_core.cli`).

Apart from both so that a command that needs the parser (``config show server`` reads serve's
flags) imports it without importing the entry point that dispatches to the commands.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from . import __version__, options
from .defaults import DEFAULT_TOP_K

__all__ = ["COMMANDS", "CommandParser", "build_parser"]

# name -> one-line help; the order is the order of ``beeweave --help``.
COMMANDS = {
    "demo": "store a short agent conversation and answer questions from it (offline)",
    "ingest": "add JSONL knowledge events or text/Markdown/JSONL documents (progress bar)",
    "search": "hybrid search of the memory",
    "serve": "run the REST API (uvicorn)",
    "worker": "drain the shared ingest queue of a PostgreSQL store (no API)",
    "stats": "hottest and newest memories, distributions, growth, search latency",
    "export": "write all of a user's data as JSON",
    "import": "write users' exports back (into this store or another)",
    "copy": "copy every user (or some) into another store, e.g. SQLite to PostgreSQL",
    "reembed": "move a store to another embedding model (default: the default model); resumable",
    "forget": "delete everything of a user",
    "maintain": "merge duplicates, expire and evict now",
    "invalidate": "mark the memories about changed files 'to verify' (a git post-commit hook)",
    "review": "list the memories waiting for review (pending or flagged); keep, archive or delete them",
    "memory": "add, show, list, edit or delete single memories; their history and relationships",
    "dead-letters": "list the events whose processing failed, or queue them again",
    "report": "write the dashboard as one self-contained HTML file",
    "openapi": "write the REST API's OpenAPI spec as JSON",
    "mcp": "run the MCP server (stdio, or streamable HTTP with API keys)",
    "config": "show the options serve, worker and mcp would use and where each came from (flag, BEEWEAVE_* "
              "variable or default); or the effective settings of a store or a server",
}


class CommandParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the usage itself is in --help)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="beeweave", description="BeeWeave: the memory an agent grows with use.",
                epilog="commands:\n" + "\n".join(f"  {n:<12} {h}" for n, h in COMMANDS.items()),
                formatter_class=argparse.RawDescriptionHelpFormatter)
    # --store, --tenant, --embedder, --api-key and each service's options: flag, $BEEWEAVE_* or default.
    options.add_arguments(p, None)
    p.add_argument("--version", action="version", version=f"beeweave {__version__} (beeweave-memory)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=CommandParser)
    sub.required = True

    def cmd(name: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=COMMANDS[name], description=COMMANDS[name])

    cmd("demo")

    c = cmd("ingest")
    c.add_argument("files", nargs="+", help="JSONL files of knowledge events, or documents (.txt, .md, .jsonl)")
    c.add_argument("--user-id", help="the user (required for documents; the default for events without one)")
    c.add_argument("--agent-id", help="the agent, for documents")
    c.add_argument("--tag", action="append", default=[], help="a tag for every document chunk (repeatable)")
    c.add_argument("--as", dest="kind", choices=["auto", "events", "documents"], default="auto",
                   help="how to read the files (auto: JSONL whose records are events are events)")
    c.add_argument("--review", action="store_true", help="store documents pending review")
    c.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for queued events (default 120)")
    c.add_argument("--no-wait", action="store_true", help="return once events are queued")

    c = cmd("search")
    c.add_argument("query")
    c.add_argument("--user-id")
    c.add_argument("-k", type=int, default=DEFAULT_TOP_K, help=f"how many hits (default {DEFAULT_TOP_K})")
    c.add_argument("--filter", action="append", default=[], metavar="KEY=VALUE",
                   help="a filter, e.g. tags=deploy or since=2024-01-01 (repeatable; comma-separated lists)")
    c.add_argument("--fusion", choices=["zscore", "rrf", "weighted"])
    c.add_argument("--min-score", type=float)
    c.add_argument("--min-relevance", type=float, metavar="P",
                   help="drop hits whose calibrated relevance (0..1) is below P")
    c.add_argument("--abstain-below", type=float, metavar="P",
                   help="no hits at all when none reaches calibrated relevance P (nothing relevant; default: "
                        "the store's model's tuned gate, 0: off)")
    c.add_argument("--mmr", type=float, metavar="LAMBDA", help="diversify with MMR (0..1; 1 = relevance only)")
    c.add_argument("--expand", action="store_true", help="follow relationships from the hits")
    c.add_argument("--loosen", action="store_true", help="relax tag/entity filters when they leave fewer than k hits")
    c.add_argument("--json", action="store_true", help="print the hits as JSON")

    for name in ("serve", "worker"):
        options.add_arguments(cmd(name), name)

    c = cmd("stats")
    c.add_argument("--user-id")
    c.add_argument("--top", type=int, default=10)
    c.add_argument("--json", action="store_true")

    c = cmd("export")
    c.add_argument("user_id")
    c.add_argument("-o", "--output", help="write to this file (default: standard output)")

    c = cmd("import")
    c.add_argument("files", nargs="+", metavar="FILE", help="export files (beeweave export -o FILE)")

    c = cmd("copy")
    c.add_argument("--to", required=True, metavar="STORE",
                   help="the destination: SQLite file, directory of tenant stores or postgresql:// URL")
    c.add_argument("--to-tenant", help="the tenant in a destination directory of stores or PostgreSQL database "
                        "(PostgreSQL's default: default)")
    c.add_argument("--user-id", action="append", dest="users", metavar="USER",
                   help="copy only this user (repeat for more; default: every user)")

    c = cmd("reembed")
    c.add_argument("--to", default=None, metavar="MODEL",
                   help="the model to move to: a name or path (default: the default model, multilingual-e5-small)")
    c.add_argument("--batch-size", type=int, default=256, help="memories per embedding call (default 256)")

    c = cmd("forget")
    c.add_argument("user_id")
    c.add_argument("--yes", action="store_true", help="confirm: the user's data cannot be restored")

    c = cmd("maintain")
    c.add_argument("--user-id")
    c.add_argument("--json", action="store_true")

    c = cmd("invalidate")
    c.add_argument("paths", nargs="*", metavar="PATH", help="changed files (relative to the repository root)")
    c.add_argument("--from-git", action="store_true",
                   help="the files changed by the last commit (git diff --name-only HEAD~1 HEAD) and its hash")
    c.add_argument("--commit", help="the commit that changed them (default with --from-git: HEAD)")
    c.add_argument("--repo", default=".", help="the git repository for --from-git (default: the current directory)")
    c.add_argument("--user-id")
    c.add_argument("--json", action="store_true")

    c = cmd("review")
    c.add_argument("action", nargs="?", default="list",
                   choices=["list", "keep", "archive", "delete", "approve", "reject", "resolve"],
                   help="list (default): what waits, pending or flagged; keep IDS (approve a pending memory, "
                        "clear a flagged one), archive IDS (flagged ones), delete IDS (reject a pending memory); "
                        "deprecated: approve IDS, reject IDS, resolve ID DECISION")
    c.add_argument("ids", nargs="*", help="memory ids")
    c.add_argument("--user-id")
    c.add_argument("--reason", help="why (kept with a rejected pending memory)")
    c.add_argument("--json", action="store_true")

    c = cmd("memory")
    c.add_argument("action", choices=["add", "show", "list", "edit", "delete", "history", "relationships"])
    c.add_argument("args", nargs="*", help="add: the text; show/edit/delete/history/relationships: the id")
    c.add_argument("--user-id")
    c.add_argument("--tag", action="append", default=None, help="a tag (repeatable; for add, edit, list)")
    c.add_argument("--pin", dest="pinned", action="store_const", const=True, help="pin the memory (add, edit)")
    c.add_argument("--unpin", dest="pinned", action="store_const", const=False, help="unpin it (edit)")
    c.add_argument("--expires-at", help="ISO date-time (add, edit; 'none' removes the expiry on edit)")
    c.add_argument("--confidence", type=float)
    c.add_argument("--status", help="add: active|pending; edit: any status; list: filter")
    c.add_argument("--content", help="edit: the new text")
    c.add_argument("--limit", type=int, default=50, help="list: how many (default 50)")
    c.add_argument("--cursor", help="list: continue after this cursor")
    c.add_argument("--json", action="store_true")

    c = cmd("dead-letters")
    c.add_argument("action", nargs="?", default="list", choices=["list", "retry"])
    c.add_argument("ids", nargs="*", help="retry: event ids (default: all)")
    c.add_argument("--user-id")
    c.add_argument("--json", action="store_true")

    c = cmd("report")
    c.add_argument("-o", "--output", default="beeweave-report.html", help="default: beeweave-report.html")
    c.add_argument("--user-id")
    c.add_argument("--top", type=int, default=8, help="how many hottest and newest memories to list")
    c.add_argument("--lang", default="en", choices=["en", "zh"], help="the report's labels: English or Chinese")

    c = cmd("openapi")
    c.add_argument("-o", "--output", help="write to this file (default: standard output)")

    from .mcp.cli import add_arguments as mcp_arguments

    mcp_arguments(cmd("mcp"))

    c = cmd("config")
    c.add_argument("action", choices=["show"])
    c.add_argument("for_command", nargs="?", choices=["serve", "worker", "mcp", "store", "server"], metavar="WHAT",
                   help="serve, worker or mcp: only this command's options, parsed from the flags that follow it "
                        "(default: all); store: what --store opens with (its recorded model, tokenizer and index, "
                        "every engine setting), read without changing it; server: the settings serve would run "
                        "with, from serve's flags, without secrets")
    c.add_argument("flags", nargs=argparse.REMAINDER, help="COMMAND's flags, as they would be given to it")
    c.add_argument("--json", action="store_true")
    return p
