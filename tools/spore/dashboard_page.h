// The dashboard's one page (served at /): loss and accuracy curves (Chart.js, served by the
// dashboard itself from Debian's libjs-chart.js: no CDN), the run's hyper-parameters, its
// checkpoints and the profiler summary. It polls /api/run every two seconds, so the curves grow
// while `spore train` is still writing metrics.jsonl. After each render it records what it drew
// in data- attributes (points per chart, epochs shown) so a headless browser test can check it.
#pragma once

namespace spore::cli {

inline constexpr const char* kDashboardPage = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Spore dashboard</title>
<script src="/chart.js"></script>
<style>
 body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
 h1 { font-size: 1.3em; } h2 { font-size: 1.05em; margin-top: 1.5em; }
 .charts { display: flex; flex-wrap: wrap; gap: 2em; }
 .chart { width: 520px; height: 300px; }
 table { border-collapse: collapse; font-size: 0.9em; }
 td, th { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
 th { background: #f3f3f3; } pre { background: #f7f7f7; padding: 0.8em; font-size: 0.85em; }
 #status { color: #666; font-size: 0.85em; }
</style></head>
<body>
<h1>Spore run: <span id="run"></span></h1>
<div id="status">loading...</div>
<div class="charts">
 <div class="chart"><canvas id="loss-chart"></canvas></div>
 <div class="chart"><canvas id="acc-chart"></canvas></div>
</div>
<h2>Metrics per epoch</h2><table id="metrics"></table>
<h2>Hyper-parameters</h2><table id="hyper"></table>
<h2>Checkpoints</h2><table id="checkpoints"></table>
<h2>Profiler summary</h2><pre id="profile">(no profile: train with --profile RUN_DIR/profile)</pre>
<script>
"use strict";
const charts = {};
function series(rows, key) { return rows.filter(r => typeof r[key] === "number").map(r => ({x: r.epoch, y: r[key]})); }
function draw(id, title, sets) {
  const data = {datasets: sets.map(s => ({label: s.label, data: s.data, borderColor: s.color, backgroundColor: s.color, tension: 0.1}))};
  if (charts[id]) { charts[id].data = data; charts[id].update("none"); }
  else charts[id] = new Chart(document.getElementById(id), {type: "line", data,
    options: {animation: false, responsive: true, maintainAspectRatio: false, parsing: false,
              plugins: {title: {display: true, text: title}},
              scales: {x: {type: "linear", ticks: {precision: 0}, title: {display: true, text: "epoch"}}}}});
  const n = sets.reduce((k, s) => k + s.data.length, 0);
  document.getElementById(id).dataset.points = String(n);
}
function table(id, header, rows) {
  const t = document.getElementById(id);
  t.innerHTML = "";
  const tr = t.insertRow();
  for (const h of header) { const th = document.createElement("th"); th.textContent = h; tr.appendChild(th); }
  for (const r of rows) { const row = t.insertRow(); for (const v of r) row.insertCell().textContent = v === null || v === undefined ? "" : String(v); }
}
async function refresh() {
  try {
    const run = await (await fetch("/api/run", {cache: "no-store"})).json();
    document.getElementById("run").textContent = run.name;
    const rows = run.metrics;
    draw("loss-chart", "loss", [{label: "train loss", data: series(rows, "loss"), color: "#1f77b4"},
                                {label: "eval loss", data: series(rows, "eval_loss"), color: "#ff7f0e"}]);
    const accKey = rows.some(r => typeof r.accuracy === "number") ? "accuracy" : "mae";
    draw("acc-chart", accKey, [{label: accKey, data: series(rows, accKey), color: "#2ca02c"}]);
    const keys = [];
    for (const r of rows) for (const k of Object.keys(r)) if (!keys.includes(k)) keys.push(k);
    table("metrics", keys, rows.map(r => keys.map(k => r[k])));
    table("hyper", ["name", "value"], Object.entries(run.hyper));
    table("checkpoints", ["file", "bytes", "modified"], run.checkpoints.map(c => [c.file, c.bytes, c.modified]));
    if (run.profile) document.getElementById("profile").textContent = run.profile;
    document.body.dataset.epochs = String(rows.length);
    document.getElementById("status").textContent = rows.length + " epochs, updated " + new Date().toLocaleTimeString();
  } catch (e) {
    document.getElementById("status").textContent = "cannot read /api/run: " + e;
  }
}
refresh();
setInterval(refresh, 2000);
</script>
</body></html>
)HTML";

}  // namespace spore::cli
