"""The ``beeweave`` command, through its entry point (``python -m beeweave_core.cli`` in a
subprocess) and through ``main(argv)`` where a subprocess would only add start-up time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import httpx
import pytest
import tomllib

from beeweave_core.cli import COMMANDS, build_parser, main
from tests.service.service_support import ACME_KEY, EMBEDDER, event, free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EVENTS = [
    event("alice", "How do I deploy the api?", "Run make deploy; it rolls out to the kubernetes cluster.",
          session_id="s1", agent_id="ops-bot", id="cli-deploy"),
    event("alice", "Where are the deploy logs?", "Deploy logs are in Grafana Loki, dashboard ops/deploy.",
          session_id="s1", agent_id="ops-bot", id="cli-logs"),
    event("bob", "What is the coffee budget?", "The coffee budget is 200 EUR per month.", agent_id="finance-bot",
          id="cli-coffee"),
    event("bob", "vpn?", "on", id="cli-short"),  # too short: pending review (not small talk)
]


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", **extra)
    env.pop("BEEWEAVE_STORE", None)
    return env


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "beeweave_core.cli", *args], cwd=cwd, env=env or _env(),
                          capture_output=True, text=True, timeout=120)


def one_line_error(stderr: str, *words: str) -> None:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("beeweave"), stderr
    assert "Traceback" not in stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store filled through the entry point: JSONL events and a Markdown document."""
    d = tmp_path_factory.mktemp("cli")
    (d / "events.jsonl").write_text("\n".join(json.dumps(e) for e in EVENTS) + "\n")
    (d / "guide.md").write_text("# Deploy guide\n\nDeploys go through make deploy.\n\n## Rollback\n\n"
                                "Run make rollback to undo a deploy.\n")
    r = run("--store", "m.db", "--embedder", EMBEDDER, "ingest", "events.jsonl", "guide.md", "--user-id", "alice",
            "--tag", "docs", cwd=d)
    assert r.returncode == 0, r.stderr
    assert "queued 4 event(s)" in r.stdout and "all queued events are processed" in r.stdout
    assert "imported 2 chunk(s) from 1 document(s)" in r.stdout
    return d


def test_every_command_is_in_help_and_docs(tmp_path):
    r = run("--help", cwd=tmp_path)
    assert r.returncode == 0
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert list(sub.choices) == list(COMMANDS)
    docs = (ROOT / "docs" / "cli.md").read_text()
    for name in COMMANDS:
        assert f"  {name} " in r.stdout, name
        assert f"`beeweave {name}" in docs, name
        with pytest.raises(SystemExit) as exit_:
            main([name, "--help"])
        assert exit_.value.code == 0


def test_the_entry_point_is_declared():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["beeweave"] == "beeweave_core.cli:main"
    installed = shutil.which("beeweave")
    if installed:  # after pip install -e .
        assert subprocess.run([installed, "--help"], capture_output=True, text=True, env=_env()).returncode == 0


def test_search_and_stats_across_processes(store, capsys, monkeypatch):
    # No --embedder: the store remembers its model.
    r = run("--store", "m.db", "search", "deploy logs", "--user-id", "alice", "-k", "2", "--json", cwd=store)
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)
    assert hits[0]["chunk"]["id"] == "cli-logs@alice:0" and len(hits) == 2
    monkeypatch.chdir(store)
    assert main(["--store", "m.db", "search", "deploy", "--filter", "tags=docs", "--filter", "user_id=alice"]) == 0
    assert capsys.readouterr().out.count("doc:") == 2
    # The search of the process above is in the store's statistics.
    assert main(["--store", "m.db", "stats", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["searches"] == 2 and s["latency"]["p50"] > 0
    assert s["by_agent"] == {"(none)": 3, "ops-bot": 2, "finance-bot": 1}  # live: active and pending
    assert s["by_status"]["pending"] == 1


def test_commands_in_process(store, capsys, monkeypatch):
    monkeypatch.chdir(store)
    assert main(["--store", "m.db", "stats"]) == 0
    out = capsys.readouterr().out
    assert "search latency: p50" in out and "by source agent:" in out
    assert main(["--store", "m.db", "review"]) == 0
    out = capsys.readouterr().out
    assert "1 waiting for review" in out and "cli-short@bob:0  [bob]  pending (too short" in out
    assert main(["--store", "m.db", "review", "keep", "cli-short@bob:0"]) == 0
    assert "keep: 1 of 1: cli-short@bob:0" in capsys.readouterr().out
    assert main(["--store", "m.db", "maintain", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["merged"] == 0
    assert main(["--store", "m.db", "export", "alice", "-o", "alice.json"]) == 0
    exported = json.loads((store / "alice.json").read_text())
    assert {c["id"] for c in exported["chunks"]} >= {"cli-deploy@alice:0", "cli-logs@alice:0"}
    assert main(["--store", "m.db", "report", "-o", "report.html"]) == 0
    assert '<script type="application/json" id="bw-data">' in (store / "report.html").read_text()
    assert main(["--store", "m.db", "openapi", "-o", "openapi.json"]) == 0
    spec = json.loads((store / "openapi.json").read_text())
    assert "/api/v1/search" in spec["paths"]
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(spec)
    assert main(["--store", "m.db", "forget", "bob", "--yes"]) == 0
    assert "2 memories deleted" in capsys.readouterr().out
    assert main(["--store", "m.db", "search", "coffee", "--user-id", "bob"]) == 0
    assert "no memories found" in capsys.readouterr().out
    assert main(["--store", "m.db", "search", "deploy logs", "--user-id", "alice", "--abstain-below", "1"]) == 0
    assert "no memories found" in capsys.readouterr().out


def test_errors_are_one_line(store, capsys, monkeypatch):
    r = run("--store", "no/such/dir/m.db", "memory", "add", "a note", "--user-id", "u", cwd=store)
    assert r.returncode == 1
    one_line_error(r.stderr, "no/such/dir does not exist")
    # A command that only reads refuses a store that is not there instead of creating it.
    for argv in (["stats"], ["search", "q"], ["export", "u"], ["report"], ["forget", "u", "--yes"],
                 ["memory", "list"], ["review"], ["copy", "--to", "x.db"]):
        r = run("--store", "typo.db", *argv, cwd=store)
        assert r.returncode == 1, argv
        one_line_error(r.stderr, "no store at typo.db")
        assert not (store / "typo.db").exists() and not (store / "x.db").exists(), argv
    monkeypatch.chdir(store)
    (store / "broken.jsonl").write_text('{"user_id": "a", "query": "q", "response": "r"}\n{oops\n')
    cases = [
        (["--store", "m.db", "search", "x", "--filter", "colour=red"], 1, "unknown filter key"),
        (["--store", "m.db", "search", "x", "--filter", "nonsense"], 1, "KEY=VALUE"),
        (["--store", "m.db", "forget", "alice"], 1, "--yes"),
        (["--store", "m.db", "--embedder", "beeweave:hashing-32", "stats"], 1, "beeweave:hashing-64"),
        (["--store", "m.db", "ingest", "broken.jsonl"], 1, "broken.jsonl:2"),
        (["--store", "m.db", "ingest", "guide.md"], 1, "--user-id"),
        (["--store", "m.db", "ingest", "missing.jsonl"], 1, "no such file"),
        (["--store", "m.db", "review", "resolve", "x"], 1, "keep, archive or delete"),
        (["--store", "m.db", "review", "keep", "no-such-id"], 1, "no memory with id"),
        (["--store", "m.db", "export", "alice", "-o", "."], 1, "is a directory"),
        (["--store", str(store), "stats"], 1, "pass a tenant"),
        (["--store", f"http://127.0.0.1:{free_port()}", "--api-key", "k", "stats"], 1, "cannot reach"),
        (["--store", "http://127.0.0.1:1", "report"], 1, "reads the store directly"),
        (["--store", "m.db", "serve"], 1, "no API keys"),
        (["--store", "m.db", "frobnicate"], 2, "invalid choice"),
        (["--store", "m.db", "search"], 2, "required: query"),
    ]
    monkeypatch.delenv("BEEWEAVE_API_KEYS", raising=False)
    monkeypatch.delenv("BEEWEAVE_API_KEYS_FILE", raising=False)
    for argv, code, words in cases:
        with pytest.raises(SystemExit) if code == 2 else nullcontext() as raised:
            assert main(argv) == code, argv
        if code == 2:
            assert raised.value.code == 2
        one_line_error(capsys.readouterr().err, words)


def test_cli_against_a_server(live, acme, capsys):
    acme.ingest(event("ivan", "Which printer is on floor 3?", "The floor 3 printer is called Hornet.", id="cli-pr"))
    assert acme.flush(20)
    remote = ["--store", live.url, "--api-key", ACME_KEY]
    assert main([*remote, "search", "printer", "--user-id", "ivan", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["chunk"]["id"] == "cli-pr@ivan:0"
    assert main([*remote, "stats", "--json", "--user-id", "ivan"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 1
    assert main([*remote, "forget", "ivan", "--yes"]) == 0
    assert "1 memories deleted" in capsys.readouterr().out
    assert main(["--store", live.url, "--api-key", "wrong-key-000", "stats"]) == 1
    one_line_error(capsys.readouterr().err, "API key not recognised")


def test_serve_runs_the_api(tmp_path):
    port = free_port()
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"serve-key-0001": "acme"}))
    proc = subprocess.Popen([sys.executable, "-m", "beeweave_core.cli", "--store", str(tmp_path / "stores"),
                             "--embedder", EMBEDDER, "serve", "--port", str(port), "--api-keys", str(keys),
                             "--log-level", "warning"], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.1)
        with httpx.Client(base_url=url, headers={"X-API-Key": "serve-key-0001"}) as h:
            assert h.post("/api/v1/ingest", json=event("zoe", "Zoe's desk?", "Zoe sits at desk 12.")).status_code == 202
            assert h.post("/api/v1/flush").json()["drained"]
            assert h.post("/api/v1/search", json={"query": "desk"}).json()["hits"][0]["chunk"]["user_id"] == "zoe"
            assert h.get("/api/v1/stats").status_code == 200
    finally:
        proc.terminate()
        proc.wait(30)
    assert (tmp_path / "stores" / "acme.db").exists()
