// Draws /dashboard/data with Chart.js (vendored). Sets document.body.dataset.ready when everything is drawn.
"use strict";

const fmt = (v, digits = 3) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
const minute = (t) => new Date(t * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });

const PALETTE = ["#4a78d8", "#d8584a", "#e0a030", "#3aa57a", "#8a5cc7", "#5aa9c9", "#c75c9a", "#888888"];

function chart(id, type, labels, data, label) {
  const round = type === "doughnut";
  return new Chart(document.getElementById(id), {
    type,
    data: { labels, datasets: [{ label, data, backgroundColor: round ? PALETTE : "#4a78d8", borderColor: "#2457c5" }] },
    options: { animation: false, plugins: { legend: { display: round, position: "right" } }, responsive: true },
  });
}

function row(tbody, cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) {
    const td = document.createElement("td");
    if (cell instanceof Node) td.appendChild(cell); else td.textContent = cell;
    tr.appendChild(td);
  }
  tbody.appendChild(tr);
}

function rolloutLink(id) {
  const a = document.createElement("a");
  a.href = `/rollouts/${id}`;
  a.textContent = id.slice(0, 12);
  a.className = "rollout-link";
  return a;
}

function replayButton(id) {
  const b = document.createElement("button");
  b.textContent = "replay";
  b.onclick = async () => {
    const out = document.getElementById("replay-output");
    out.textContent = `replaying ${id}…`;
    const r = await fetch(`/rollouts/${id}/replay`, { method: "POST" });
    const body = await r.json();
    out.textContent = `${id}: ${body.identical ? "identical" : "different"}\n` + JSON.stringify(body.diff, null, 2);
  };
  return b;
}

async function main() {
  const data = await (await fetch("/dashboard/data")).json();
  const total = data.statuses.reduce((n, s) => n + s.count, 0);
  document.getElementById("summary").textContent =
    `${total} rollouts · pool ${data.pool.backend} ${data.pool.busy}/${data.pool.size} busy · ${data.pool.jobs} jobs`;
  chart("throughput", "bar", data.throughput.map((p) => minute(p.t)), data.throughput.map((p) => p.count), "rollouts");
  chart("latency", "line", data.throughput.map((p) => minute(p.t)), data.throughput.map((p) => p.tests_ms), "ms");
  chart("rewards", "bar", data.reward_histogram.map((b) => fmt(b.bin, 1)), data.reward_histogram.map((b) => b.count),
        "rollouts");
  chart("components", "bar", Object.keys(data.components), Object.values(data.components), "mean");
  chart("statuses", "doughnut", data.statuses.map((s) => s.status), data.statuses.map((s) => s.count), "rollouts");
  const runs = document.querySelector("#runs tbody");
  for (const r of data.runs) {
    row(runs, [r.name, new Date(r.created_at * 1000).toLocaleString(), fmt(r.summary["pass@1"]),
               fmt(r.summary.reward_mean), r.summary.samples]);
  }
  const slowest = document.querySelector("#slowest tbody");
  for (const r of data.slowest) {
    row(slowest, [rolloutLink(r.id), r.status, fmt(r.reward), fmt(r.tests_ms, 1), replayButton(r.id)]);
  }
  const failures = document.querySelector("#failures tbody");
  for (const r of data.recent_failures) {
    row(failures, [rolloutLink(r.id), r.status, r.message.slice(0, 120), replayButton(r.id)]);
  }
  document.body.dataset.ready = "true";
}

main().catch((e) => { console.error(e); document.getElementById("summary").textContent = `error: ${e}`; });
