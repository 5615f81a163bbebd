"""deploy/compose.yaml's server and worker without Docker: each service's command and environment
as compose gives them (the image's ENV beneath), the database URL pointed at the test server. Both
start from the variables alone; the server accepts and stores an event; the worker finds the tenant."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.postgres.pg_support import fresh_schema, schema_url, server_url
from tests.service.service_support import free_port
from tests.test_deploy import DEPLOY, ROOT, _image_env, _interpolate, wait_until_serving

pytestmark = pytest.mark.slow

KEY = "compose-key-0001"


def _service_env(service: dict, **here: str) -> dict[str, str]:
    env = {**_image_env(), **{k: _interpolate(v) for k, v in service["environment"].items()}, **here}
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "PYTHONPATH": str(ROOT),
            "HF_HUB_OFFLINE": "1", **env}


def _start(service: dict, env: dict[str, str], log: Path) -> subprocess.Popen:
    command = service["command"]
    assert command[0] == "beeweave"
    return subprocess.Popen([sys.executable, "-m", "beeweave_core.cli", *command[1:]], env=env, cwd=log.parent,
                            stdout=subprocess.DEVNULL, stderr=log.open("w"))


def test_composes_server_and_worker_run_on_postgresql_from_their_variables(tmp_path) -> None:
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    with fresh_schema("deploy") as schema:
        url = schema_url(server_url(), schema)
        assert services["server"]["environment"]["BEEWEAVE_STORE"].startswith("postgresql://")
        port = free_port()
        # what differs outside a container: the database, a loopback port, local directories; keys as given
        here = {"BEEWEAVE_STORE": url, "BEEWEAVE_CACHE": os.environ.get("BEEWEAVE_CACHE", str(tmp_path / "cache")),
                "BEEWEAVE_EMBEDDER": "beeweave:hashing-64"}
        server = _start(services["server"], _service_env(services["server"], **here, BEEWEAVE_HOST="127.0.0.1",
                                                         BEEWEAVE_PORT=str(port), BEEWEAVE_API_KEYS=f"{KEY}:acme",
                                                         BEEWEAVE_QUEUE_DIR=str(tmp_path / "events")),
                        tmp_path / "server.log")
        procs = [server]
        try:
            base = f"http://127.0.0.1:{port}"
            assert wait_until_serving(base, server, (tmp_path / "server.log").read_text).status_code == 200
            with httpx.Client(base_url=base, headers={"X-API-Key": KEY}, timeout=30) as h:
                event = {"user_id": "alice", "query": "Which port does staging use?",
                         "response": "Staging listens on port 5433."}
                assert h.post("/api/v1/ingest", json=event).status_code == 202
                assert h.post("/api/v1/flush", params={"timeout": 30}).json()["drained"]
                hits = h.post("/api/v1/search", json={"query": "staging port", "user_id": "alice"}).json()["hits"]
                assert any("5433" in hit["chunk"]["raw_content"] for hit in hits)
            assert '"message"' in (tmp_path / "server.log").read_text()  # BEEWEAVE_JSON_LOGS=1: JSON lines

            worker = _start(services["worker"], _service_env(services["worker"], **here), tmp_path / "worker.log")
            procs.append(worker)
            deadline = time.monotonic() + 90
            while "worker on tenant 'acme'" not in (tmp_path / "worker.log").read_text():
                assert worker.poll() is None and time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
                time.sleep(0.3)
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0, (tmp_path / "worker.log").read_text()
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
                    try:
                        p.wait(30)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait(10)
