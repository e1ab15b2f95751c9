"""Prometheus metrics of the HTTP API: requests, latency, verdicts, the bundle served.

Each app gets its own registry, so several apps in one process (tests) do not collide.
Under ``evidex serve --workers N`` every worker writes its counters to files in
``$PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's multiprocess mode, chosen when the
variable is set before ``prometheus_client`` is imported) and ``/metrics`` adds up all
workers' files; the bundle gauges are computed by the worker that answers the scrape.
"""

import datetime as dt
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client import multiprocess as prometheus_multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

PATHS = frozenset({"/retrieve", "/health", "/bundle", "/metrics", "/docs", "/openapi.json"})
"""Paths reported by name; any other path is counted as ``other`` (bounded label values)."""
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def multiprocess_dir() -> str | None:
    """The directory worker processes share their counters through, if any."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class BundleCollector(Collector):
    """Gauges about the bundle this worker serves, computed at scrape time."""

    def __init__(self, bundle: Callable[[], Any]) -> None:
        self._bundle = bundle

    def collect(self) -> Iterator[Metric]:
        manifest = self._bundle().manifest
        info = GaugeMetricFamily(
            "evidex_bundle_info", "the bundle being served (value 1)", labels=["bundle_id"]
        )
        info.add_metric([manifest.bundle_id], 1.0)
        yield info
        created = dt.datetime.fromisoformat(manifest.created_at)
        if created.tzinfo is None:
            created = created.replace(tzinfo=dt.UTC)
        age = GaugeMetricFamily(
            "evidex_bundle_age_seconds", "seconds since the served bundle was built"
        )
        age.add_metric([], max(0.0, (dt.datetime.now(dt.UTC) - created).total_seconds()))
        yield age


class Metrics:
    """The API's counters and histogram, and the ``/metrics`` text.

    Example:
        >>> metrics = Metrics(lambda: holder.bundle())
        >>> metrics.verdict("lookup", "PASS")
        >>> body, content_type = metrics.exposition()
    """

    def __init__(self, bundle: Callable[[], Any]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "evidex_http_requests",
            "HTTP requests by method, path and status code",
            ["method", "path", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "evidex_http_request_duration_seconds",
            "time from request to the last byte of the response",
            ["method", "path"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.answers = Counter(
            "evidex_answers",
            "answers by the router's operation and the admission verdict",
            ["operation", "status"],
            registry=self.registry,
        )
        self._bundle = BundleCollector(bundle)
        self.registry.register(self._bundle)

    def verdict(self, operation: str, status: str) -> None:
        self.answers.labels(operation, status).inc()

    def observe(self, method: str, path: str, status: int, seconds: float) -> None:
        label = "/static" if path.startswith("/static/") else path if path in PATHS else "other"
        self.requests.labels(method, label, str(status)).inc()
        self.latency.labels(method, label).observe(seconds)

    def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text of every worker's counters plus this worker's gauges."""
        directory = multiprocess_dir()
        if directory is None:
            return generate_latest(self.registry), CONTENT_TYPE_LATEST
        combined = CollectorRegistry()
        prometheus_multiprocess.MultiProcessCollector(combined, path=directory)
        combined.register(self._bundle)
        return generate_latest(combined), CONTENT_TYPE_LATEST


class MetricsMiddleware:
    """ASGI wrapper that counts and times every HTTP request, errors included."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def recording_send(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            self.metrics.observe(
                scope["method"], scope["path"], status, time.perf_counter() - started
            )
