// SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
// SPDX-License-Identifier: Apache-2.0
// The prorl-gym dashboard: polls /dashboard/api/live once a second; the rollout inspector asks
// /dashboard/api/rollouts and /dashboard/api/rollout on demand. No framework, no build step.
// A page exported by a report (prorl_gym/dashboard/export.py) sets window.PRORL_SNAPSHOT instead:
// the same charts, drawn once from it.
"use strict";

const STAGES = ["init", "run", "eval"];
const COLORS = ["#3a7bd5", "#e07b39", "#2e9e5b", "#b3261e", "#8e5bd5", "#c2a000", "#18a3a3", "#7a7a7a"];
const PAGE = 50;
let series = [];
let lastT = 0;
let searchOffset = 0;
let actions = false;

// ------------------------------------------------------------------ small DOM helpers (text only: no HTML injection)

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function num(x, digits = 2) {
  return x === null || x === undefined ? "-" : Number(x).toFixed(digits);
}

function bytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function latency(l) {
  if (!l || l.mean_s === null || l.mean_s === undefined) return "-";
  return `${num(l.recent_s ?? l.mean_s)} / ${num(l.mean_s)} s`;
}

function pct(t) {
  return t ? `${num(t.p50)} / ${num(t.p90)} / ${num(t.p99)} s` : "-";
}

// ------------------------------------------------------------------ charts (SVG lines)

function lineChart(svg, lines, yLabel = "") {
  const width = svg.clientWidth || 400, height = svg.clientHeight || 150, pad = 28;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const all = lines.flatMap((l) => l.points);
  svg.replaceChildren();
  if (!all.length) {
    svg.append(svgEl("text", { x: 10, y: 20, class: "legend" }, "no data yet"));
    return;
  }
  const t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]), t0 + 1);
  const yMax = Math.max(...all.map((p) => p[1]), 1e-9);
  const x = (t) => pad + ((t - t0) / (t1 - t0)) * (width - pad - 8);
  const y = (v) => height - 16 - (v / yMax) * (height - 30);
  svg.append(svgEl("line", { x1: pad, y1: height - 16, x2: width - 8, y2: height - 16, stroke: "#ccc" }));
  svg.append(svgEl("text", { x: 2, y: 12, class: "legend" }, `${num(yMax, yMax < 10 ? 2 : 0)}${yLabel}`));
  svg.append(svgEl("text", { x: width - 60, y: height - 2, class: "legend" }, `${Math.round(t1 - t0)} s`));
  lines.forEach((line, i) => {
    const color = COLORS[i % COLORS.length];
    const d = line.points.map((p, k) => `${k ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join("");
    svg.append(svgEl("path", { d, fill: "none", stroke: color, "stroke-width": 1.5, "data-name": line.name }));
    svg.append(svgEl("text", { x: pad + 6 + i * 110, y: 12, fill: color, class: "legend" }, line.name));
  });
}

function svgEl(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function drawCharts() {
  const pts = series;
  const throughput = [];
  for (let i = 1; i < pts.length; i++) {
    const dt = pts[i].t - pts[i - 1].t;
    if (dt > 0) throughput.push([pts[i].t, Math.max(0, pts[i].finished - pts[i - 1].finished) / dt]);
  }
  lineChart(document.getElementById("chart-throughput"), [{ name: "rollouts/s", points: throughput }]);
  lineChart(
    document.getElementById("chart-stages"),
    STAGES.map((s) => ({ name: s.toUpperCase(), points: pts.map((p) => [p.t, (p.stages[s] || {}).in_flight || 0]) })),
  );
  const keys = new Set();
  pts.forEach((p) => Object.keys(p.attempt_failures || {}).forEach((k) => keys.add(k)));
  const failureLines = [...keys].sort().map((key) => ({
    name: key,
    // per interval; a restarted agent's counters start again from 0: no negative interval
    points: pts.slice(1).map((p, i) => [p.t, Math.max(0, ((p.attempt_failures || {})[key] || 0) - ((pts[i].attempt_failures || {})[key] || 0))]),
  }));
  failureLines.push({
    name: "rollouts retried",
    points: pts.slice(1).map((p, i) => [p.t, Math.max(0, (p.retried || 0) - (pts[i].retried || 0))]),
  });
  lineChart(document.getElementById("chart-failures"), failureLines);
}

// ------------------------------------------------------------------ the live view

// A batch's straggler control in one cell: its policy and what it did, what its stragglers cost.
function straggled(s) {
  if (!s) return "-";
  const done = [s.replaced && `${s.replaced} replaced`, s.evicted && `${s.evicted} evicted`, s.waited && `${s.waited} waited`]
    .filter(Boolean).join(", ") || "none yet";
  return `${s.policy} (k ${s.k}): ${done}; lost ${num(s.policy_idle_s, 1)} GPU-s`;
}

function renderLive(live) {
  const status = live.status, counters = live.counters;
  actions = live.actions;
  document.getElementById("environment").textContent = live.environment;
  document.getElementById("finished-count").textContent = counters.finished;
  document.getElementById("usable-count").textContent = counters.usable;
  document.getElementById("failed-count").textContent = Object.values(counters.failed).reduce((a, b) => a + b, 0);
  document.getElementById("retried-count").textContent = counters.retried;
  document.getElementById("active-jobs").textContent = status.active_jobs;
  document.getElementById("journal-size").textContent = bytes((status.journal || {}).bytes);
  document.getElementById("updated").textContent = `updated ${new Date(live.now * 1000).toLocaleTimeString()}`;
  const health = status.policy_health, alert = document.getElementById("policy-down");
  alert.hidden = !(health && health.down);  // no endpoint healthy for the agent's grace period
  alert.textContent = health && health.down ? `Policy down: ${health.message}` : "";

  fill(document.querySelector("#stages tbody"), STAGES.map((s) => {
    const stage = status.stages[s] || {};
    return el("tr", { "data-stage": s },
      el("td", {}, s.toUpperCase()),
      el("td", { class: "busy" }, `${stage.in_flight ?? "-"} / ${stage.workers ?? "-"}`),
      el("td", { class: "queued" }, stage.waiting ?? "-"),
      el("td", {}, pct(status.timings[`${s}_s`])),
      el("td", {}, pct(status.timings[`${s}_queue_s`])));
  }));

  const keys = new Set([...Object.keys(counters.failed), ...Object.keys(counters.attempt_failures)]);
  fill(document.querySelector("#failures tbody"), [...keys].sort().map((k) =>
    el("tr", {}, el("td", { class: "bad" }, k), el("td", {}, counters.failed[k] || 0), el("td", {}, counters.attempt_failures[k] || 0))));

  fill(document.querySelector("#batches tbody"), live.batches.map((b) => {
    const share = b.total ? (100 * b.finished) / b.total : 0;
    const cancel = actions && !b.done ? el("button", { onclick: () => act("cancel_batch", { batch_id: b.batch_id }) }, "cancel") : "";
    return el("tr", { "data-batch": b.batch_id },
      el("td", {}, el("a", { href: "#", onclick: (e) => { e.preventDefault(); showBatch(b.batch_id); } }, b.batch_id)),
      el("td", {}, el("span", { class: "bar" }, el("i", { style: `width:${share.toFixed(1)}%` })), ` ${b.finished}/${b.total}${b.done ? " done" : ""}`),
      el("td", {}, b.usable), el("td", { class: "stragglers" }, straggled(b.stragglers)), el("td", {}, cancel));
  }));
  const st = live.stragglers || {};
  document.getElementById("stragglers").textContent = st.replaced || st.evicted || st.waited ?
    `stragglers: ${st.replaced} replaced, ${st.evicted} evicted, ${st.waited} waited for; ` +
    `GPU-seconds lost ${num(st.policy_idle_s, 1)} over ${num(st.wait_s, 1)} s of waiting; time saved ~${num(st.time_saved_s, 1)} s` : "";

  const endpoints = live.endpoints;
  const endpointRows = endpoints && endpoints.endpoints ? endpoints.endpoints.map((e) =>
    el("tr", {}, el("td", {}, e.url), el("td", { class: e.healthy ? "good" : "bad" }, e.healthy ? "yes" : "no"),
      el("td", {}, e.in_flight), el("td", { class: "latency" }, latency(e.latency)), el("td", {}, e.sessions), el("td", {}, e.failures))) :
    [el("tr", {}, el("td", { colspan: 6, class: "muted" }, endpoints && endpoints.error ? endpoints.error : "the model server does not list endpoints"))];
  fill(document.querySelector("#endpoints tbody"), endpointRows);
  document.getElementById("policy-latency").textContent =
    `policy time per rollout p50 / p90 / p99: ${pct(status.timings.policy_s)}`;

  const hosts = live.hosts;
  const hostRows = hosts && hosts.hosts ? hosts.hosts.map((h) => {
    const drain = actions ? el("button", { onclick: () => act("drain_host", { host: h.name, draining: !h.draining }) }, h.draining ? "resume" : "drain") : "";
    return el("tr", {}, el("td", {}, h.name), el("td", {}, h.live), el("td", {}, h.capacity ?? "-"),
      el("td", { class: h.healthy === false ? "bad" : "good" }, h.healthy === false ? "no" : "yes"),
      el("td", {}, h.draining ? "drained" : "-"), el("td", {}, drain));
  }) : [el("tr", {}, el("td", { colspan: 6, class: "muted" }, hosts && hosts.error ? hosts.error : "no host status"))];
  fill(document.querySelector("#hosts tbody"), hostRows);
}

async function poll() {
  try {
    const response = await fetch(`/dashboard/api/live?since=${lastT}`);
    if (response.ok) {
      const live = await response.json();
      series = series.concat(live.series).slice(-900);
      if (series.length) lastT = series[series.length - 1].t;
      renderLive(live);
      drawCharts();
    }
  } catch (err) {
    document.getElementById("updated").textContent = `not reachable: ${err}`;
  }
}

async function act(name, body) {
  let token = sessionStorage.getItem("prorl-action-token") || "";
  if (!confirm(`${name.replace("_", " ")} ${JSON.stringify(body)}?`)) return;
  let response = await fetch(`/dashboard/api/actions/${name}`, {
    method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` }, body: JSON.stringify(body),
  });
  if (response.status === 401) {
    token = prompt("action token") || "";
    sessionStorage.setItem("prorl-action-token", token);
    response = await fetch(`/dashboard/api/actions/${name}`, {
      method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` }, body: JSON.stringify(body),
    });
  }
  if (!response.ok) alert(`${name}: ${response.status} ${await response.text()}`);
}

// ------------------------------------------------------------------ the rollout inspector

function showView(name) {
  document.querySelectorAll("nav button").forEach((b) => b.classList.toggle("active", b.dataset.view === name));
  document.getElementById("view-live").hidden = name !== "live";
  document.getElementById("view-inspect").hidden = name !== "inspect";
}

function showBatch(batchId) {
  showView("inspect");
  const form = document.getElementById("search-form");
  form.batch.value = batchId;
  searchOffset = 0;
  search();
}

function queryString(extra = {}) {
  const form = document.getElementById("search-form");
  const params = new URLSearchParams();
  for (const [key, value] of new FormData(form).entries()) if (value !== "") params.set(key, value);
  for (const [key, value] of Object.entries(extra)) params.set(key, value);
  return params.toString();
}

async function search() {
  const response = await fetch(`/dashboard/api/rollouts?${queryString({ offset: searchOffset, limit: PAGE })}`);
  const body = await response.json();
  if (!response.ok) {
    document.getElementById("search-count").textContent = `search refused: ${JSON.stringify(body.detail)}`;
    return;
  }
  const select = document.getElementById("failure-select");
  const known = new Set([...select.options].map((o) => o.value));
  for (const key of Object.keys(body.failure_types)) {
    const type = key.split("/")[1];
    if (!known.has(type)) { select.append(el("option", { value: type }, type)); known.add(type); }
  }
  document.getElementById("search-count").textContent =
    `${body.total} matching of ${body.indexed} indexed; showing ${body.total ? body.offset + 1 : 0}-${body.offset + body.items.length}`;
  document.getElementById("page").textContent = `page ${Math.floor(body.offset / PAGE) + 1} of ${Math.max(1, Math.ceil(body.total / PAGE))}`;
  document.getElementById("prev").disabled = body.offset === 0;
  document.getElementById("next").disabled = body.offset + body.items.length >= body.total;
  fill(document.querySelector("#results tbody"), body.items.map((s) =>
    el("tr", { "data-job": s.job_id, onclick: () => openRollout(s.job_id) },
      el("td", {}, s.job_id), el("td", {}, s.batch_id), el("td", {}, `${s.row}/${s.sample}`),
      el("td", { class: s.reward > 0 ? "good" : "" }, s.reward === null ? "-" : num(s.reward)),
      el("td", { class: s.failure_type ? "bad" : "" }, s.failure_type ? `${s.failure_stage || "-"}/${s.failure_type}` : ""),
      el("td", {}, s.attempts), el("td", {}, s.turns), el("td", {}, s.host || "-"), el("td", {}, `${num(s.total_s)} s`),
      el("td", {}, el("button", { type: "button", class: "compare", onclick: (e) => { e.stopPropagation(); compare(s); } }, "compare")))));
}

async function fetchRollout(jobId) {
  const response = await fetch(`/dashboard/api/rollout?job_id=${encodeURIComponent(jobId)}`);
  if (!response.ok) throw new Error(`${response.status} ${await response.text()}`);
  return response.json();
}

function kv(pairs) {
  return el("dl", { class: "kv" }, ...pairs.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function renderRollout(r) {
  const rec = r.record;
  const box = el("div", { class: "rollout", "data-job": r.job_id });
  box.append(el("h3", {}, r.job_id));
  if (r.task) box.append(el("div", { class: "message task" }, r.task));
  const timings = rec.timings || {};
  box.append(kv([
    ["reward", rec.failure ? "- (failed)" : num(rec.reward)],
    ["stop reason", rec.stop_reason || "-"],
    ["attempts", rec.attempts],
    ["host", rec.host || "-"],
    ["timings", Object.entries(timings).map(([k, v]) => `${k} ${num(v, 3)}`).join(", ")],
  ]));
  if (rec.failure) {
    box.append(el("div", { class: "failure" }, el("b", {}, `${rec.failure.stage || "-"}/${rec.failure.type}: `), rec.failure.message));
  }
  for (const [n, f] of (rec.attempt_failures || []).entries()) {
    box.append(el("div", { class: "failure attempt" }, el("b", {}, `attempt ${n + 1} ${f.stage || "-"}/${f.type}: `), f.message));
  }
  const verifier = Object.entries(r.verifier || {}).filter(([k]) => !["response"].includes(k));
  if (verifier.length) {
    box.append(el("h4", {}, "verifier and row fields"), kv(verifier.map(([k, v]) => [k, typeof v === "object" ? JSON.stringify(v) : String(v)])));
  }
  if (!r.spans.length) box.append(el("p", { class: "muted" }, "per-call timings: the agent keeps none (tracing.keep_recent: 0, or this rollout is older)"));
  for (const turn of r.turns) {
    const t = el("div", { class: "turn", "data-turn": turn.turn });
    t.append(el("h4", {}, `turn ${turn.turn}`, turn.tokens !== null ? ` · ${turn.tokens} tokens` : "", turn.policy_s !== null ? ` · policy ${num(turn.policy_s, 3)} s` : ""));
    for (const text of turn.reasoning) t.append(el("div", { class: "message reasoning muted" }, text));
    for (const text of turn.messages) t.append(el("div", { class: "message" }, text));
    for (const call of turn.tool_calls) {
      const c = el("div", { class: "call" });
      c.append(el("b", {}, `${call.name}`), call.duration_s !== null ? ` (${num(call.duration_s, 3)} s)` : "");
      c.append(el("pre", { class: "arguments" }, call.arguments));
      if (call.truncated) c.append(el("span", { class: "truncated-mark" }, "output truncated"));
      c.append(el("pre", { class: "output" }, call.output === null ? "(no output)" : call.output));
      t.append(c);
    }
    box.append(t);
  }
  if (!r.turns.length) box.append(el("p", { class: "muted" }, "no transcript (the rollout ended before the policy answered)"));
  return box;
}

async function openRollout(jobId) {
  const detail = document.getElementById("detail");
  detail.hidden = false;
  try {
    detail.replaceChildren(renderRollout(await fetchRollout(jobId)));
  } catch (err) {
    detail.replaceChildren(el("p", { class: "bad" }, String(err)));
  }
  detail.scrollIntoView();
}

async function compare(summary) {
  const params = new URLSearchParams({ batch: summary.batch_id, row: summary.row, limit: 500 });
  const body = await (await fetch(`/dashboard/api/rollouts?${params}`)).json();
  // another sample, one that scored differently if there is one (what set them apart is the question)
  const others = body.items.filter((s) => s.job_id !== summary.job_id);
  const other = others.find((s) => s.reward !== summary.reward) || others[0];
  const section = document.getElementById("compare");
  const panes = section.querySelector(".panes");
  section.hidden = false;
  if (!other) {
    panes.replaceChildren(el("p", { class: "muted" }, "no other finished sample of this task in the batch"));
    return;
  }
  const [a, b] = await Promise.all([fetchRollout(summary.job_id), fetchRollout(other.job_id)]);
  panes.replaceChildren(el("div", { class: "pane" }, renderRollout(a)), el("div", { class: "pane" }, renderRollout(b)));
  section.scrollIntoView();
}

// ------------------------------------------------------------------ start

function start() {
  document.querySelectorAll("nav button").forEach((b) => b.addEventListener("click", () => showView(b.dataset.view)));
  if (window.PRORL_SNAPSHOT) {  // an exported report: draw once, nothing to ask
    document.querySelector("nav").hidden = true;
    series = window.PRORL_SNAPSHOT.series || [];
    renderLive(window.PRORL_SNAPSHOT);
    drawCharts();
    return;
  }
  document.getElementById("search-form").addEventListener("submit", (e) => { e.preventDefault(); searchOffset = 0; search(); });
  document.getElementById("prev").addEventListener("click", () => { searchOffset = Math.max(0, searchOffset - PAGE); search(); });
  document.getElementById("next").addEventListener("click", () => { searchOffset += PAGE; search(); });
  poll();
  setInterval(poll, 1000);
}

start();
