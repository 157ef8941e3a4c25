// The Insights view: which profiles get tasks done and at what cost, and how the board flows.
// Numbers come from GET /api/insights (docs/insights.md); charts are drawn with Chart.js, served
// from the package (vendor/chart.umd.min.js), loaded the first time the view opens.

import { api } from "./api.js";
import { clear, h } from "./dom.js";
import { state } from "./state.js";

const WINDOWS = [["7d", "7 days"], ["30d", "30 days"], ["90d", "90 days"], ["", "All time"]];
const PALETTE = ["#5e6ad2", "#4cb782", "#e2a63b", "#a67ee8", "#4ea7fc", "#eb5757", "#d86fb0", "#8fc46a", "#c2c4cc"];
const TEXT = "#a4a6b0";
const GRID = "#2a2b33";

let windowChoice = "30d";
let charts = [];
let chartLib = null;

/** Chart.js, loaded once from the package (window.Chart). */
function loadChartLib() {
  if (chartLib) return chartLib;
  chartLib = new Promise((resolve, reject) => {
    if (window.Chart) { resolve(window.Chart); return; }
    const s = document.createElement("script");
    s.src = "vendor/chart.umd.min.js";
    s.onload = () => resolve(window.Chart);
    s.onerror = () => { chartLib = null; reject(new Error("the chart library could not be loaded")); };
    document.head.appendChild(s);
  });
  return chartLib;
}

function destroyCharts() {
  for (const c of charts) c.destroy();
  charts = [];
}

export function money(v) {
  if (v === null || v === undefined) return "–";
  if (v >= 100) return `$${v.toFixed(0)}`;
  if (v >= 1) return `$${v.toFixed(2)}`;
  return `$${v.toFixed(3)}`;
}

export function pct(v) {
  return v === null || v === undefined ? "–" : `${Math.round(v * 100)}%`;
}

export function secs(v) {
  if (v === null || v === undefined) return "–";
  if (v < 90) return `${Math.round(v)}s`;
  if (v < 5400) return `${Math.round(v / 60)}m`;
  if (v < 172800) return `${(v / 3600).toFixed(1)}h`;
  return `${(v / 86400).toFixed(1)}d`;
}

/** How a group reads: the server's label (the empty profile is "(by hand)": tasks closed by a person). */
function groupName(g) {
  return g.label || g.key || "(by hand)";
}

export async function renderInsights(root) {
  const since = windowChoice;
  let byProfile, byBoard, Chart;
  try {
    [byProfile, byBoard, Chart] = await Promise.all([
      api.get("/api/insights", { board: state.board, by: "profile", since }),
      api.get("/api/insights", { board: state.board, by: "board", since }),
      loadChartLib(),
    ]);
    if (state.view !== "insights") return;
  } catch (err) {
    if (state.view !== "insights") return;
    destroyCharts();
    clear(root).appendChild(h("div.panel-error", { role: "alert" }, err.message));
    return;
  }
  destroyCharts();
  clear(root);
  const tl = byBoard.timeline;
  const groups = byProfile.groups;
  root.appendChild(head());
  const hasRuns = groups.some((g) => g.runs > 0) || tl.tasks_done > 0;
  if (!hasRuns) {
    let ever = false;
    if (since) {
      try {
        const all = await api.get("/api/insights", { board: state.board, by: "profile" });
        ever = all.groups.some((g) => g.runs > 0 || g.tasks_done > 0);
      } catch { /* said below as if none */ }
      if (state.view !== "insights") return;
    }
    const label = (WINDOWS.find(([v]) => v === since) || [])[1];
    root.appendChild(h("div.panel-empty.insights-empty", { role: "status" },
      h("strong", ever ? `No runs in the last ${label}.` : "No runs yet."),
      " Insights appear once agents have run tasks on this board: throughput, cycle time, and which profiles get tasks done at what cost. ",
      "Assign a task to a profile and start the dispatcher (", h("code", "agentboard dispatcher"), ")."));
    return;
  }
  root.appendChild(tiles(tl, groups));
  const grid = h("div.insights-grid");
  root.appendChild(grid);
  const agents = groups.filter((g) => g.key);
  const color = new Map(groups.map((g, i) => [g.key, PALETTE[i % PALETTE.length]]));
  grid.append(
    chartCard("chart-throughput", "Throughput", "tasks done per day, and work in progress", (canvas) => throughput(Chart, canvas, tl)),
    chartCard("chart-cycle", "Cycle time", `created → done; p50 ${secs(tl.cycle_time_p50_s)}, p90 ${secs(tl.cycle_time_p90_s)}`, (canvas) => cycle(Chart, canvas, tl)),
    chartCard("chart-cost", "Cost per done task", "by profile", (canvas) => costPerDone(Chart, canvas, agents, color)),
    chartCard("chart-scatter", "Success against cost", "first-attempt success (%) by cost per done task, one point per profile", (canvas) => scatter(Chart, canvas, agents, color)),
    chartCard("chart-races", "Races", "attempts entered and won, by profile", (canvas) => races(Chart, canvas, agents), agents.some((g) => g.races_entered) ? null : "No races yet: create one with agentboard create TITLE --race P1,P2."),
  );
  root.appendChild(table(groups));
}

function head() {
  const pick = h("div.seg.insights-window", { role: "group", "aria-label": "window" },
    WINDOWS.map(([v, label]) => h(`button.seg-btn${windowChoice === v ? ".active" : ""}`, {
      type: "button", dataset: { since: v || "all" }, "aria-pressed": String(windowChoice === v),
      onclick: () => { windowChoice = v; renderInsights(document.getElementById("main")); },
    }, label)));
  return h("div.panel-head", h("h2", "Insights"), h("span.spacer"), pick);
}

function tiles(tl, groups) {
  const runs = groups.reduce((n, g) => n + g.runs, 0);
  const done = tl.tasks_done;
  const tile = (label, value, cls) => h(`div.insight-tile${cls ? `.${cls}` : ""}`, h("div.insight-value", value), h("div.insight-label", label));
  return h("div.insight-tiles",
    tile("tasks done", String(done), "tile-done"),
    tile("runs", String(runs), "tile-runs"),
    tile("cycle time p50 / p90", `${secs(tl.cycle_time_p50_s)} / ${secs(tl.cycle_time_p90_s)}`, "tile-cycle"),
    tile("spend", money(tl.cost_usd), "tile-spend"),
    tile("cost per done task", done ? money(tl.cost_usd / done) : "–", "tile-per-done"));
}

function chartCard(id, title, sub, draw, empty = null) {
  const canvas = h("canvas", { "aria-label": title, role: "img" });
  const card = h("section.insight-card", { id },
    h("header.insight-card-head", h("h3", title), h("span.insight-sub", sub)),
    empty ? h("div.insight-card-empty", empty) : h("div.insight-canvas", canvas));
  if (!empty) {
    // drawn once the card is in the page (Chart.js measures its box)
    requestAnimationFrame(() => {
      try {
        const chart = draw(canvas);
        if (chart) charts.push(chart);
        card.dataset.drawn = "1";
      } catch (err) {
        clear(card).appendChild(h("div.panel-error", err.message));
      }
    });
  }
  return card;
}

function base(extra = {}) {
  return {
    responsive: true, maintainAspectRatio: false, animation: false,
    plugins: { legend: { labels: { color: TEXT, boxWidth: 12 } }, tooltip: { intersect: false } },
    scales: {
      x: { ticks: { color: TEXT, maxRotation: 0, autoSkipPadding: 12 }, grid: { color: GRID } },
      y: { ticks: { color: TEXT, precision: 0 }, grid: { color: GRID }, beginAtZero: true },
    },
    ...extra,
  };
}

function throughput(Chart, canvas, tl) {
  const days = tl.days;
  return new Chart(canvas, {
    type: "line",
    data: {
      labels: days.map((d) => d.day.slice(5)),
      datasets: [
        { label: "done", data: days.map((d) => d.tasks_done), borderColor: "#4cb782", backgroundColor: "rgba(76,183,130,0.15)", fill: true, tension: 0.25, pointRadius: days.length > 40 ? 0 : 2 },
        { label: "in progress", data: days.map((d) => d.work_in_progress), borderColor: "#e2a63b", borderDash: [4, 3], tension: 0.25, pointRadius: 0 },
      ],
    },
    options: base(),
  });
}

function bucketLabel(b) {
  const lo = b.lo_s ? secs(b.lo_s) : "0";
  return b.hi_s === null ? `≥${lo}` : `${lo}–${secs(b.hi_s)}`;
}

function cycle(Chart, canvas, tl) {
  const hist = tl.cycle_time_histogram;
  const used = hist.map((b, i) => (b.tasks ? i : -1)).filter((i) => i >= 0);
  const shown = used.length ? hist.slice(used[0], used[used.length - 1] + 1) : [];
  return new Chart(canvas, {
    type: "bar",
    data: { labels: shown.map(bucketLabel), datasets: [{ label: "tasks", data: shown.map((b) => b.tasks), backgroundColor: "#5e6ad2" }] },
    options: base({ plugins: { legend: { display: false } } }),
  });
}

function costPerDone(Chart, canvas, agents, color) {
  const rows = agents.filter((g) => g.cost_per_done_task !== null).sort((a, b) => a.cost_per_done_task - b.cost_per_done_task);
  return new Chart(canvas, {
    type: "bar",
    data: {
      labels: rows.map(groupName),
      datasets: [{ label: "cost per done task", data: rows.map((g) => g.cost_per_done_task), backgroundColor: rows.map((g) => color.get(g.key)) }],
    },
    options: base({
      indexAxis: "y",
      plugins: { legend: { display: false }, tooltip: { callbacks: { label: (c) => money(c.parsed.x) } } },
      scales: {
        x: { ticks: { color: TEXT, callback: (v) => money(v) }, grid: { color: GRID }, beginAtZero: true },
        y: { ticks: { color: TEXT }, grid: { display: false } },
      },
    }),
  });
}

function scatter(Chart, canvas, agents, color) {
  const rows = agents.filter((g) => g.cost_per_done_task !== null && g.first_attempt_success_rate !== null);
  return new Chart(canvas, {
    type: "scatter",
    data: {
      datasets: rows.map((g) => ({
        label: groupName(g), backgroundColor: color.get(g.key), borderColor: color.get(g.key),
        pointRadius: 4 + Math.min(10, Math.sqrt(g.tasks_done)), pointHoverRadius: 6 + Math.min(10, Math.sqrt(g.tasks_done)),
        data: [{ x: g.cost_per_done_task, y: Math.round(g.first_attempt_success_rate * 100) }],
      })),
    },
    options: base({
      clip: false,  // a profile at 100 % or at the highest cost is drawn whole, not cut at the edge
      layout: { padding: { top: 14, right: 18 } },
      plugins: {
        legend: { position: "bottom", labels: { color: TEXT, boxWidth: 10, usePointStyle: true } },
        tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${money(c.parsed.x)} per done task, ${c.parsed.y}% first-attempt success` } },
      },
      scales: {
        x: { title: { display: true, text: "cost per done task", color: TEXT }, ticks: { color: TEXT, callback: (v) => money(v) }, grid: { color: GRID }, beginAtZero: true },
        y: { title: { display: true, text: "first-attempt success", color: TEXT }, min: 0, max: 100, ticks: { color: TEXT, callback: (v) => `${v}%` }, grid: { color: GRID } },
      },
    }),
  });
}

function races(Chart, canvas, agents) {
  const rows = agents.filter((g) => g.races_entered).sort((a, b) => b.races_won - a.races_won);
  return new Chart(canvas, {
    type: "bar",
    data: {
      labels: rows.map(groupName),
      datasets: [
        { label: "entered", data: rows.map((g) => g.races_entered), backgroundColor: "#6e707b" },
        { label: "won", data: rows.map((g) => g.races_won), backgroundColor: "#4cb782" },
      ],
    },
    options: base(),
  });
}

function table(groups) {
  const cols = ["profile", "runs", "done", "1st-attempt", "verified", "approved", "races won", "p50", "p90", "cost / done", "tokens / done", "failures"];
  return h("section.insight-card.insight-table-card",
    h("header.insight-card-head", h("h3", "By profile"), h("span.insight-sub", "every number from the runs in the window (docs/insights.md)")),
    h("div.insight-table-wrap", h("table.insight-table",
      h("thead", h("tr", cols.map((c) => h("th", c)))),
      h("tbody", groups.map((g) => h("tr", { dataset: { profile: g.key } },
        h("td", groupName(g)), h("td.num", String(g.runs)), h("td.num", String(g.tasks_done)),
        h("td.num", pct(g.first_attempt_success_rate)), h("td.num", pct(g.verification_pass_rate)),
        h("td.num", pct(g.review_approval_rate)), h("td.num", `${g.races_won}/${g.races_entered}`),
        h("td.num", secs(g.duration_p50_s)), h("td.num", secs(g.duration_p90_s)),
        h("td.num", money(g.cost_per_done_task)),
        h("td.num", g.tokens_per_done_task === null ? "–" : Math.round(g.tokens_per_done_task).toLocaleString()),
        h("td.fail", Object.entries(g.failures).map(([k, n]) => `${k} ${n}`).join(", ") || "–")))))));
}
