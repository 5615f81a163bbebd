"""deploy/ (issue 46, item 10): the image's command runs from the checkout with nothing but environment
variables and serves; compose's variables are all declared options, and each service's command parses
with its environment. The image is not built and compose not run here (that needs a Docker daemon)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
import yaml

from beeweave_core import options
from beeweave_core.cli import build_parser
from tests.service.service_support import free_port

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


def _instructions() -> list[tuple[str, str]]:
    """The Dockerfile's (INSTRUCTION, arguments), continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in (DEPLOY / "Dockerfile").read_text().splitlines()
                                           if not line.lstrip().startswith("#")))
    return [(m[0].upper(), m[1].strip()) for m in re.findall(r"^\s*([A-Za-z]+)\s+(.*)$", text, flags=re.M)]


def _image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction, rest in _instructions():
        if instruction == "ENV":
            env.update(item.split("=", 1) for item in shlex.split(rest))
    return env


def _image_command() -> list[str]:
    found = {i: json.loads(rest) for i, rest in _instructions() if i in ("CMD", "ENTRYPOINT")}
    return [*found.get("ENTRYPOINT", []), *found.get("CMD", [])]


def _interpolate(value: object) -> str:
    """Compose's ${NAME:-default} and ${NAME:?error}: the default, or a stand-in for a required value."""
    return re.sub(r"\$\{(\w+)(?::-([^}]*)|:\?[^}]*)?\}",
                  lambda m: m[2] if m[2] is not None else "required-value-01:acme", str(value))


def wait_until_serving(base: str, proc: subprocess.Popen, log: Callable[[], str], seconds: float = 90) -> httpx.Response:
    """``GET /healthz`` until it answers; the process's log if it exits or the time runs out."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return httpx.get(f"{base}/healthz", timeout=2)
        except httpx.TransportError:
            assert proc.poll() is None and time.monotonic() < deadline, log()
            time.sleep(0.2)


def test_the_dockerfile_copies_what_exists_and_installs_extras_that_exist() -> None:
    steps = _instructions()
    for instruction, rest in steps:
        if instruction == "COPY":
            for source in shlex.split(rest)[:-1]:
                assert (ROOT / source).exists(), source
    extras = re.findall(r'"\.\[([\w,-]+)\]"', " ".join(rest for i, rest in steps if i == "RUN"))
    declared = set(re.findall(r"^([\w-]+) = \[", (ROOT / "pyproject.toml").read_text(), flags=re.M))
    assert extras and set(extras[0].split(",")) <= declared
    health = next(rest for i, rest in steps if i == "HEALTHCHECK")
    assert "/healthz" in health  # the route that needs no key
    assert set(_image_env()) - {"PYTHONUNBUFFERED"} <= options.env_names()


def test_composes_variables_are_declared_and_each_command_parses_with_them(monkeypatch) -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = {name: s for name, s in compose["services"].items() if s.get("command", [""])[0] == "beeweave"}
    assert set(services) == {"server", "worker"}
    for name, service in services.items():
        env = {**_image_env(), **{k: _interpolate(v) for k, v in service["environment"].items()}}
        unknown = sorted(k for k in env if k.startswith("BEEWEAVE_") and k not in options.env_names())
        assert not unknown, f"{name}: {unknown} are not options (beeweave_core/options.py)"
        for variable in options.env_names():
            monkeypatch.delenv(variable, raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        command = service["command"][1]
        args = build_parser().parse_args(service["command"][1:])
        assert args.store.startswith("postgresql://beeweave:beeweave@db:5432/")
        rows = options.resolved(args, command)
        assert {r.option.env for r in rows if r.source == "env"} == {k for k in env if k in
                                                                     {o.env for o in options.for_command(command)}}
        if command == "serve":
            assert (args.host, args.port, args.json_logs, args.maintain_every) == ("0.0.0.0", 8000, True, 3600.0)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_the_images_command_serves_with_only_environment_variables(tmp_path) -> None:
    command = _image_command()
    assert command[:2] == ["beeweave", "serve"]
    executable = shutil.which(command[0], path=os.pathsep.join([str(Path(sys.executable).parent),
                                                               os.environ.get("PATH", "")]))
    assert executable, "the beeweave command is not installed (pip install -e .)"
    port = free_port()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **_image_env(),
           # what the image's /data and published port are here; keys as an operator passes them
           "BEEWEAVE_STORE": str(tmp_path / "data"), "BEEWEAVE_HOST": "127.0.0.1", "BEEWEAVE_PORT": str(port),
           "BEEWEAVE_CACHE": os.environ.get("BEEWEAVE_CACHE", str(tmp_path / "cache")),
           "BEEWEAVE_API_KEYS": "deploy-key-0001:acme",
           "BEEWEAVE_EMBEDDER": "beeweave:hashing-64"}  # the default model's start is tested elsewhere
    (tmp_path / "data").mkdir()
    proc = subprocess.Popen([executable, *command[1:]], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        health = wait_until_serving(f"http://127.0.0.1:{port}", proc, lambda: proc.stderr.read() if proc.stderr else "")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"X-API-Key": "deploy-key-0001"},
                          timeout=10) as h:
            added = h.post("/api/v1/memories", json={"content": "Staging listens on port 5433.", "user_id": "alice",
                                                     "status": "active"})
            assert added.status_code == 201, added.text
            hits = h.post("/api/v1/search", json={"query": "staging port", "user_id": "alice"}).json()["hits"]
            assert hits and hits[0]["chunk"]["id"] == added.json()["id"]
            assert httpx.get(f"http://127.0.0.1:{port}/api/v1/memories", timeout=5).status_code == 401
        assert (tmp_path / "data" / "acme.db").exists()  # the store the variable named
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    # a graceful stop (uvicorn re-raises the SIGTERM it handled, so the status may say so)
    err = proc.stderr.read()
    assert proc.returncode in (0, -signal.SIGTERM) and "Application shutdown complete" in err, err
