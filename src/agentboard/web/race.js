// A race (docs/races.md): its attempts on the card, and side by side in the drawer — outcome,
// verification, cost, tokens, duration, the diff stat and each attempt's diff — with a Pick
// button on each attempt that may win now (POST /api/tasks/{id}/pick, the one pick of every
// surface).

import { api } from "./api.js";
import { clear, h, toast } from "./dom.js";
import { branchBlock, diffBlock } from "./diff.js";
import { emit, scope } from "./state.js";

const MARK = { done: "✓", failed: "✗", crashed: "✗", stopped: "■" };
const views = new Map();  // per attempt task: its diff view (page, open file), kept across refreshes

/** What an attempt's outcome cell says: its outcome, else its state ("paused (budget)" while its task waits). */
const shown = (a) => a.outcome || (a.paused ? `paused (${a.paused})` : a.state);

/** The race's pills on its card: the badge and one chip per attempt. */
export function raceCard(race) {
  if (!race) return null;
  return h("div.race-chips", { title: race.badge },
    h("span.pill.pill-race", "⚑ ", race.badge),
    race.attempts.map((a) => h(`span.race-chip.race-${a.outcome || a.state}${a.picked ? ".race-picked" : ""}`, {
      title: `attempt ${a.n}: ${a.profile}${a.model ? `:${a.model}` : ""} — ${shown(a)}`
        + `${a.verification ? `, verification ${a.verification}` : ""}${a.picked ? " (picked)" : ""}`,
    }, `${a.n} ${a.profile}${a.outcome ? ` ${MARK[a.outcome] || ""}` : ""}`)));
}

/** The drawer's "Race" section: the attempts compared side by side. */
export function raceBlock(task, refresh) {
  const box = h("div.race-compare", { "aria-label": "race attempts" }, h("div.muted", "Loading the attempts…"));
  load(box, task, refresh);
  return box;
}

async function load(box, task, refresh) {
  let race;
  try {
    race = await api.get(`/api/tasks/${encodeURIComponent(task.id)}/attempts`, scope());
  } catch (err) {
    clear(box);
    box.append(h("div.drawer-error", { role: "alert" }, `attempts unavailable: ${err.message}`));
    return;
  }
  clear(box);
  box.append(h("div.race-summary", h("strong", race.badge),
    ` · until ${race.race_until === "first-pass" ? "the first that passes" : "every attempt finishes"}`));
  const grid = h("div.race-grid", { style: `grid-template-columns: 7.5em repeat(${race.attempts.length}, minmax(12em, 1fr))` });
  const row = (label, cell) => {
    grid.append(h("div.race-label", label));
    for (const a of race.attempts) grid.append(h("div.race-cell", { dataset: { n: String(a.n) } }, cell(a)));
  };
  row("Attempt", (a) => h("span", h("strong", `#${a.n}`), a.picked ? h("span.pill.pill-picked", " picked") : null));
  row("Profile", (a) => `${a.profile}${a.model ? ` · ${a.model}` : ""}`);
  row("Outcome", (a) => h(`span.race-outcome.race-${a.outcome || a.state}`, { title: a.paused ? a.error || "" : "" },
    shown(a)));
  row("Verification", (a) => h(`span.race-verify.verify-${a.verification || "none"}`, a.verification || "—"));
  row("Cost", (a) => (a.cost_known === false ? "unknown" : `$${Number(a.cost_usd || 0).toFixed(4)}`));
  row("Tokens", (a) => String(a.tokens || 0));
  row("Took", (a) => (a.duration == null ? "—" : `${Math.round(a.duration)}s`));
  row("Runs", (a) => String(a.runs || 0));
  row("Changes", (a) => (a.git && a.git.exists
    ? h("span", `${a.git.files} file${a.git.files === 1 ? "" : "s"} `, h("span.diff-add", `+${a.git.insertions}`), " ",
      h("span.diff-del", `−${a.git.deletions}`))
    : "—"));
  row("Summary", (a) => h("span.race-summary-text", a.summary || a.error || "—"));
  row("", (a) => (a.can_pick
    ? h("button.btn.btn-primary.btn-sm.race-pick", { type: "button", onclick: (ev) => pick(ev.target, task, a, refresh) },
      `Pick #${a.n}`)
    : null));
  box.append(grid);
  for (const a of race.attempts) {
    if (!a.attempt_task_id || !a.git) continue;
    const view = views.get(a.attempt_task_id) || {};
    views.set(a.attempt_task_id, view);
    const own = { id: a.attempt_task_id, git: a.git, updated_at: a.finished_at || a.started_at };
    box.append(h("details.race-diff", { dataset: { n: String(a.n) } },
      h("summary", `Attempt #${a.n} (${a.profile}) — branch ${a.branch}`),
      branchBlock(own), diffBlock(own, view)));
  }
}

async function pick(btn, task, a, refresh) {
  btn.disabled = true;
  try {
    const out = await api.post(`/api/tasks/${encodeURIComponent(task.id)}/pick`, { n: a.n }, scope());
    toast(`Picked attempt ${a.n}: ${out.status}${out.integration ? ` (${out.integration})` : ""}`, "ok", 3000);
    emit("reload");
    refresh();
  } catch (err) {
    btn.disabled = false;
    toast(err.message, "error", 6000);
  }
}
