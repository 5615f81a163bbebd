"""A switchable TCP proxy on 127.0.0.1: the test's way to take a database or a server down
and bring it back without touching it.

``Proxy(target)`` forwards each connection to ``target`` (a ``(host, port)`` or the path of
a Unix socket). ``down()`` closes every open connection and stops listening, so clients
see refused connections; ``up()`` listens again on the same port.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


class Proxy:
    def __init__(self, target: tuple[str, int] | str | Path) -> None:
        self.target = target
        self.port = 0
        self._listener: socket.socket | None = None
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.up()

    def _connect_target(self) -> socket.socket:
        if isinstance(self.target, tuple):
            return socket.create_connection(self.target, timeout=5)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(self.target))
        return s

    def up(self) -> None:
        lst = socket.socket()
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind(("127.0.0.1", self.port))
        lst.listen(64)
        self.port = lst.getsockname()[1]
        self._listener = lst
        self._thread = threading.Thread(target=self._accept, args=(lst,), daemon=True)
        self._thread.start()

    def down(self) -> None:
        lst, self._listener = self._listener, None
        if lst is not None:
            with contextlib.suppress(OSError):
                lst.shutdown(socket.SHUT_RDWR)
            lst.close()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def _accept(self, lst: socket.socket) -> None:
        while True:
            try:
                client, _ = lst.accept()
            except OSError:
                return
            try:
                upstream = self._connect_target()
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    @staticmethod
    def _pump(a: socket.socket, b: socket.socket) -> None:
        sel = selectors.DefaultSelector()
        sel.register(a, selectors.EVENT_READ, b)
        sel.register(b, selectors.EVENT_READ, a)
        try:
            while True:
                for key, _ in sel.select(timeout=1.0):
                    data = key.fileobj.recv(65536)  # type: ignore[union-attr]
                    if not data:
                        return
                    key.data.sendall(data)
        except (OSError, ValueError):
            return
        finally:
            sel.close()
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.close()

    def close(self) -> None:
        self.down()


def pg_proxy_url(url: str, port: int) -> tuple[str, Path]:
    """A test server URL (Unix socket in ``?host=``) rewritten to go through 127.0.0.1:``port``,
    and the socket file the proxy should forward to."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    sock_dir = query.pop("host")
    netloc = f"{parts.username or 'postgres'}@127.0.0.1:{port}"
    return (urlunsplit(parts._replace(netloc=netloc, query=urlencode(query))),
            Path(sock_dir) / f".s.PGSQL.{parts.port or 5432}")


def warnings_from_beeweave(caplog: Any) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname in ("WARNING", "ERROR")
            and r.name.startswith(("beeweave", "beeweave_core", "beeweave_langchain", "beeweave_llamaindex"))]
