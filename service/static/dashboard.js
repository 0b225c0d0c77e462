// Draws /dashboard/data with Chart.js (vendored); every figure comes computed from the rollout store, the page only
// draws it. Filters live in the page's query string (shareable), an opened rollout in its hash (#rollout=<id>).
// Text from rollouts (programs, outputs, messages) is attacker-controlled: it only ever goes in as textContent.
// Sets document.body.dataset.ready when everything is drawn (the browser test waits on it).
"use strict";

// Status colours: green passes, reds and oranges a program's own failures, grey and amber what is not the program's
// verdict (our fault, a request we refused).
const STATUS_COLOURS = {
  passed: "#2e9e5b", failed: "#d64541", runtime_error: "#e0672a", syntax_error: "#a8326e", timeout: "#f0a030",
  memory_limit: "#b5533c", output_limit: "#8e5ea2", patch_error: "#c2185b", invalid_input: "#d4b106",
  infra_error: "#8c939d",
};
const statusColour = (s) => STATUS_COLOURS[s] || "#5d6675";
const PASS = "#2e9e5b", REWARD = "#4a78d8", OTHER = "#d64541";
const LATENCY = { p50_ms: "#4a78d8", p90_ms: "#e0a030", p99_ms: "#d64541" };
const FILTERS = ["language", "profile", "status", "kind"];

const fmt = (v, digits = 3) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
const pct = (v) => (v === null || v === undefined ? "–" : `${(100 * v).toFixed(1)}%`);
const ms = (v) => (v === null || v === undefined ? "–" : v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${v.toFixed(1)} ms`);
// A time, as precisely as a chart whose steps are `step` seconds needs it.
const when = (t, step) => {
  const d = new Date(t * 1000);
  return step >= 86400 ? d.toLocaleDateString() :
    step >= 3600 ? d.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" }) :
    step >= 60 ? d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }) :
    d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
};
const COUNTS = { beginAtZero: true, ticks: { precision: 0 } };  // an axis of counts: whole numbers
const $ = (id) => document.getElementById(id);
const charts = {};

// -- filters: the query string is the state

function params() { return new URLSearchParams(location.search); }

function dataQuery() {
  const p = params(), q = new URLSearchParams();
  for (const f of ["language", "profile", "kind"]) if (p.get(f)) q.set(f, p.get(f));
  if (p.get("status") === "!passed") q.set("failed", "true"); else if (p.get("status")) q.set("status", p.get("status"));
  if (p.get("since")) q.set("since", p.get("since"));
  if (p.get("until")) q.set("until", p.get("until"));
  if (p.get("range") && !p.get("since")) q.set("since", String(Date.now() / 1000 - Number(p.get("range"))));
  return q.toString();
}

function setFilters(changes) {
  const p = params();
  for (const [k, v] of Object.entries(changes)) { if (v === null || v === "") p.delete(k); else p.set(k, v); }
  history.pushState(null, "", `${location.pathname}${p.toString() ? "?" + p : ""}${location.hash}`);
  load().catch(fail);
}

function fillSelect(name, values, extra = []) {
  const select = document.querySelector(`#filters select[name=${name}]`);
  const keep = [...select.options].filter((o) => o.value === "" || extra.includes(o.value));
  select.replaceChildren(...keep);
  for (const v of values) select.add(new Option(v, v));
  const chosen = params().get(name) || "";
  if (chosen && ![...select.options].some((o) => o.value === chosen)) select.add(new Option(chosen, chosen));
  select.value = chosen;
}

function showFilters(data) {
  for (const f of FILTERS) fillSelect(f, data.choices[f], f === "status" ? ["!passed"] : []);
  const p = params(), range = document.querySelector("#filters select[name=range]");
  const custom = range.querySelector("option[value=custom]");
  custom.hidden = !p.get("since");
  range.value = p.get("since") ? "custom" : p.get("range") || "";
  $("range-note").textContent = p.get("since") ?
    `${new Date(Number(p.get("since")) * 1000).toLocaleString()} – ${p.get("until") ?
      new Date(Number(p.get("until")) * 1000).toLocaleString() : "now"}` : "";
}

// -- charts

function draw(id, config) {
  if (charts[id]) charts[id].destroy();
  config.options = { animation: false, responsive: true, maintainAspectRatio: false, ...config.options };
  charts[id] = new Chart($(id), config);
  return charts[id];
}

function clickIndex(onIndex) {
  return (event, elements) => { if (elements.length) onIndex(elements[0].index, elements[0].datasetIndex); };
}

function groupChart(id, groups, filter) {
  const labels = groups.map((g) => `${g.key ?? "(none)"} (${g.count})`);
  draw(id, {
    type: "bar",
    data: { labels, datasets: [
      { label: "pass rate", data: groups.map((g) => g.pass_rate), backgroundColor: PASS },
      { label: "mean reward", data: groups.map((g) => g.reward), backgroundColor: REWARD },
    ] },
    options: {
      scales: { y: { min: 0, max: 1 } },
      plugins: { tooltip: { callbacks: { afterBody: (items) => {
        const g = groups[items[0].dataIndex];
        return `${g.passed} of ${g.count} passed`;
      } } } },
      onClick: clickIndex((i) => { if (groups[i].key !== null) setFilters({ [filter]: groups[i].key }); }),
    },
  });
}

// The store sends the buckets that hold rollouts; drawn with the empty ones between, so that time reads evenly.
function everyBucket(throughput, b) {
  const byT = new Map(throughput.map((p) => [p.t, p])), out = [];
  const empty = { count: 0, passed: 0, reward: null, latency: { n: 0, p50_ms: null, p90_ms: null, p99_ms: null } };
  if (!throughput.length) return out;
  for (let t = throughput[0].t; t <= throughput[throughput.length - 1].t; t += b) out.push(byT.get(t) || { ...empty, t });
  return out;
}

function drawCharts(data) {
  const b = data.bucket_s, buckets = everyBucket(data.throughput, b), labels = buckets.map((p) => when(p.t, b));
  $("bucket-hint").textContent = `per ${b >= 3600 ? b / 3600 + " h" : b / 60 + " min"}; click a bar to keep its time`;
  draw("throughput", {
    type: "bar",
    data: { labels, datasets: [
      { label: "passed", data: buckets.map((p) => p.passed), backgroundColor: PASS, stack: "s" },
      { label: "not passed", data: buckets.map((p) => p.count - p.passed), backgroundColor: OTHER, stack: "s" },
    ] },
    options: { scales: { x: { stacked: true }, y: { stacked: true, ...COUNTS } },
               onClick: clickIndex((i) => {
                 const t = buckets[i].t;
                 setFilters({ since: String(t), until: String(t + b), range: null });
               }) },
  });
  draw("latency", {
    type: "line",
    data: { labels, datasets: Object.entries(LATENCY).map(([key, colour]) => ({
      label: key.replace("_ms", ""), data: buckets.map((p) => p.latency[key]), borderColor: colour,
      backgroundColor: colour, spanGaps: true, pointRadius: 3,
    })) },
    options: { scales: { y: { beginAtZero: true, title: { display: true, text: "ms" } } } },
  });
  const byStatus = {};
  for (const p of data.points) (byStatus[p.status] ||= []).push(p);
  const statusSets = Object.entries(byStatus);
  const times = data.points.map((p) => p.t), span = times.length ? Math.max(...times) - Math.min(...times) : 0;
  draw("points", {
    type: "scatter",
    data: { datasets: statusSets.map(([status, pts]) => ({
      label: status, data: pts.map((p) => ({ x: p.t * 1000, y: p.tests_ms ?? 0 })),
      backgroundColor: statusColour(status), pointRadius: 4, pointHoverRadius: 7,
    })) },
    options: {
      scales: { x: { type: "linear", ticks: { callback: (v) => when(v / 1000, span / 8) } },
                y: { beginAtZero: true, title: { display: true, text: "tests ms" } } },
      plugins: { tooltip: { callbacks: { label: (item) => {
        const p = statusSets[item.datasetIndex][1][item.dataIndex];
        return `${p.id.slice(0, 12)} ${p.status} reward ${fmt(p.reward, 2)} · ${ms(p.tests_ms)}`;
      } } } },
      onClick: clickIndex((i, d) => openRollout(statusSets[d][1][i].id)),
    },
  });
  draw("statuses", {
    type: "doughnut",
    data: { labels: data.statuses.map((s) => s.status), datasets: [{
      data: data.statuses.map((s) => s.count), backgroundColor: data.statuses.map((s) => statusColour(s.status)),
    }] },
    options: { plugins: { legend: { position: "right" } },
               onClick: clickIndex((i) => setFilters({ status: data.statuses[i].status })) },
  });
  groupChart("by_language", data.by_language, "language");
  groupChart("by_profile", data.by_profile, "profile");
  groupChart("by_kind", data.by_kind, "kind");
  draw("rewards", {
    type: "bar",
    data: { labels: data.reward_histogram.map((r) => fmt(r.bin, 1)),
            datasets: [{ label: "rollouts", data: data.reward_histogram.map((r) => r.count), backgroundColor: REWARD }] },
    options: { plugins: { legend: { display: false } }, scales: { y: COUNTS } },
  });
  draw("components", {
    type: "bar",
    data: { labels: Object.keys(data.components),
            datasets: [{ label: "mean", data: Object.values(data.components), backgroundColor: REWARD }] },
    options: { plugins: { legend: { display: false } }, scales: { y: { min: 0, max: 1 } } },
  });
}

// -- tables

function badge(status) {
  const span = document.createElement("span");
  span.className = "badge status";
  span.textContent = status;
  span.style.background = statusColour(status);
  return span;
}

function row(tbody, cells, onOpen, numeric = []) {
  const tr = document.createElement("tr");
  cells.forEach((cell, i) => {
    const td = document.createElement("td");
    if (numeric.includes(i)) td.className = "num";
    if (cell instanceof Node) td.appendChild(cell); else td.textContent = cell;
    tr.appendChild(td);
  });
  if (onOpen) { tr.className = "open"; tr.onclick = onOpen; }
  tbody.appendChild(tr);
  return tr;
}

function rolloutLink(id) {
  const a = document.createElement("a");
  a.href = `#rollout=${id}`;
  a.textContent = id.slice(0, 12);
  a.className = "rollout-link";
  a.dataset.rollout = id;
  return a;
}

function fillTable(id, rows, cells, numeric = []) {
  const tbody = document.querySelector(`#${id} tbody`);
  tbody.replaceChildren();
  for (const r of rows) row(tbody, cells(r), r.id ? () => openRollout(r.id) : null, numeric);
  if (!rows.length) {
    const td = row(tbody, ["none"]).firstChild;
    td.colSpan = 5;
    td.className = "empty";
  }
}

function drawTables(data) {
  fillTable("failures", data.recent_failures, (r) => [rolloutLink(r.id), badge(r.status), r.message.slice(0, 160)]);
  fillTable("slowest", data.slowest, (r) => [rolloutLink(r.id), badge(r.status), fmt(r.reward), fmt(r.tests_ms, 1)],
            [2, 3]);
  fillTable("runs", data.runs.map((r) => ({ ...r, id: null })), (r) => [
    r.name, new Date(r.created_at * 1000).toLocaleString(), fmt(r.summary["pass@1"]), fmt(r.summary.reward_mean),
    r.summary.samples ?? "–"], [2, 3, 4]);
}

function drawHeader(data) {
  $("kpi-count").textContent = data.count;
  $("kpi-pass").textContent = data.count ? `${pct(data.passed / data.count)} (${data.passed})` : "–";
  $("kpi-reward").textContent = fmt(data.reward);
  for (const p of ["p50", "p90", "p99"]) $(`kpi-${p}`).textContent = ms(data.latency[`${p}_ms`]);
  $("summary").textContent = `${data.count} rollouts shown · pool ${data.pool.backend} ${data.pool.busy}/` +
    `${data.pool.size} busy · ${data.pool.jobs} jobs`;
}

// -- one rollout, opened from the page, and its replay

function definitions(dl, pairs) {
  dl.replaceChildren();
  for (const [k, v] of pairs) {
    const dt = document.createElement("dt"), dd = document.createElement("dd");
    dt.textContent = k;
    if (v instanceof Node) dd.appendChild(v); else dd.textContent = v ?? "–";
    dl.append(dt, dd);
  }
}

async function openRollout(id) {
  if (location.hash !== `#rollout=${id}`) history.pushState(null, "", `${location.pathname}${location.search}#rollout=${id}`);
  const panel = $("rollout");
  panel.hidden = false;
  panel.dataset.rollout = id;
  panel.dataset.loaded = "";
  $("rollout-title").textContent = id.slice(0, 16);
  $("replay-output").replaceChildren();
  $("replay-status").textContent = "";
  const r = await fetch(`/rollouts/${encodeURIComponent(id)}`);
  if (!r.ok) { $("rollout-reason").textContent = `not found (${r.status})`; return; }
  const rec = await r.json(), res = rec.result || {}, req = rec.request || {};
  $("rollout-status").replaceChildren(badge(rec.status));
  $("rollout-json").href = `/rollouts/${encodeURIComponent(id)}`;
  definitions($("rollout-meta"), [
    ["rollout", rec.id], ["client id", rec.client_id], ["when", new Date(rec.created_at * 1000).toLocaleString()],
    ["language", rec.language], ["profile", rec.profile], ["test kind", req.tests?.kind], ["reward", fmt(rec.reward)],
    ["tests time", ms(res.details?.timings?.tests_ms)], ["flags", (res.flags || []).join(", ") || "–"],
  ]);
  const failing = (res.tests || []).find((t) => !t.passed);
  $("rollout-reason").textContent = res.message || (failing ? `${failing.name}: ${failing.message}` : "–");
  const tbody = document.querySelector("#rollout-tests tbody");
  tbody.replaceChildren();
  for (const t of res.tests || []) row(tbody, [t.name, badge(t.status), t.message || ""]);
  definitions($("rollout-components"), Object.entries(res.components || {}).map(([k, v]) => [k, fmt(v)]));
  $("rollout-code").textContent = req.code ?? (req.patch ? req.patch : "–");
  $("rollout-stdout").textContent = res.execution?.stdout || "–";
  $("rollout-stderr").textContent = res.execution?.stderr || "–";
  panel.dataset.loaded = "true";
}

function closeRollout() {
  $("rollout").hidden = true;
  if (location.hash) history.pushState(null, "", `${location.pathname}${location.search}`);
}

function diffRows(diff) {
  const rows = [];
  for (const [field, change] of Object.entries(diff)) {
    if ("stored" in change) rows.push([field, change.stored, change.replayed]);
    else for (const [name, c] of Object.entries(change)) rows.push([`${field}: ${name}`, c.stored, c.replayed]);
  }
  return rows;
}

async function replay() {
  const id = $("rollout").dataset.rollout, out = $("replay-output"), status = $("replay-status");
  status.textContent = "replaying…";
  out.replaceChildren();
  const r = await fetch(`/rollouts/${encodeURIComponent(id)}/replay`, { method: "POST" });
  const body = await r.json();
  if (!r.ok) { status.textContent = `replay refused (${r.status}): ${body.detail}`; return; }
  const verdict = body.identical ? (body.exact ? "identical" : "identical within tolerance") : "different";
  status.replaceChildren(badge(body.result.status), document.createTextNode(
    ` replayed as ${body.result.rollout_id.slice(0, 12)}: ${verdict}` +
    (body.same_image_and_versions ? "" : " (another image or grader version)")));
  status.dataset.verdict = body.identical ? "identical" : "different";
  const rows = diffRows(body.identical ? body.exact_diff : body.diff);
  if (rows.length) {
    const table = document.createElement("table");
    row(table.createTBody(), ["field", "stored", "replayed"]);
    for (const [field, a, b] of rows) row(table.tBodies[0], [field, JSON.stringify(a), JSON.stringify(b)]);
    out.appendChild(table);
  }
}

// -- load

async function load() {
  document.body.dataset.ready = "";
  const r = await fetch(`/dashboard/data?${dataQuery()}`);
  const data = await r.json();
  if (!r.ok) throw new Error(JSON.stringify(data.detail));
  showFilters(data);
  drawHeader(data);
  drawCharts(data);
  drawTables(data);
  const opened = location.hash.match(/^#rollout=(.+)$/);
  if (opened) await openRollout(decodeURIComponent(opened[1])); else $("rollout").hidden = true;
  document.body.dataset.ready = "true";
}

function fail(e) { console.error(e); $("summary").textContent = `error: ${e}`; }

for (const select of document.querySelectorAll("#filters select")) {
  select.onchange = () => {
    if (select.name === "range") setFilters({ range: select.value === "custom" ? params().get("range") : select.value,
                                              since: null, until: null });
    else setFilters({ [select.name]: select.value });
  };
}
$("clear").onclick = () => { history.pushState(null, "", location.pathname); load().catch(fail); };
$("rollout-close").onclick = closeRollout;
$("replay").onclick = () => replay().catch(fail);
document.addEventListener("click", (e) => {
  const link = e.target.closest("a.rollout-link");
  if (link) { e.preventDefault(); e.stopPropagation(); openRollout(link.dataset.rollout).catch(fail); }
}, true);
document.addEventListener("keydown", (e) => { if (e.key === "Escape") closeRollout(); });
window.addEventListener("popstate", () => load().catch(fail));
load().catch(fail);
