"""Observability: request ids, one log line per request, Prometheus metrics, JSON logs.

- ``X-Request-ID``: taken from the request when it is a sane token (<= 128 printable ASCII
  characters), otherwise generated; echoed on the response and in the request's log line.
  Routes add what they did (``note(request, k=5, results=3)``) to that line.
- ``GET /metrics``: the Prometheus text format from ``prometheus-client`` (a registry per
  app, nothing global): request latency histograms per route, search latency per tenant,
  and at scrape time, per opened tenant, the ingest queue depth, dead letters and memories,
  and the webhook notifications delivered and dropped (by reason).
- :class:`JSONFormatter`: ``beeweave serve --json-logs`` writes each log record as one JSON object.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["RequestLog", "Metrics", "JSONFormatter", "note"]

logger = logging.getLogger("beeweave.server.requests")


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            try:
                text = value.decode("ascii")
            except UnicodeDecodeError:
                break
            if 0 < len(text) <= 128 and text.isprintable() and " " not in text:
                return text
            break
    return uuid.uuid4().hex


def note(request: Any, **fields: Any) -> None:
    """Add fields (parameters, result count) to the request's log line."""
    extra = request.scope.setdefault("beeweave.log", {})
    extra.update({k: v for k, v in fields.items() if v is not None})


class RequestLog:
    """ASGI middleware: the request id, one log line per request, latency into ``metrics``."""

    def __init__(self, app: ASGIApp, metrics: Metrics | None = None) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = _request_id(scope)
        scope["beeweave.request_id"] = rid
        status = 500
        t0 = time.perf_counter()

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", rid.encode("ascii"))]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            took = time.perf_counter() - t0
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            state = scope.get("state") or {}
            tenant = state.get("tenant") if isinstance(state, dict) else None
            if self.metrics is not None:
                self.metrics.request(scope["method"], template, status, took)
            extra = scope.get("beeweave.log") or {}
            logger.info("%s %s %s %.1f ms", scope["method"], scope.get("path"), status, took * 1000,
                        extra={"request_id": rid, "tenant": tenant, "route": template, "status": status,
                               "ms": round(took * 1000, 3), **{f"p_{k}": v for k, v in extra.items()}})


class Metrics:
    """The app's Prometheus registry and its metrics."""

    def __init__(self, tenants: Callable[[], dict[str, Any]], webhooks: Any = None) -> None:
        from prometheus_client import CollectorRegistry, Histogram
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram("beeweave_http_request_duration_seconds", "HTTP request latency by route",
                                 ["method", "route", "status"], registry=self.registry,
                                 buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10))
        self.search = Histogram("beeweave_search_duration_seconds", "Search latency (engine) by tenant",
                                ["tenant"], registry=self.registry,
                                buckets=(.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5))

        class TenantCollector:
            def collect(self) -> Iterator[Any]:
                depth = GaugeMetricFamily("beeweave_ingest_queue_depth", "Events queued, not yet stored",
                                          labels=["tenant"])
                dead = GaugeMetricFamily("beeweave_dead_letters", "Events whose processing failed",
                                         labels=["tenant"])
                count = GaugeMetricFamily("beeweave_memories", "Memories stored", labels=["tenant"])
                for tenant, svc in sorted(tenants().items()):
                    try:
                        m = svc.memory
                        depth.add_metric([tenant], m.pending_events())
                        dead.add_metric([tenant], len(m.dead_letters()))
                        count.add_metric([tenant], m.count())
                    except Exception:  # a closing store: skip it in this scrape
                        logger.debug("metrics of tenant %s unavailable", tenant, exc_info=True)
                yield depth
                yield dead
                yield count

        self.registry.register(TenantCollector())

        class WebhookCollector:  # the sender's own counts, read at scrape time
            def collect(self) -> Iterator[Any]:
                delivered = CounterMetricFamily("beeweave_webhook_delivered", "Webhook notifications delivered")
                delivered.add_metric([], webhooks.delivered)
                dropped = CounterMetricFamily("beeweave_webhook_dropped", "Webhook notifications given up, by "
                                              "reason: queue_full, retries_full, attempts, shutdown",
                                              labels=["reason"])
                for reason, n in sorted(dict(webhooks.dropped).items()):
                    dropped.add_metric([reason], n)
                yield delivered
                yield dropped

        if webhooks is not None:
            self.registry.register(WebhookCollector())

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.latency.labels(method, route, str(status)).observe(seconds)

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


_STANDARD = set(vars(logging.makeLogRecord({})))


class JSONFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, and the record's extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"), "level": record.levelname,
                               "logger": record.name, "message": record.getMessage()}
        out.update({k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)
