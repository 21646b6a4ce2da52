// trainjob-operator ui: plain JS, no build step. Live updates come from server-sent events fed by watches.
"use strict";

const SYMBOL = { Running: "▶", Restarting: "↻", Stalled: "⏸", Complete: "✔", Failed: "✖", Error: "⚠", Suspended: "‖", Pending: "…" };
const rows = new Map();
let listSource = null, detailSource = null, logSource = null, current = null, lastDetail = null, listLoaded = false;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = v; else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}

function age(stamp) {
  if (!stamp) return "";
  const s = Math.max(0, (Date.now() - Date.parse(stamp)) / 1000);
  if (s < 60) return `${Math.floor(s)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600)}h`;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "";
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m${seconds % 60 ? ` ${seconds % 60}s` : ""}`;
  return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
}

function stateBadge(state, reason, message) {
  // The reason (Unschedulable, CrashLoopBackOff, ...) beside the state, its message on hover and for screen readers.
  return el("span", { class: `state state-${state}`, title: message || null },
    `${SYMBOL[state] || "•"} ${state}${reason ? ` · ${reason}` : ""}`);
}

function progressCell(row) {
  if (row.progress === null || row.progress === undefined) return el("span", { class: "muted" }, "not reported");
  const left = row.remainingSeconds !== null && row.remainingSeconds !== undefined
    ? ` · ${duration(row.remainingSeconds)} left` : "";
  return el("span", { class: "bar" },
    el("progress", { max: "100", value: String(row.progress), "aria-label": `${row.name} progress` }),
    el("span", { class: "pct" }, `${row.progress}%${left}`));
}

function table(headers, items, cells, caption, none = "None.") {
  if (!items || !items.length) return el("p", { class: "muted" }, none);
  return el("table", {},
    caption ? el("caption", { class: "visually-hidden" }, caption) : null,
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, items.map((item) => el("tr", {}, cells(item).map((c) => el("td", {}, c))))));
}

function problem(text) {
  const box = document.getElementById("problem");
  box.hidden = !text;
  box.textContent = text || "";
}

function setLive(text) { document.getElementById("live").textContent = text; }

// --- the list --------------------------------------------------------------------------------------------

function key(row) { return `${row.namespace}/${row.name}`; }

function renderList() {
  const filter = document.getElementById("filter").value.trim().toLowerCase();
  const body = document.querySelector("#jobs tbody");
  const all = [...rows.values()].sort((a, b) => (b.created || "").localeCompare(a.created || "") || key(a).localeCompare(key(b)));
  const shown = all.filter((r) => !filter || `${r.namespace} ${r.name} ${r.state}`.toLowerCase().includes(filter));
  body.replaceChildren(...shown.map((r) => el("tr", { "data-key": key(r) },
    el("td", {}, el("a", { href: `#/${encodeURIComponent(r.namespace)}/${encodeURIComponent(r.name)}` }, r.name)),
    el("td", {}, r.namespace),
    el("td", {}, stateBadge(r.state, r.reason, r.message)),
    el("td", { class: "num" }, nodesCell(r)),
    el("td", { class: "num" }, String(r.restarts)),
    el("td", {}, progressCell(r)),
    el("td", { class: "num", title: r.created || "" }, age(r.created)))));
  document.getElementById("count").textContent = listLoaded ? `(${shown.length}${shown.length !== all.length ? ` of ${all.length}` : ""})` : "";
  document.getElementById("loading").hidden = listLoaded;
  document.getElementById("empty").hidden = !listLoaded || all.length > 0;
}

async function loadList() {
  const response = await fetch("/api/trainjobs");
  const data = await response.json();
  rows.clear();
  for (const row of data.rows) rows.set(key(row), row);
  listLoaded = true;
  problem(data.error ? `Cannot list TrainJobs: ${data.error}` : "");
  renderList();
}

function connectList() {
  if (listSource) return;
  listSource = new EventSource("/api/stream");
  listSource.onopen = () => { setLive("live"); loadList(); };
  listSource.onerror = () => setLive("reconnecting…");
  listSource.onmessage = (event) => {
    const msg = JSON.parse(event.data);
    if (msg.type === "row") rows.set(key(msg.row), msg.row);
    else if (msg.type === "deleted") rows.delete(`${msg.namespace}/${msg.name}`);
    else return;
    if (!current) renderList();
  };
}

// --- one TrainJob ----------------------------------------------------------------------------------------

function chart(history) {
  const box = document.getElementById("chart");
  const names = [...new Set(history.flatMap((p) => Object.keys(p.metrics || {})))];
  const series = [];
  if (history.some((p) => p.progress !== null && p.progress !== undefined)) {
    series.push({ name: "progress (%)", points: history.filter((p) => p.progress !== null && p.progress !== undefined).map((p) => [Date.parse(p.time), p.progress]) });
  }
  for (const name of names) {
    series.push({ name, points: history.filter((p) => p.metrics && name in p.metrics).map((p) => [Date.parse(p.time), p.metrics[name]]) });
  }
  if (!series.length) {
    box.replaceChildren(el("p", { class: "muted" }, "No numeric metrics reported yet (trainer pods report with kubeflow.trainer.update_trainjob_status)."));
    return;
  }
  const W = 340, H = 150, P = 34;
  const t0 = Math.min(...history.map((p) => Date.parse(p.time))), t1 = Math.max(...history.map((p) => Date.parse(p.time)));
  const charts = series.map((s) => {
    const ys = s.points.map((p) => p[1]);
    const lo = Math.min(...ys), hi = Math.max(...ys);
    const x = (t) => P + (t1 === t0 ? (W - 2 * P) / 2 : ((t - t0) / (t1 - t0)) * (W - 2 * P));
    const y = (v) => H - P + 10 - (hi === lo ? (H - P) / 2 : ((v - lo) / (hi - lo)) * (H - P - 10));
    const last = ys[ys.length - 1];
    const graphic = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
      "aria-label": `${s.name}: ${s.points.length} points, from ${ys[0]} to ${last} (min ${lo}, max ${hi})` });
    const title = svg("title", {}); title.textContent = s.name; graphic.append(title);
    graphic.append(svg("line", { x1: P, y1: H - P + 10, x2: W - P, y2: H - P + 10, stroke: "#8c959f" }));
    graphic.append(svg("line", { x1: P, y1: 10, x2: P, y2: H - P + 10, stroke: "#8c959f" }));
    for (const [v, at] of [[hi, 14], [lo, H - P + 10]]) {
      const label = svg("text", { x: 2, y: at }); label.textContent = String(+v.toPrecision(4)); graphic.append(label);
    }
    const clock = (t) => new Date(t).toISOString().slice(11, 19);
    const spanLabel = svg("text", { x: P, y: H - 6 }); spanLabel.textContent = `${clock(t0)} → ${clock(t1)} UTC`;
    graphic.append(spanLabel);
    graphic.append(svg("polyline", { fill: "none", stroke: "#0550ae", "stroke-width": 2,
      points: s.points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ") }));
    for (const p of s.points) graphic.append(svg("circle", { cx: x(p[0]).toFixed(1), cy: y(p[1]).toFixed(1), r: 2.5, fill: "#1b1f24" }));
    return el("figure", { class: "metric" }, el("figcaption", {}, `${s.name} — latest ${last}`), graphic);
  });
  const data = el("details", {}, el("summary", {}, "Data points as a table"),
    table(["time", "progress", ...names], history, (p) => [p.time, p.progress ?? "", ...names.map((n) => p.metrics?.[n] ?? "")]));
  box.replaceChildren(el("div", { class: "charts" }, charts), data);
}

// An elastic TrainJob shows the nodes running of the size it is set to (docs/elastic.md).
function nodesCell(r) {
  return r.elastic ? `${r.elastic.currentNodes ?? 0}/${r.elastic.desiredNodes ?? 0}` : String(r.nodes ?? "");
}

function elasticText(e) {
  const scaling = e.scaling === "Unavailable" ? `; scaling unavailable: ${e.message || ""}` : "";
  return `${e.currentNodes ?? 0} running of ${e.desiredNodes ?? 0} (min ${e.minNodes}, max ${e.maxNodes}), ${e.resizes ?? 0} resizes${scaling}`;
}

function seconds(n) {
  if (n === null || n === undefined) return "";
  const h = Math.floor(n / 3600), m = Math.floor((n % 3600) / 60), s = n % 60;
  return h ? `${h}h ${m}m` : m ? `${m}m ${s}s` : `${s}s`;
}

function goodputTimeline(g) {
  // Where the TrainJob's time went (status.goodput, issue 35): one bar, a segment per phase, the running one marked.
  if (!g) return el("p", { class: "muted" }, "not accounted (no status.goodput)");
  const bar = el("div", { class: "timeline", role: "img",
    "aria-label": g.segments.map((s) => `${s.phase} ${seconds(s.seconds)}`).join(", ") },
    ...g.segments.map((s) => {
      const seg = el("span", { class: `seg seg-${s.phase.toLowerCase()}${s.running ? " running" : ""}`,
        title: `${s.phase}: ${seconds(s.seconds)} (${s.share}%)` });
      seg.style.width = `${Math.max(s.share, 0.5)}%`;  // CSSOM: the CSP (style-src 'self') drops style attributes
      return seg;
    }));
  const facts = [`goodput ${g.percent ?? "–"}%`, `now ${g.phase} since ${g.since}`,
    ...(g.firstProgressSeconds !== null && g.firstProgressSeconds !== undefined ? [`first progress after ${seconds(g.firstProgressSeconds)}`] : []),
    ...(g.stalls ? [`${g.stalls} stall${g.stalls > 1 ? "s" : ""}`] : []),
    ...(g.accelerators ? [`${g.accelerators} accelerators, ${seconds(g.idleAcceleratorSeconds || 0)} of accelerator time not training`] : [])];
  return el("div", {}, bar, table(["Phase", "Time", "Share"], g.segments,
    (s) => [s.running ? `${s.phase} (now)` : s.phase, seconds(s.seconds), `${s.share}%`], "goodput by phase"),
    el("p", { class: "muted" }, facts.join(" · ")));
}

function renderDetail(d) {
  lastDetail = d;
  const r = d.row;
  document.getElementById("detail-body").hidden = false;
  document.getElementById("detail-title").replaceChildren(`${r.namespace}/${r.name} `, stateBadge(r.state, r.reason));
  document.title = `${r.name} · TrainJobs`;
  const summary = [["Runtime", r.runtime], ...(r.reason ? [["Why", `${r.reason}: ${r.message || ""}`]] : []),
    ["Nodes", nodesCell(r)], ...(r.elastic ? [["Elastic", elasticText(r.elastic)]] : []), ["Restarts", String(r.restarts)],
    ["Age", age(r.created)], ["Created", r.created || ""], ["Suspended", r.suspended ? "yes" : "no"]];
  document.getElementById("summary").replaceChildren(...summary.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  // replaceChildren writes a null as the text "null": only the parts that exist.
  document.getElementById("progress").replaceChildren(...[progressCell(r),
    r.lastUpdated ? el("p", { class: "muted" }, `last report ${r.lastUpdated}`) : null,
    table(["Metric", "Latest value"], r.metrics, (m) => [m.name, m.value], "latest reported metrics")].filter((n) => n));
  document.getElementById("goodput").replaceChildren(goodputTimeline(d.goodput));
  chart(d.history || []);
  document.getElementById("conditions").replaceChildren(table(["Type", "Status", "Reason", "Message", "Since"], d.conditions,
    (c) => [c.type, c.status, c.reason || "", c.message || "", c.lastTransitionTime || ""], "conditions"));
  const js = d.jobset;
  document.getElementById("jobset").replaceChildren(js
    ? el("div", {}, el("p", {}, `JobSet ${js.name} · ${js.suspend ? "suspended" : "not suspended"} · restarts ${js.restarts}` +
        (js.terminalState ? ` · ${js.terminalState}` : "")),
      table(["Replicated job", "Pods", "Running", "Ready", "Pending", "Succeeded", "Failed", "Jobs active / done / failed"], js.replicatedJobs,
        (j) => [j.name, j.pods, j.podsRunning, j.podsReady, j.podsPending, j.podsSucceeded, j.podsFailed,
          `${j.jobsActive} / ${j.jobsSucceeded} / ${j.jobsFailed}`], "replicated jobs: pods and Jobs"))
    : el("p", { class: "muted" }, d.jobsetNote || "No JobSet."));
  document.getElementById("pods").replaceChildren(table(["Pod", "Job", "Index", "Phase", "Ready", "Restarts", "Node", "Log"], d.pods,
    (p) => [p.name, p.replicatedJob || "", p.index ?? "", p.phase, `${p.ready}/${p.containers.length}`, String(p.restarts), p.node || "",
      el("button", { type: "button", "data-pod": p.name, "aria-label": `Show the log of ${p.name}` }, "Log")], "pods", "No pods."));
  const select = document.getElementById("log-pod");
  const chosen = select.value;
  select.replaceChildren(...d.pods.map((p) => el("option", { value: p.name, selected: p.name === chosen }, p.name)));
  if (!chosen && d.pods.length) updateContainers();
  document.getElementById("events").replaceChildren(table(["Time", "Type", "Reason", "Object", "Message", "Count"], d.events,
    (e) => [e.time || "", e.type === "Warning" ? "⚠ Warning" : e.type, e.reason, e.object, e.message, String(e.count)], "events"));
  document.getElementById("snapshot").textContent = d.snapshot || "(no runtime snapshot ConfigMap)";
  problem((d.problems || []).length ? `Some parts could not be read: ${d.problems.join("; ")}` : "");
}

function updateContainers() {
  const pod = (lastDetail?.pods || []).find((p) => p.name === document.getElementById("log-pod").value);
  const select = document.getElementById("log-container");
  const chosen = select.value;
  select.replaceChildren(...(pod?.containers || []).map((c) => el("option", { value: c, selected: c === chosen }, c)));
}

async function showLog() {
  const pod = document.getElementById("log-pod").value;
  const container = document.getElementById("log-container").value;
  const out = document.getElementById("log");
  if (logSource) { logSource.close(); logSource = null; }
  if (!pod || !current) return;
  const url = `/api/pods/${encodeURIComponent(current.namespace)}/${encodeURIComponent(pod)}/log?container=${encodeURIComponent(container)}`;
  if (document.getElementById("log-follow").checked) {
    out.textContent = "";
    logSource = new EventSource(`${url}&follow=1`);
    logSource.onmessage = (event) => {
      const msg = JSON.parse(event.data);
      if (msg.type === "line") { out.textContent += `${msg.text}\n`; out.scrollTop = out.scrollHeight; }
      if (msg.type === "end") { logSource.close(); logSource = null; }
    };
  } else {
    out.textContent = await (await fetch(url)).text() || "(empty log)";
  }
}

function clearDetail(title) {
  // Nothing of the TrainJob shown before stays on the page while another one loads or when it does not exist.
  lastDetail = null;
  document.getElementById("detail-body").hidden = true;
  document.getElementById("detail-title").replaceChildren(title);
  for (const id of ["summary", "progress", "goodput", "chart", "conditions", "jobset", "pods", "events", "log-container"]) {
    document.getElementById(id).replaceChildren();
  }
  document.getElementById("snapshot").textContent = "";
}

function openDetail(namespace, name) {
  current = { namespace, name };
  document.getElementById("list-view").hidden = true;
  document.getElementById("detail-view").hidden = false;
  document.getElementById("log").textContent = "";
  document.getElementById("log-pod").replaceChildren();
  clearDetail(`${namespace}/${name} · loading…`);
  problem("");
  if (detailSource) detailSource.close();
  detailSource = new EventSource(`/api/trainjobs/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}/stream`);
  detailSource.onmessage = (event) => {
    const msg = JSON.parse(event.data);
    if (msg.type !== "detail") return;
    if (!msg.detail) {
      clearDetail(`${namespace}/${name}`);
      problem(`TrainJob ${namespace}/${name} not found`);
      return;
    }
    renderDetail(msg.detail);
  };
  document.getElementById("detail-title").focus?.();
}

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (logSource) { logSource.close(); logSource = null; }
  if (parts.length === 2) {
    openDetail(parts[0], parts[1]);
  } else {
    current = null;
    if (detailSource) { detailSource.close(); detailSource = null; }
    document.getElementById("detail-view").hidden = true;
    document.getElementById("list-view").hidden = false;
    document.title = "TrainJobs · trainjob-operator";
    problem("");
    renderList();
  }
  document.getElementById("main").focus({ preventScroll: true });
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("filter").addEventListener("input", renderList);
  document.getElementById("log-pod").addEventListener("change", updateContainers);
  document.getElementById("log-refresh").addEventListener("click", showLog);
  document.getElementById("log-follow").addEventListener("change", showLog);
  document.getElementById("pods").addEventListener("click", (event) => {
    const pod = event.target.closest("button[data-pod]")?.getAttribute("data-pod");
    if (!pod) return;
    document.getElementById("log-pod").value = pod;
    updateContainers();
    showLog();
    document.getElementById("log").focus();
  });
  window.addEventListener("hashchange", route);
  setInterval(() => { if (!current) renderList(); }, 30000); // ages only: no request is made
  connectList();
  route();
});
