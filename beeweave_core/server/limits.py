"""Server limits: slow or idle connections, too many connections, one tenant hogging the workers.

- :func:`limited_protocol`: uvicorn's h11 protocol with a **request-read timeout** (a connection
  must finish sending a request's headers within ``read_timeout`` seconds of connecting or of
  starting the request, so a slow client cannot hold a socket forever) and a **connection
  limit** (beyond ``max_connections``, the connection idle the longest, or else the new one,
  is closed at once, so file descriptors stay bounded and slow clients cannot lock out new
  ones; uvicorn's own ``limit_concurrency`` only answers 503 on an accepted connection).
  Idle keep-alive connections are closed by uvicorn's ``timeout_keep_alive``.
- :class:`TenantLimiter`: at most ``per_tenant`` requests of one tenant run at once; up to
  ``queue`` more wait without holding a worker thread, the rest get 503 with Retry-After.
  A tenant firing hundreds of searches then shares the CPU with the others instead of
  taking every worker thread.
- Request bodies must arrive within ``read_timeout`` too (see ``BodyLimit``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from ..errors import StoreUnavailableError

__all__ = ["limited_protocol", "TenantLimiter", "TenantBusyError"]

logger = logging.getLogger(__name__)


class TenantBusyError(StoreUnavailableError):
    """The tenant has as many requests running and waiting as the server allows; retry later."""


def limited_protocol(read_timeout: float, max_connections: int) -> type:
    """A uvicorn HTTP protocol class (``uvicorn.Config(http=...)``) with the two limits."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class LimitedH11Protocol(H11Protocol):
        _read_timer: asyncio.TimerHandle | None = None

        _since = 0.0

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._since = self.loop.time()
            live = [c for c in self.connections if not c.transport.is_closing()]
            if len(live) > max_connections:
                # Make room by closing the connection that has waited longest without a request
                # being served (an idle keep-alive, or a client still "sending" its headers):
                # a slow client then cannot lock out a new one. All busy: the new one goes.
                idle = [c for c in live if c is not self and not getattr(c, "_busy", lambda: True)()]
                victim: Any = min(idle, key=lambda c: getattr(c, "_since", 0.0)) if idle else self
                logger.warning("BeeWeave server: %d connections open (limit %d): closing %s",
                               len(live), max_connections,
                               "the new one" if victim is self else "the longest-idle one")
                victim.transport.abort()
                if victim is self:
                    return
            self._arm()

        def _busy(self) -> bool:
            return self.cycle is not None and not self.cycle.response_complete

        def _arm(self) -> None:
            if self._read_timer is None:
                self._read_timer = self.loop.call_later(read_timeout, self._read_timed_out)

        def _disarm(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None

        def data_received(self, data: bytes) -> None:
            idle = not self._busy()
            super().data_received(data)
            if self._busy():
                self._disarm()  # the headers are in; the body has its own timeout
            elif idle:
                self._arm()  # part of a request on an idle connection: it must complete in time

        def on_response_complete(self) -> None:
            self._disarm()  # uvicorn's keep-alive timer takes over
            self._since = self.loop.time()
            super().on_response_complete()

        def _read_timed_out(self) -> None:
            self._read_timer = None
            if not self._busy() and not self.transport.is_closing():
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return LimitedH11Protocol


class TenantLimiter:
    """Per-tenant concurrency: ``per_tenant`` running, ``queue`` waiting (asyncio, no thread held)."""

    def __init__(self, per_tenant: int, queue: int) -> None:
        self.per_tenant = per_tenant
        self.queue = queue
        self._sems: dict[str, asyncio.Semaphore] = {}
        self._waiting: dict[str, int] = {}

    def running(self, tenant: str) -> int:
        sem = self._sems.get(tenant)
        return 0 if sem is None else self.per_tenant - sem._value  # noqa: SLF001 - for metrics only

    async def slot(self, tenant: str) -> AsyncIterator[None]:
        sem = self._sems.setdefault(tenant, asyncio.Semaphore(self.per_tenant))
        if sem.locked():
            if self._waiting.get(tenant, 0) >= self.queue:
                raise TenantBusyError(f"tenant {tenant!r} has {self.per_tenant} requests running and {self.queue} "
                                      "waiting; retry later")
            self._waiting[tenant] = self._waiting.get(tenant, 0) + 1
            try:
                await sem.acquire()
            finally:
                self._waiting[tenant] -= 1
        else:
            await sem.acquire()
        try:
            yield
        finally:
            sem.release()
