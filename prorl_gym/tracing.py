# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Per-rollout OpenTelemetry traces: rollout -> stage -> policy call / tool call / verify.

Off unless configured, and then free: nothing here is imported by the hot path, and OpenTelemetry
itself is imported only when a `Tracing` is built (the agent builds one only when `tracing.endpoint`,
OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT or `tracing.keep_recent` is set). With tracing off, the agent's
only cost is one `is None` check per rollout: no span objects, no wrappers around its peers or pools.

Each agent has its own TracerProvider (never the process-global one), so several agents in one
process (tests) and a host application's own tracing do not mix. Spans go to an OTLP/HTTP collector
(batched, off the event loop) and/or to a bounded in-memory store the dashboard reads per-call
timings from (`recent`), and to any extra exporter a test passes in (collected synchronously).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

from pydantic import Field

from prorl_gym.config import StrictConfig

# Span attribute names (OpenTelemetry style: namespaced, dotted).
JOB_ID = "prorl.job_id"
ENVIRONMENT = "prorl.environment"
HOST = "prorl.host"
SANDBOX = "prorl.sandbox"
STAGE = "prorl.stage"
TOOL = "prorl.tool"
ARGUMENTS = "prorl.tool.arguments"
OUTPUT_TOKENS = "prorl.output_tokens"
FAILURE = "prorl.failure.type"
REWARD = "prorl.reward"
ATTEMPTS = "prorl.attempts"
STATUS = "http.response.status_code"
MAX_ATTRIBUTE_CHARS = 1000  # tool arguments can be whole files: an attribute keeps their start


class TracingConfig(StrictConfig):
    """The agent's `tracing:` block."""

    # OTLP/HTTP collector (http://host:4318, or its /v1/traces URL); default: the standard OTEL_* variables
    endpoint: str | None = None
    service_name: str = "prorl-agent"
    # Spans of this many recent rollouts kept in memory for the dashboard's per-call timings (0: none)
    keep_recent: int = Field(0, ge=0)

    def resolved_endpoint(self) -> str | None:
        """The collector's traces URL (its /v1/traces), if any is configured."""
        endpoint = (
            self.endpoint
            or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        )
        if not endpoint:
            return None
        endpoint = endpoint.rstrip("/")
        return endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"

    @property
    def enabled(self) -> bool:
        return bool(self.resolved_endpoint() or self.keep_recent)


class RecentSpans:
    """Finished spans of the last `keep` traces, by job id (fed by a span processor; bounded)."""

    def __init__(self, keep: int):
        self.keep = keep
        self._by_trace: OrderedDict[int, list[dict]] = OrderedDict()
        self._job_trace: OrderedDict[str, int] = OrderedDict()

    def add(self, span) -> None:
        trace_id = span.context.trace_id
        spans = self._by_trace.get(trace_id)
        if spans is None:
            spans = self._by_trace[trace_id] = []
            while len(self._by_trace) > self.keep:
                self._by_trace.popitem(last=False)
        spans.append(
            {
                "name": span.name,
                "span_id": f"{span.context.span_id:016x}",
                "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
                "start_ns": span.start_time,
                "duration_s": (span.end_time - span.start_time) / 1e9,
                "attributes": dict(span.attributes or {}),
            }
        )
        if span.parent is None and (job_id := (span.attributes or {}).get(JOB_ID)):
            self._job_trace[job_id] = trace_id
            while len(self._job_trace) > self.keep:
                self._job_trace.popitem(last=False)

    def of_job(self, job_id: str) -> list[dict]:
        """The spans of a job's last traced rollout, in start order (empty if not kept)."""
        trace_id = self._job_trace.get(job_id)
        return sorted(self._by_trace.get(trace_id, []), key=lambda s: s["start_ns"]) if trace_id else []


class Tracing:
    """An agent's tracer: its own provider, its exporters; `close()` flushes them."""

    def __init__(self, config: TracingConfig, exporter: Any = None):
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        self.provider = TracerProvider(resource=Resource.create({"service.name": config.service_name}))
        if endpoint := config.resolved_endpoint():
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            # Batched: the export (HTTP) runs on the processor's own thread, never on the event loop.
            self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        self.recent = RecentSpans(config.keep_recent) if config.keep_recent else None
        if self.recent is not None:
            self.provider.add_span_processor(_Keep(self.recent))
        if exporter is not None:  # a test's in-process exporter
            self.provider.add_span_processor(SimpleSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer("prorl_gym")

    def span(self, name: str, attributes: dict[str, Any] | None = None):
        """A context manager: the span, current (its children nest under it) until the block ends."""
        return self.tracer.start_as_current_span(name, attributes=attributes)

    def close(self) -> None:
        self.provider.shutdown()


def _Keep(recent: RecentSpans):  # a class, built here so that OpenTelemetry is imported only when tracing is on
    from opentelemetry.sdk.trace import SpanProcessor

    class Keep(SpanProcessor):
        def on_end(self, span) -> None:
            recent.add(span)

    return Keep()


def clip(text: str) -> str:
    return text if len(text) <= MAX_ATTRIBUTE_CHARS else text[:MAX_ATTRIBUTE_CHARS] + "..."


def set_error(span, message: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, message[:MAX_ATTRIBUTE_CHARS]))
