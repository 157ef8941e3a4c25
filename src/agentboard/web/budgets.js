// Budget lines (spent / limit, with a bar) and diagnostics findings (with their fix as a button),
// loaded on their own so a slow read never delays the drawer or the board.

import { api } from "./api.js";
import { h, clear, toast } from "./dom.js";

const METRICS = ["cost", "tokens", "runtime", "runs"];

/** One budget as lines of "metric: spent / limit" with a bar (red at 100%, amber from 80%). */
export function budgetRows(b) {
  const scope = `${b.scope} ${b.ref}${b.per ? ` (per ${b.per})` : ""}`;
  const rows = METRICS.filter((m) => b.lines[m].limit !== null).map((m) => {
    const line = b.lines[m];
    const ratio = line.ratio === null ? 0 : line.ratio;
    const level = ratio >= 1 ? "spent" : ratio >= 0.8 ? "warn" : "ok";
    return h(`div.budget-line.budget-${level}`, { title: `${scope}: ${m} ${line.text}` },
      h("span.budget-scope", scope),
      h("span.budget-metric", m),
      h("span.budget-bar", h("span.budget-fill", { style: `width:${Math.min(100, Math.round(ratio * 100))}%` })),
      h("span.budget-text", line.text));
  });
  return rows;
}

/** A container filled with the budget lines of ``query`` (GET /api/budgets); hidden when none. */
export function budgetBlock(query, { compact = false, scopes = null } = {}) {
  const box = h(`div.budget-block${compact ? ".budget-compact" : ""}`, { hidden: true, "aria-label": "budget" });
  api.get("/api/budgets", query).then((rows) => {
    clear(box);
    const lines = rows.filter((b) => !scopes || scopes.includes(b.scope)).flatMap(budgetRows);
    if (!lines.length) return;
    box.append(...lines);
    box.hidden = false;
  }).catch(() => {});
  return box;
}

/** Diagnostics about ``query`` (GET /api/diagnostics): each finding with its fix as a button
 * when the fix has a route, else the command to run. ``onFixed`` runs after a fix applied. */
export function diagnosticsBlock(query, onFixed) {
  const box = h("div.diag-block", { hidden: true, "aria-label": "diagnostics" });
  api.get("/api/diagnostics", query).then((found) => {
    clear(box);
    if (!found.length) return;
    for (const f of found) {
      const fix = f.action
        ? h("button.btn.btn-sm.diag-fix", {
          type: "button", title: f.fix,
          onclick: async () => {
            try {
              await request(f.action);
              toast(`fixed: ${f.fix}`, "ok");
              if (onFixed) onFixed();
            } catch (err) {
              toast(err.message, "error");
            }
          },
        }, "Fix")
        : (f.fix ? h("code.diag-cmd", f.fix) : null);
      box.append(h(`div.diag-item.diag-${f.severity}`,
        h("span.diag-badge", f.kind.replace(/_/g, " ")), h("span.diag-msg", f.message), fix));
    }
    box.hidden = false;
  }).catch(() => {});
  return box;
}

function request(action) {
  const m = action.method.toUpperCase();
  if (m === "DELETE") return api.del(action.path);
  if (m === "PATCH") return api.patch(action.path, action.body || {});
  return api.post(action.path, action.body || {});
}

// ---- badges on the board's cards -------------------------------------------------------------

const CARD_REFRESH_MS = 10_000;
let cardFindings = { board: null, at: 0, byTask: new Map(), loading: null };

/** Put a badge on each card with a finding (its fix as a button). The findings are read at most
 * every ten seconds per board; ``refresh`` forces a new read (after a fix). */
export function decorateCards(root, board, { refresh = false, onFixed = null } = {}) {
  const fresh = cardFindings.board === board && Date.now() - cardFindings.at < CARD_REFRESH_MS;
  if (fresh && !refresh) {
    applyBadges(root, onFixed);
    return;
  }
  if (cardFindings.loading && !refresh) return;
  cardFindings.loading = api.get("/api/diagnostics", { board, tasks_only: true }).then((found) => {
    const byTask = new Map();
    for (const f of found) {
      if (!byTask.has(f.task_id)) byTask.set(f.task_id, []);
      byTask.get(f.task_id).push(f);
    }
    cardFindings = { board, at: Date.now(), byTask, loading: null };
    applyBadges(root, onFixed);
  }).catch(() => { cardFindings.loading = null; });
}

function applyBadges(root, onFixed) {
  for (const el of root.querySelectorAll(".card")) {
    const old = el.querySelector(".card-diag");
    if (old) old.remove();
    const found = cardFindings.byTask.get(el.dataset.id);
    if (!found || !found.length) continue;
    const f = found[0];
    const stop = (ev) => ev.stopPropagation();
    const fix = f.action ? h("button.btn.btn-sm.diag-fix", {
      type: "button", title: f.fix, onmousedown: stop, onpointerdown: stop,
      onclick: async (ev) => {
        ev.stopPropagation();
        try {
          await request(f.action);
          toast(`fixed: ${f.fix}`, "ok");
          cardFindings.at = 0;
          if (onFixed) onFixed();
        } catch (err) {
          toast(err.message, "error");
        }
      },
    }, "Fix") : null;
    el.appendChild(h(`div.card-diag.diag-${f.severity}`, { title: `${f.message}${f.fix ? `\nfix: ${f.fix}` : ""}` },
      h("span.diag-badge", `⚠ ${f.kind.replace(/_/g, " ")}`), fix));
  }
}
