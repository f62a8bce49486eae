# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Per-rollout spans (tracing.py): the tree rollout -> stage -> call, its attributes, and nothing at all
while tracing is off."""

import asyncio
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from fastapi.testclient import TestClient
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from prorl_gym.jobs.state import JOB_TASK_PREFIX
from prorl_gym.pipeline.stages import StagePool
from prorl_gym.tracing import Tracing, TracingConfig
from responses_api_agents.prorl_agent.tests.test_app import ROW, build_agent
from tests.support.fakes import FakeClient, FakeResponse, model_turns, resources

NO_JOURNAL = {"journal": {"persist": False}}


@pytest.fixture
def fake():
    fake = FakeClient.create()
    resources(fake)
    fake.route("model", "/v1/responses", model_turns(("calls", [("bash", '{"command": "ls"}')]), ("text", "1")))
    return fake


def traced_client(fake, exporter, **config):
    agent = build_agent(fake, **NO_JOURNAL, **config)
    agent.start_tracing(Tracing(TracingConfig(keep_recent=8), exporter=exporter))
    return agent, TestClient(agent.setup_webserver())


def tree(spans) -> dict:
    """name -> [child names] (in start order), and the spans by name."""
    by_id = {s.context.span_id: s for s in spans}
    children: dict[str, list[str]] = {}
    for s in sorted(spans, key=lambda s: s.start_time):
        parent = by_id.get(s.parent.span_id).name if s.parent else None
        children.setdefault(parent, []).append(s.name)
    return children


async def test_a_job_rollout_is_one_trace_rollout_stage_call_with_its_attributes(fake):
    exporter = InMemorySpanExporter()
    agent = build_agent(fake, **NO_JOURNAL)
    agent.start_tracing(Tracing(TracingConfig(keep_recent=8), exporter=exporter))
    job_id = "b1/0/0"  # the job service runs each job in a task named after it (jobs.py)
    task = asyncio.get_running_loop().create_task(agent.rollout(ROW), name=f"{JOB_TASK_PREFIX}{job_id}")
    assert (await task).reward == 1.0
    spans = exporter.get_finished_spans()
    assert len({s.context.trace_id for s in spans}) == 1, "one trace per rollout"
    children = tree(spans)
    assert children[None] == ["rollout"]
    assert children["rollout"] == ["INIT", "RUN", "EVAL"]
    assert children["INIT"] == ["seed_session"]
    assert children["RUN"] == ["policy call", "tool call", "policy call"]
    assert children["EVAL"] == ["verify"]
    by_name = {s.name: s for s in spans}
    rollout = by_name["rollout"].attributes
    assert rollout["prorl.job_id"] == job_id and rollout["prorl.environment"] == "env"
    assert rollout["prorl.host"] == "node-a" and rollout["prorl.sandbox"] == "s1"
    assert rollout["prorl.reward"] == 1.0 and rollout["prorl.attempts"] == 1
    tool = by_name["tool call"].attributes
    assert tool["prorl.tool"] == "bash" and '"ls"' in tool["prorl.tool.arguments"]
    assert by_name["policy call"].attributes["prorl.output_tokens"] == 7
    assert by_name["verify"].attributes["prorl.reward"] == 1.0
    # the dashboard reads per-call timings from the spans it keeps
    kept = agent._tracing.recent.of_job(job_id)
    assert [s["name"] for s in kept][:2] == ["rollout", "INIT"] and len(kept) == len(spans)


def test_a_failed_attempt_and_its_retry_are_spans_of_one_rollout_marked_as_errors(fake):
    answers = iter([FakeResponse(503, {"error": {"type": "sandbox_start"}}), None])

    def seed(body):
        answer = next(answers)
        return answer or FakeResponse(200, {"sandbox_id": "s2", "host": "node-b"}, {"env_session": "e2"})

    fake.route("env", "/seed_session", seed)
    fake.route("env", "/health", lambda body: {"ok": True})
    exporter = InMemorySpanExporter()
    _, client = traced_client(fake, exporter)
    record = client.post("/run", json=ROW).json()
    assert record["attempts"] == 2 and record["failure"] is None
    spans = exporter.get_finished_spans()
    inits = [s for s in spans if s.name == "INIT"]
    assert len(inits) == 2 and inits[0].attributes["prorl.failure.type"] == "init_error"
    assert not inits[0].status.is_ok and inits[1].status.is_ok
    assert tree(spans)["rollout"].count("INIT") == 2
    assert "prorl.job_id" not in next(s for s in spans if s.name == "rollout").attributes  # /run has no job


def test_tracing_off_puts_nothing_around_the_pools_or_the_peer_client(fake):
    agent = build_agent(fake, **NO_JOURNAL)
    client = TestClient(agent.setup_webserver())
    assert agent._tracing is None
    assert all(type(pool) is StagePool for pool in agent._pools.values())
    assert agent._pipeline.peers.client is fake
    assert client.post("/run", json=ROW).json()["reward"] == 1.0


def test_an_otlp_endpoint_in_the_environment_turns_tracing_on(monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    assert not TracingConfig().enabled
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    assert TracingConfig().resolved_endpoint() == "http://collector:4318/v1/traces"
    assert TracingConfig().enabled


def test_spans_are_exported_over_otlp_http_to_a_configured_endpoint(fake):
    received: list[tuple[str, str, bytes]] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, self.headers["Content-Type"], body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        agent = build_agent(fake, **NO_JOURNAL, tracing={"endpoint": f"http://127.0.0.1:{server.server_port}"})
        client = TestClient(agent.setup_webserver())
        assert agent._tracing is not None and agent._tracing.recent is None
        assert client.post("/run", json=ROW).json()["reward"] == 1.0
        agent._tracing.close()  # flushes the batch
    finally:
        server.shutdown()
    names = set()
    assert received, "nothing was exported"
    for path, content_type, body in received:
        assert path == "/v1/traces" and content_type == "application/x-protobuf"
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}["service.name"]
            assert service == "prorl-agent"
            names |= {span.name for scope in resource_spans.scope_spans for span in scope.spans}
    assert {"rollout", "INIT", "RUN", "EVAL", "seed_session", "policy call", "tool call", "verify"} <= names
