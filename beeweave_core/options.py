"""The operators' options: one table of command-line flag, ``BEEWEAVE_*`` environment variable and default.

Containers and process managers configure a service through its environment, so ``beeweave serve``,
``worker`` and ``mcp`` (and the global options before any command) read a variable for each flag: a
flag wins over its variable, which wins over the default. The parser is built from :data:`OPTIONS`
(:mod:`beeweave_core.cli`), ``beeweave config show`` reports where each value came from, and
``deploy/compose.yaml`` may use only the names declared here (tests/test_options.py).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .config_rules import truth

__all__ = ["Option", "OPTIONS", "ENV_ONLY", "SOURCES", "Resolved", "add_arguments", "for_command", "resolved", "masked",
           "render", "env_names", "mask_url"]

SOURCES = ("flag", "env", "default")
_GIVEN = "given__"  # namespace attribute a flag's action sets: argparse itself does not say what was typed


@dataclass(frozen=True)
class Option:
    """One setting: its argparse ``dest``, its variable, its default and who takes it.

    ``commands=()`` is a global option (given before the command). ``kind`` is how the text of the
    flag or variable is read; ``switch`` is a flag without a value whose variable is true/false.
    ``mask`` hides a value in ``beeweave config show``: ``secret`` all of it, ``url`` a URL's password.
    """

    dest: str
    env: str
    default: Any = None
    help: str = ""
    commands: tuple[str, ...] = ()
    kind: Literal["str", "int", "float", "switch"] = "str"
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    mask: Literal["", "secret", "url"] = ""

    @property
    def flag(self) -> str:
        return "--" + self.dest.replace("_", "-")


_SERVE, _MCP = ("serve",), ("mcp",)
OPTIONS: tuple[Option, ...] = (
    Option("store", "BEEWEAVE_STORE", "beeweave.db", "SQLite file, directory of tenant stores, postgresql:// URL "
           "or http(s):// server URL", mask="url"),
    Option("tenant", "BEEWEAVE_TENANT", None, "the tenant's store in a directory of stores or a PostgreSQL database"),
    Option("embedder", "BEEWEAVE_EMBEDDER", None, "embedding model name (default: the one the store was built "
           "with, else multilingual-e5-small); e.g. beeweave:hashing-64"),
    Option("api_key", "BEEWEAVE_API_KEY", None, "API key for an http(s):// store", mask="secret"),
    Option("host", "BEEWEAVE_HOST", "127.0.0.1", "address to listen on", _SERVE),
    Option("port", "BEEWEAVE_PORT", 8000, "port to listen on", _SERVE, "int"),
    Option("api_keys", "BEEWEAVE_API_KEYS_FILE", None, "JSON or TOML file of API key -> tenant "
           "(else $BEEWEAVE_API_KEYS='key1:tenantA,key2:tenantB')", ("serve", "mcp"), metavar="FILE"),
    Option("max_body_bytes", "BEEWEAVE_MAX_BODY_BYTES", 1_048_576, "larger requests get 413", _SERVE, "int"),
    Option("max_k", "BEEWEAVE_MAX_K", 100, "the largest k a search may ask for", _SERVE, "int"),
    Option("max_flush_timeout", "BEEWEAVE_MAX_FLUSH_TIMEOUT", 60.0, "seconds one POST /flush waits at most",
           _SERVE, "float"),
    Option("queue_dir", "BEEWEAVE_QUEUE_DIR", None, "with a PostgreSQL store, where each tenant's event log "
           "for SSE is kept (default: in memory); a SQLite store keeps it beside its file", _SERVE),
    Option("log_level", "BEEWEAVE_LOG_LEVEL", "info", "uvicorn's log level", _SERVE,
           choices=("critical", "error", "warning", "info", "debug")),
    Option("json_logs", "BEEWEAVE_JSON_LOGS", False, "write every log line as one JSON object", _SERVE, "switch"),
    Option("read_timeout", "BEEWEAVE_READ_TIMEOUT", 10.0, "seconds a client has to send a request", _SERVE,
           "float"),
    Option("keep_alive", "BEEWEAVE_KEEP_ALIVE", 5.0, "idle keep-alive seconds", _SERVE, "float"),
    Option("max_connections", "BEEWEAVE_MAX_CONNECTIONS", 512, "open connections at most", _SERVE, "int"),
    Option("tenant_concurrency", "BEEWEAVE_TENANT_CONCURRENCY", 4, "requests of one tenant running at once "
           "(more wait, then 503)", _SERVE, "int"),
    Option("tenant_queue", "BEEWEAVE_TENANT_QUEUE", 256, "requests of one tenant that may wait for a turn "
           "(beyond: 503)", _SERVE, "int"),
    Option("max_events", "BEEWEAVE_MAX_EVENTS", 100_000, "newest events each tenant's event log keeps "
           "(SSE resumption window)", _SERVE, "int"),
    Option("webhooks", "BEEWEAVE_WEBHOOKS_FILE", None, "JSON list of webhooks: [{url, secret, types?, tenant?}] "
           "(signed event deliveries)", _SERVE, metavar="FILE"),
    Option("webhook_queue", "BEEWEAVE_WEBHOOK_QUEUE", 10_000, "notifications each webhook holds for delivery "
           "(beyond: dropped and counted)", _SERVE, "int"),
    Option("maintain_every", "BEEWEAVE_MAINTAIN_EVERY", None, "run maintenance (expiry, merging, capacity) in "
           "the background every SECONDS", _SERVE, "float", metavar="SECONDS"),
    Option("rescan", "BEEWEAVE_RESCAN", 30.0, "seconds between looks for new tenants when --tenant is not given",
           ("worker",), "float"),
    Option("transport", "BEEWEAVE_MCP_TRANSPORT", "stdio", "stdio (for Claude Desktop, Cursor...) or streamable "
           "HTTP", _MCP, choices=("stdio", "http")),
    Option("host", "BEEWEAVE_MCP_HOST", "127.0.0.1", "HTTP: a loopback address", _MCP),
    Option("port", "BEEWEAVE_MCP_PORT", 8765, "HTTP port", _MCP, "int"),
    Option("path", "BEEWEAVE_MCP_PATH", "/mcp", "HTTP endpoint path", _MCP),
    Option("user_id", "BEEWEAVE_USER_ID", None, "the user of tool calls that name none (without it, every call "
           "names its user)", _MCP),
)

# Read where they are used, not by the parser; declared so that config show and deploy/ know them.
ENV_ONLY: tuple[Option, ...] = (
    Option("api_keys_inline", "BEEWEAVE_API_KEYS", None, "API keys inline, 'key1:tenantA,key2:tenantB' "
           "(when no key file is given)", ("serve", "mcp"), mask="secret"),
    Option("cache", "BEEWEAVE_CACHE", None, "where the default model's built graph is cached "
           "(default ~/.cache/beeweave)"),
    Option("debug", "BEEWEAVE_DEBUG", None, "1: errors show their traceback"),
)


def env_names() -> frozenset[str]:
    return frozenset(o.env for o in OPTIONS + ENV_ONLY)


def for_command(command: str | None) -> list[Option]:
    """The options of ``command`` (``None``: the global ones), in table order."""
    return [o for o in OPTIONS if (o.commands == () if command is None else command in o.commands)]


def _reader(option: Option) -> Callable[[str], Any]:
    """Reads a flag's or variable's text; the error names both, since argparse cannot tell which it was."""
    convert: Callable[[str], Any] = {"int": int, "float": float}.get(option.kind, str)
    noun = {"int": "an integer", "float": "a number"}.get(option.kind, "text")

    def read(text: str) -> Any:
        # argparse checks choices for a flag, not for a default (a variable): checked here for both.
        if option.choices and text not in option.choices:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(option.choices)} "
                                             f"(from {option.flag} or ${option.env})")
        try:
            return convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {noun} (from {option.flag} or ${option.env})") \
                from None

    read.__name__ = option.kind
    return read


def _switch_default(option: Option, environ: Mapping[str, str]) -> bool:
    text = environ.get(option.env)
    on = False if text is None or not text.strip() else truth(text)  # set but empty: unset
    if on is not None:
        return on or bool(option.default)
    from .errors import InvalidInputError

    raise InvalidInputError(f"${option.env} must be 1/true/yes/on or 0/false/no/off, not {text!r}")


def _mark(namespace: Any, dest: str) -> None:
    setattr(namespace, _GIVEN + dest, True)


class _Store(argparse._StoreAction):
    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        super().__call__(parser, namespace, values, option_string)
        _mark(namespace, self.dest)


class _Switch(argparse._StoreTrueAction):
    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        super().__call__(parser, namespace, values, option_string)
        _mark(namespace, self.dest)


def add_arguments(parser: argparse.ArgumentParser, command: str | None,
                  environ: Mapping[str, str] | None = None) -> None:
    """Add ``command``'s options to its parser; each default is its variable's value, else the table's.

    A variable's text is read by argparse like a flag's (a bad one is a usage error naming both), and
    only when its command runs, so a bad ``$BEEWEAVE_PORT`` does not stop ``beeweave search``.
    """
    env = os.environ if environ is None else environ
    for o in for_command(command):
        shown = "" if o.default is None or o.kind == "switch" else f"default: {o.default}; "
        text = f"{o.help} ({shown}${o.env})"
        if o.kind == "switch":
            parser.add_argument(o.flag, dest=o.dest, action=_Switch, default=_switch_default(o, env), help=text)
        else:
            parser.add_argument(o.flag, dest=o.dest, action=_Store, default=env.get(o.env) or o.default,
                                type=_reader(o), choices=o.choices, metavar=o.metavar, help=text)


@dataclass(frozen=True)
class Resolved:
    option: Option
    command: str | None
    value: Any
    source: str  # one of SOURCES

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "option": self.option.flag if self.option in OPTIONS else None,
                "env": self.option.env, "value": masked(self.option, self.value), "source": self.source}


def resolved(args: argparse.Namespace, command: str | None,
             environ: Mapping[str, str] | None = None) -> list[Resolved]:
    """Each option of ``command`` in ``args`` (a parse of it), with where its value came from."""
    env = os.environ if environ is None else environ
    out = []
    for o in for_command(command):
        source = "flag" if getattr(args, _GIVEN + o.dest, False) else "env" if env.get(o.env) else "default"
        out.append(Resolved(o, command, getattr(args, o.dest), source))
    if command is None:  # the variables read where they are used, shown once with the global options
        out += [Resolved(o, None, env.get(o.env) or o.default, "env" if env.get(o.env) else "default")
                for o in ENV_ONLY]
    return out


_URL_PASSWORD = re.compile(r"^([a-z][a-z0-9+.-]*://[^:/@]*:)([^@]*)(@)", re.I)


def mask_url(text: str) -> str:
    """A URL without the password of its user part (``postgresql://u:***@host/db``)."""
    return _URL_PASSWORD.sub(r"\1***\3", text)


def masked(option: Option, value: Any) -> Any:
    """What ``config show`` may print: never a key, nor the password in a database URL."""
    if value is None or value == "":
        return value
    if option.mask == "secret":
        return f"*** ({len(str(value))} characters)"
    if option.mask == "url":
        return mask_url(str(value))
    return value


def render(rows: Iterable[Resolved]) -> str:
    """The text table of ``beeweave config show``."""
    lines = [("option", "value", "from", "variable")]
    for r in rows:
        name = (f"{r.command} " if r.command else "") + (r.option.flag if r.option in OPTIONS else "(no flag)")
        value = masked(r.option, r.value)
        lines.append((name, "-" if value is None else str(value), r.source, r.option.env))
    widths = [max(len(line[i]) for line in lines) for i in range(3)]
    return "\n".join(f"{a:<{widths[0]}}  {b:<{widths[1]}}  {c:<{widths[2]}}  {d}" for a, b, c, d in lines)
