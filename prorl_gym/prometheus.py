# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Prometheus metrics of a server: one registry per server (never the process-global one), served
at GET /metrics. Names follow Prometheus conventions: `prorl_` prefix, base units (seconds,
bytes), `_total` for counters."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily

# Stage times run from milliseconds (a math INIT) to tens of minutes (a SWE rollout).
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


class ServerMetrics:
    """A server's registry and the constructors bound to it."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()

    def counter(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
        return Counter(name, doc, labels, registry=self.registry)

    def gauge(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
        return Gauge(name, doc, labels, registry=self.registry)

    def histogram(self, name: str, doc: str, labels: tuple[str, ...] = (), buckets=SECONDS) -> Histogram:
        return Histogram(name, doc, labels, registry=self.registry, buckets=buckets)

    def counter_function(self, name: str, doc: str, read: Callable[[], float]) -> None:
        """A counter whose value is read at scrape time from a number the code keeps anyway."""
        self.registry.register(_ReadCounter(name, doc, read))

    def mount(self, app: FastAPI) -> None:
        @app.get("/metrics", include_in_schema=False)
        async def metrics() -> Response:
            return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


class _ReadCounter:
    def __init__(self, name: str, doc: str, read: Callable[[], float]):
        self.name, self.doc, self.read = name.removesuffix("_total"), doc, read

    def collect(self):
        family = CounterMetricFamily(self.name, self.doc)
        family.add_metric([], self.read())
        yield family

    def describe(self):
        yield CounterMetricFamily(self.name, self.doc)
