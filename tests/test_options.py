"""The operators' options (issue 46, item 10): every flag of serve, worker, mcp and the global options
has a BEEWEAVE_* variable; a flag wins over its variable, which wins over the default; `beeweave config
show` says which one each value came from and never prints a key or a database password."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from beeweave_core import options
from beeweave_core.cli import build_parser, main
from beeweave_core.options import ENV_ONLY, OPTIONS, Option

_COMMANDS = ["serve", "worker", "mcp"]


def _sample(o: Option, which: int) -> tuple[str, object]:
    """Two distinct valid texts for an option, and what they read as."""
    if o.choices:
        text = o.choices[-1 - which]
        return text, text
    if o.kind == "int":
        return str(1024 + 7 * which), 1024 + 7 * which  # 1024 + : valid for --max-body-bytes as well
    if o.kind == "float":
        return str(2.5 + which), 2.5 + which
    return f"value-{which}", f"value-{which}"


def _argv(o: Option, flag_text: str | None) -> list[str]:
    command = o.commands[0] if o.commands else "worker"
    given = [] if flag_text is None else [o.flag] if o.kind == "switch" else [o.flag, flag_text]
    return given + [command] if not o.commands else [command, *given]


@pytest.mark.parametrize("o", OPTIONS, ids=lambda o: f"{','.join(o.commands) or 'global'}:{o.dest}")
def test_flag_beats_variable_beats_default(o: Option, monkeypatch) -> None:
    for name in options.env_names():
        monkeypatch.delenv(name, raising=False)
    command = o.commands[0] if o.commands else None

    def parse(flag_text: str | None) -> tuple[object, str]:
        args = build_parser().parse_args(_argv(o, flag_text))
        row = next(r for r in options.resolved(args, command) if r.option == o)
        return row.value, row.source

    assert parse(None) == (o.default, "default")
    if o.kind == "switch":
        monkeypatch.setenv(o.env, "yes")
        assert parse(None) == (True, "env")
        monkeypatch.setenv(o.env, "off")
        assert parse("x") == (True, "flag")
        return
    env_text, env_value = _sample(o, 0)
    flag_text, flag_value = _sample(o, 1)
    monkeypatch.setenv(o.env, env_text)
    assert parse(None) == (env_value, "env")
    assert parse(flag_text) == (flag_value, "flag")


def test_a_bad_variable_is_a_usage_error_naming_it_only_for_its_command(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setenv("BEEWEAVE_PORT", "eighty")
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["serve"])
    assert exc.value.code == 2 and "$BEEWEAVE_PORT" in capsys.readouterr().err
    assert build_parser().parse_args(["worker"]).rescan == 30.0  # another command does not read it
    monkeypatch.setenv("BEEWEAVE_MCP_TRANSPORT", "carrier-pigeon")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["mcp"])
    assert "not one of stdio, http" in capsys.readouterr().err
    monkeypatch.setenv("BEEWEAVE_JSON_LOGS", "maybe")
    assert main(["--store", str(tmp_path / "x.db"), "config", "show"]) == 2
    assert "$BEEWEAVE_JSON_LOGS" in capsys.readouterr().err


def test_every_variable_name_is_unique_per_command_and_documented() -> None:
    from beeweave_core.server import config as server_config

    text = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    for command in [None, *_COMMANDS]:
        names = [o.env for o in options.for_command(command)]
        assert len(names) == len(set(names)), command
        flags = [o.flag for o in options.for_command(command)]
        assert len(flags) == len(set(flags)), command
    assert {server_config.ENV_KEYS, server_config.ENV_KEYS_FILE} <= options.env_names()
    missing = [o.env for o in OPTIONS + ENV_ONLY if f"`{o.env}`" not in text]
    assert not missing, f"docs/cli.md#environment-variables does not list {missing}"


def test_config_show_says_where_each_value_came_from_and_masks_secrets(monkeypatch, capsys) -> None:
    for name in options.env_names():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BEEWEAVE_STORE", "postgresql://beeweave:hunter2-pw@db:5432/beeweave")
    monkeypatch.setenv("BEEWEAVE_API_KEYS", "team-secret-key-1:acme")
    monkeypatch.setenv("BEEWEAVE_PORT", "9000")
    monkeypatch.setenv("BEEWEAVE_RESCAN", "5")
    assert main(["--api-key", "client-secret-key", "config", "show", "serve", "--port", "9100", "--json"]) == 0
    out = capsys.readouterr().out
    assert "hunter2" not in out and "team-secret-key-1" not in out and "client-secret-key" not in out
    rows = {(r["command"], r["env"]): r for r in json.loads(out)}
    assert rows[(None, "BEEWEAVE_STORE")] == {"command": None, "option": "--store", "env": "BEEWEAVE_STORE",
                                             "value": "postgresql://beeweave:***@db:5432/beeweave", "source": "env"}
    assert rows[(None, "BEEWEAVE_API_KEY")]["source"] == "flag"
    assert rows[(None, "BEEWEAVE_API_KEYS")]["source"] == "env" and rows[(None, "BEEWEAVE_API_KEYS")]["option"] is None
    assert rows[("serve", "BEEWEAVE_PORT")]["value"] == 9100 and rows[("serve", "BEEWEAVE_PORT")]["source"] == "flag"
    assert rows[("serve", "BEEWEAVE_HOST")] == {"command": "serve", "option": "--host", "env": "BEEWEAVE_HOST",
                                               "value": "127.0.0.1", "source": "default"}
    assert not any(c == "worker" for c, _ in rows)  # only the command asked for

    assert main(["config", "show"]) == 0  # text: every command's options, one line each
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["option", "value", "from", "variable"]
    assert any(line.split() == ["worker", "--rescan", "5.0", "env", "BEEWEAVE_RESCAN"] for line in lines)
    assert any(line.split() == ["serve", "--port", "9000", "env", "BEEWEAVE_PORT"] for line in lines)
    assert any(line.split()[:2] == ["mcp", "--port"] and line.split()[2:] == ["8765", "default", "BEEWEAVE_MCP_PORT"]
               for line in lines)
    assert "hunter2" not in "\n".join(lines)


@pytest.mark.parametrize("value", ["postgresql://u:p%40ss@h/db", "postgres://user:pw@h:5/db?x=1"])
def test_a_database_url_loses_its_password_only(value) -> None:
    store = next(o for o in OPTIONS if o.dest == "store")
    shown = options.masked(store, value)
    assert "***" in shown and "p%40ss" not in shown and ":pw@" not in shown
    assert options.masked(store, "/data/stores") == "/data/stores"
    assert options.masked(store, "postgresql://h/db") == "postgresql://h/db"
