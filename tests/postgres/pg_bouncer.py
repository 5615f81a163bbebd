"""A real PgBouncer (Debian's package) in transaction pooling mode in front of the test
server, started on 127.0.0.1 for one test and stopped after it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest

__all__ = ["pgbouncer"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def pgbouncer(server: str, *, pool_size: int = 2) -> Iterator[str]:
    """Yield a URL through PgBouncer (``pool_mode = transaction``, at most ``pool_size``
    server connections, so clients share them) to ``server``'s database."""
    binary = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None)
    if binary is None:
        pytest.skip("PgBouncer is not installed (apt-get install -y pgbouncer)")
    parts = urlsplit(server)
    query = parse_qs(parts.query)
    host = query.get("host", [parts.hostname or "127.0.0.1"])[0]
    port = parts.port or 5432
    dbname = parts.path.lstrip("/") or "postgres"
    user = parts.username or "postgres"
    here = tempfile.mkdtemp(prefix="beeweave-pgbouncer-")
    os.chmod(here, 0o777)  # PgBouncer runs as another user when we are root: it writes its log and pid here
    listen = _free_port()
    with open(os.path.join(here, "users.txt"), "w") as f:
        f.write(f'"{user}" ""\n')
    with open(os.path.join(here, "pgbouncer.ini"), "w") as f:
        f.write(f"""[databases]
{dbname} = host={host} port={port} dbname={dbname} user={user}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = trust
auth_file = {here}/users.txt
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 200
server_reset_query =
logfile = {here}/pgbouncer.log
pidfile = {here}/pgbouncer.pid
""")
    for name in os.listdir(here):
        os.chmod(os.path.join(here, name), 0o644)
    cmd = [binary, os.path.join(here, "pgbouncer.ini")]
    if os.geteuid() == 0:  # PgBouncer will not run as root: run it as the server's own user
        import pwd

        owner = os.stat(host).st_uid if host.startswith("/") else 0
        cmd[1:1] = ["-u", pwd.getpwuid(owner).pw_name if owner else "nobody"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"postgresql://{user}@127.0.0.1:{listen}/{dbname}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(url, autocommit=True, prepare_threshold=None, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                break
            except psycopg.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = os.path.join(here, "pgbouncer.log")
                    raise AssertionError("PgBouncer did not start: " + (
                        open(log).read() if os.path.exists(log) else f"exit code {proc.poll()}")) from None
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(here, ignore_errors=True)
