// The goals view, the profiles panel and the new-board dialog.

import { api } from "./api.js";
import { budgetBlock } from "./budgets.js";
import { ago, clear, h, laterIfPressed, toast } from "./dom.js";
import { profileCheck } from "./profile_check.js";
import { STATUSES, STATUS_LABEL, emit, listOf, scope, state } from "./state.js";

// ---- goals -----------------------------------------------------------------------------------

export async function renderGoals(root) {
  let goals;
  try {
    goals = listOf(await api.get("/api/goals", scope()), "goals");
    if (state.view !== "goals") return; // the user moved on while this loaded
    if (laterIfPressed(() => { if (state.view === "goals") renderGoals(root); })) return; // a click under way
  } catch (err) {
    if (state.view !== "goals") return;
    clear(root).appendChild(h("div.panel-error", { role: "alert" }, err.message));
    return;
  }
  state.goals = goals;
  // a live refresh must not eat a goal title being typed
  const previous = root.querySelector(".goal-new-title");
  const typed = previous ? previous.value : "";
  const hadFocus = previous && document.activeElement === previous;
  clear(root);
  const title = h("input.goal-new-title", { type: "text", placeholder: "New goal — a named outcome that groups tasks", "aria-label": "new goal title" });
  title.value = typed;
  const add = async () => {
    const text = title.value.trim();
    if (!text) return;
    try {
      await api.post("/api/goals", { title: text }, scope());
      title.value = "";
      renderGoals(root);
    } catch (err) { toast(err.message, "error"); }
  };
  title.addEventListener("keydown", (ev) => { if (ev.key === "Enter") add(); });
  root.appendChild(h("div.panel-head",
    h("h2", "Goals"), h("span.spacer"), title,
    h("button.btn.btn-primary", { type: "button", onclick: add }, "Add goal")));
  if (hadFocus) title.focus();
  if (!goals.length) {
    root.appendChild(h("div.panel-empty", "No goals on this board yet. A goal names an outcome and groups the tasks that reach it: add one above, or with ",
      h("code", "agentboard goals create"), "."));
    return;
  }
  root.appendChild(h("div.goals", goals.map(goalCard)));
}

function goalCard(g) {
  const counts = g.counts || {};
  const total = g.total ?? Object.entries(counts).reduce((n, [k, v]) => (k === "archived" ? n : n + v), 0);
  const done = g.done ?? counts.done ?? 0;
  const pct = total ? Math.round((100 * done) / total) : 0;
  const bar = h("div.progress", { role: "progressbar", "aria-valuemin": "0", "aria-valuemax": String(total), "aria-valuenow": String(done) },
    STATUSES.filter((s) => s !== "archived" && counts[s]).map((s) => h(`span.progress-seg.seg-${s}`, {
      style: { flexGrow: String(counts[s]) }, title: `${counts[s]} ${s}`,
    })));
  const blocked = g.blocked || [];
  return h(`article.goal.goal-${g.status}`, { dataset: { id: g.id } },
    h("header.goal-head",
      h("h3.goal-title", g.title),
      h(`span.pill.goal-status.status-${g.status}`, g.status),
      h("span.spacer"),
      h("span.goal-progress", `${done}/${total} done · ${pct}%`)),
    bar,
    h("div.goal-counts", STATUSES.filter((s) => counts[s]).map((s) => h("span.goal-count", h(`span.dot.dot-${s}`), `${counts[s]} ${STATUS_LABEL[s].toLowerCase()}`))),
    h("div.goal-meta",
      h("span", `${g.runs || 0} runs`),
      h("span.goal-cost", `$${Number(g.cost_usd || 0).toFixed(2)} so far`),
      g.tokens ? h("span", `${Number(g.tokens).toLocaleString()} tokens`) : null,
      h("span", `created ${ago(g.created_at)}`)),
    budgetBlock({ scope: "goal", ref: g.id }, { scopes: ["goal"] }),
    (g.acceptance || []).length ? h("ul.goal-acceptance", g.acceptance.map((a) => h("li", a))) : null,
    blocked.length ? h("div.goal-blocked",
      h("h4", `Blocked (${blocked.length})`),
      h("ul", blocked.map((b) => h("li",
        h("button.link-btn", { type: "button", onclick: () => emit("open", b.id) }, b.title),
        h("span.block-kind", b.kind || "blocked"),
        h("span.block-reason", b.reason || "no reason given"))))) : null);
}

// ---- profiles -------------------------------------------------------------------------------

export async function renderProfiles(root) {
  let profiles;
  try {
    profiles = listOf(await api.get("/api/profiles"), "profiles");
    if (state.view !== "profiles") return;
  } catch (err) {
    if (state.view !== "profiles") return;
    clear(root).appendChild(h("div.panel-error", { role: "alert" }, err.message));
    return;
  }
  state.profiles = profiles;
  clear(root);
  root.appendChild(h("div.panel-head", h("h2", "Profiles"), h("span.spacer"),
    h("span.hint", "The agents tasks are assigned to. Descriptions route decomposed work; add profiles with ",
      h("code", "agentboard profiles add"), ".")));
  if (!profiles.length) {
    root.appendChild(h("div.panel-empty", "No profiles yet. A profile says how to start an agent: ",
      h("code", 'agentboard profiles add NAME --command "…"'), "."));
    return;
  }
  const counts = countByAssignee();
  root.appendChild(h("div.profiles", profiles.map((p) => profileRow(p, counts[p.name] || {}))));
}

function countByAssignee() {
  const out = {};
  for (const c of state.cards.values()) {
    if (!c.assignee) continue;
    (out[c.assignee] ||= {})[c.status] = ((out[c.assignee] || {})[c.status] || 0) + 1;
  }
  return out;
}

function profileRow(p, counts) {
  const desc = h("textarea.profile-desc", { rows: 2, "aria-label": `description of ${p.name}`, placeholder: "What this agent is good at (used to route work)" });
  desc.value = p.description || "";
  const status = h("span.save-state");
  const save = async () => {
    if (desc.value === (p.description || "")) return;
    try {
      const out = await api.patch(`/api/profiles/${encodeURIComponent(p.name)}`, { description: desc.value });
      p.description = (out && out.description) ?? desc.value;
      status.textContent = "saved";
      setTimeout(() => { status.textContent = ""; }, 2000);
    } catch (err) {
      status.textContent = "";
      toast(`Cannot save ${p.name}: ${err.message}`, "error");
    }
  };
  desc.addEventListener("keydown", (ev) => { if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); save(); } });
  const check = profileCheck(p);
  return h("article.profile", { dataset: { name: p.name } },
    h("header.profile-head",
      h("span.avatar", p.name.slice(0, 1).toUpperCase()),
      h("h3.profile-name", p.name),
      p.adapter ? h("span.pill", p.adapter) : null,
      p.orchestrator ? h("span.pill.pill-goal", "orchestrator") : null,
      p.model ? h("span.pill", { title: "model" }, p.model) : null,
      p.max_concurrency ? h("span.pill", { title: "at most this many running at once" }, `≤ ${p.max_concurrency} at once`) : null,
      p.enabled === false ? h("span.pill.pill-fail", "disabled") : null,
      h("span.spacer"),
      h("span.profile-counts", Object.entries(counts).map(([s, n]) => h("span.goal-count", h(`span.dot.dot-${s}`), `${n} ${s}`)))),
    p.command ? h("code.profile-cmd", Array.isArray(p.command) ? p.command.join(" ") : String(p.command)) : null,
    desc,
    h("div.row-end", status, h("span.spacer"), check.button,
      h("button.btn.btn-sm.profile-save", { type: "button", onclick: save }, "Save description")),
    check.out);
}

// ---- new board -------------------------------------------------------------------------------

export function newBoardDialog() {
  return new Promise((resolve) => {
    const slug = h("input", { type: "text", placeholder: "slug (e.g. research)", "aria-label": "board slug", pattern: "[a-z0-9][a-z0-9_-]{0,63}" });
    const name = h("input", { type: "text", placeholder: "display name", "aria-label": "board name" });
    const description = h("input", { type: "text", placeholder: "description (optional)", "aria-label": "board description" });
    const icon = h("input", { type: "text", placeholder: "icon (optional, e.g. 🧪)", "aria-label": "board icon", maxlength: "8" });
    const error = h("div.form-error", { role: "alert" });
    const close = (value) => { overlay.remove(); resolve(value); };
    const create = async () => {
      const body = { slug: slug.value.trim().toLowerCase() };
      if (name.value.trim()) body.name = name.value.trim();
      if (description.value.trim()) body.description = description.value.trim();
      if (icon.value.trim()) body.icon = icon.value.trim();
      if (!body.slug) { error.textContent = "A slug is required."; return; }
      try {
        const board = await api.post("/api/boards", body);
        close((board && (board.slug || (board.board && board.board.slug))) || body.slug);
      } catch (err) {
        error.textContent = err.message;
      }
    };
    const overlay = h("div.modal-overlay", {
      onmousedown: (ev) => { if (ev.target === overlay) close(null); },
      onkeydown: (ev) => {
        if (ev.key === "Escape") { ev.stopPropagation(); close(null); }
        if (ev.key === "Enter") { ev.preventDefault(); create(); }
      },
    }, h("div.modal", { role: "dialog", "aria-modal": "true", "aria-label": "New board" },
      h("h3.modal-title", "New board"),
      h("p.modal-message", "A board is an isolated queue with its own tasks, workspaces and logs."),
      slug, name, description, icon, error,
      h("div.modal-actions",
        h("button.btn", { type: "button", onclick: () => close(null) }, "Cancel"),
        h("button.btn.btn-primary", { type: "button", onclick: create }, "Create board"))));
    document.body.appendChild(overlay);
    slug.focus();
  });
}
