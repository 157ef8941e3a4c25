// The drawer's history of a task: its runs (one row per attempt), its recent events and the tail
// of its worker's log, which keeps following the end while the worker writes (or stays where a
// person scrolled it) through the drawer's live refreshes.

import { api } from "./api.js";
import { agoLive, clock, duration, fmtTime, h } from "./dom.js";
import { scope } from "./state.js";

const OUTCOME_CLASS = {
  completed: "ok", review_requested: "info", changes_requested: "info", blocked: "warn", reclaimed: "muted",
  gave_up: "bad", crashed: "bad", timed_out: "bad", spawn_failed: "bad", protocol_violation: "bad",
  stale: "warn", rate_limited: "warn", verify_failed: "bad",
};

export function runsBlock(task) {
  const runs = task.runs || [];
  if (!runs.length) return h("div.md.empty", "No attempts yet.");
  return h("ol.runs", runs.map((r) => {
    const open = !r.ended_at && (r.status === "open" || !r.outcome);
    const cls = open ? "running" : OUTCOME_CLASS[r.outcome] || "muted";
    const cost = r.cost_usd ? `$${Number(r.cost_usd).toFixed(3)}` : "";
    return h(`li.run.run-${cls}`, { title: r.error || r.summary || "" },
      // attempt N of this task (`agentboard log --run N`); the run's id, which its log's header
      // and `agentboard runs` print, on hover
      h("span.run-attempt", { title: `run ${r.id}` }, r.attempt ? `attempt ${r.attempt}` : `run ${r.id}`),
      h("span.run-outcome", open ? "running" : r.outcome || r.status || ""),
      r.metadata && r.metadata.degraded ? h("span.pill.pill-fail.pill-degraded", {
        title: `result never validated: ${(r.metadata.errors || []).join("; ")}`,
      }, "degraded") : null,
      h("span.run-profile", r.profile || ""),
      h("span.run-dur", { title: fmtTime(r.started_at) }, r.synthetic ? "by hand" : r.ended_at ? duration(r.started_at, r.ended_at) : clock(r.started_at)),
      cost ? h("span.run-cost", cost) : null,
      r.summary || r.error ? h("div.run-text", r.error ? `error: ${r.error}` : r.summary) : null);
  }));
}

export function eventsBlock(task) {
  const events = (task.events || []).slice(-20).reverse();
  if (!events.length) return h("div.md.empty", "No events.");
  return h("ol.events", events.map((e) => h("li.event",
    h("span.event-kind", e.kind),
    h("span.event-payload", summarize(e.payload)),
    h("span.event-actor", e.actor || ""),
    h("span.event-time", { title: fmtTime(e.created_at) }, agoLive(e.created_at)))));
}

function summarize(payload) {
  if (!payload || typeof payload !== "object") return "";
  const parts = [];
  for (const [k, v] of Object.entries(payload)) {
    if (v === null || v === undefined || v === "" || (Array.isArray(v) && !v.length)) continue;
    const text = typeof v === "object" ? JSON.stringify(v) : String(v);
    parts.push(`${k}=${text.length > 60 ? `${text.slice(0, 57)}…` : text}`);
    if (parts.length >= 4) break;
  }
  return parts.join(" ");
}

/** Where the worker log box was scrolled: a box at its end (or never scrolled: a new one) keeps
 * following the end; one a person scrolled up stays where they left it. */
export function logPosition(root) {
  const box = root.querySelector(".log-tail");
  if (!box) return null;
  return { top: box.scrollTop, atEnd: box.scrollHeight - box.scrollTop - box.clientHeight < 20 };
}

export function restoreLog(root, pos) {
  const box = root.querySelector(".log-tail");
  if (box && pos) box.scrollTop = pos.atEnd ? box.scrollHeight : pos.top;
}

/** Put ``text`` in the log box: a box at its end stays at the (new) end. */
export function showLogText(box, text) {
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 20;
  box.textContent = text;
  if (atBottom) box.scrollTop = box.scrollHeight;
}

/** The last LOG_TAIL bytes of the worker's log; a cut log starts at its first whole line, under
 * a note saying how much came before and where the whole log is. */
const LOG_TAIL = 64 * 1024;

export async function fetchLog(path) {
  const res = await api.get(path, scope({ tail: LOG_TAIL }));
  if (!res || typeof res !== "object") return "";
  const text = res.text || "";
  if (!res.truncated) return text;
  const cut = text.indexOf("\n");
  const shown = cut >= 0 ? text.slice(cut + 1) : text;
  return `… earlier output left out (the whole log, ${Math.round(res.size / 1024)} KB: ${res.path})\n${shown}`;
}

