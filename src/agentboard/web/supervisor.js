// The supervisor panel: who supervises the board, escalations waiting for a person, proposals
// awaiting release (one click to release or discard), goals being verified, the wakes with how
// each ended, and the supervisor's log.

import { api } from "./api.js";
import { ago, ask, clear, h, toast } from "./dom.js";
import { emit, meta, scope, state } from "./state.js";
let wakeFilter = "";

export async function renderSupervisor(root) {
  let panel, log;
  try {
    [panel, log] = await Promise.all([
      api.get("/api/supervisor/panel", scope()),
      api.get("/api/supervisor/log", scope({ limit: 40 })),
    ]);
    if (state.view !== "supervisor") return;
  } catch (err) {
    if (state.view !== "supervisor") return;
    clear(root).appendChild(h("div.panel-error", { role: "alert" }, err.message));
    return;
  }
  clear(root);
  const st = panel.status;
  root.appendChild(head(st, root));
  if (st.problem) root.appendChild(h("div.sup-problem", { role: "status" }, st.problem));
  if (!st.enabled) {
    root.appendChild(h("div.panel-empty", "No supervisor on this board. A supervisor is a profile that never implements: ",
      "it wakes when a task is blocked, gives up or loops, when a goal's tasks are all done, and when a replan is proposed; ",
      "it comments, reprioritizes, proposes, unblocks or escalates to a person. Enable one above, or with ",
      h("code", "agentboard supervisor enable PROFILE"), "."));
  }
  root.appendChild(h("div.sup-grid",
    section(`Escalations waiting for a person (${panel.escalations.length})`, panel.escalations.map(escalation),
      "Nothing waits for a person."),
    section(`Proposals awaiting release (${panel.proposals.length})`, panel.proposals.map((p) => proposal(p, root)),
      "No proposals from the supervisor or the replan rule."),
    section(`Goals being verified (${panel.verifying.length})`, panel.verifying.map((g) => verifying(g, root)),
      "No goal is waiting for its acceptance check.")));
  root.appendChild(wakesSection(panel.wakes, root));
  root.appendChild(section("Log", log.map(logLine), "The supervisor has not acted yet."));
}

function head(st, root) {
  const counts = h("span.sup-counts", meta.wakeStatuses.map((s) => h(`span.pill.wake-${s}`, `${st.wakes[s] || 0} ${s}`)));
  let control;
  if (st.enabled) {
    control = h("button.btn.btn-sm", { type: "button", onclick: async () => {
      if (!(await ask({ title: "Stop supervising this board?", message: "Pending wakes close as moot.", confirm: "Disable", danger: true }))) return;
      try { await api.post("/api/supervisor/disable", {}, scope()); renderSupervisor(root); }
      catch (err) { toast(err.message, "error"); }
    } }, "Disable");
  } else {
    const pick = h("select.sup-profile", { "aria-label": "supervisor profile" },
      state.profiles.map((p) => h("option", { value: p.name, selected: p.name === "supervisor" }, p.name)));
    control = h("span.sup-enable", pick, h("button.btn.btn-primary.btn-sm", { type: "button", disabled: !state.profiles.length,
      title: state.profiles.length ? "" : "add a profile first (agentboard profiles add)",
      onclick: async () => {
        try { await api.post("/api/supervisor/enable", { profile: pick.value }, scope()); renderSupervisor(root); }
        catch (err) { toast(err.message, "error"); }
      } }, "Enable"));
  }
  return h("div.sup-head",
    h("div.panel-head",
      h("h2", "Supervisor"),
      h("span.pill.sup-who", { title: st.enabled ? `supervised by ${st.profile}` : "" },
        st.enabled ? `supervised by ${st.profile}` : "not supervised"),
      counts, h("span.spacer"),
      control),
    working(st.working || []));
}

/** What the supervisor is working on: its supervision tasks, one link each, as a list of their
 * own under the header (a busy supervisor has many). */
function working(tasks) {
  if (!tasks.length) return null;
  return h("div.sup-working", h("span.hint", `Working on (${tasks.length}):`),
    h("ul.sup-working-list", tasks.map((t) => h("li", taskLink(t.id, t.title)))));
}

function section(title, items, empty) {
  return h("section.sup-section", h("h3", title), items.length ? h("ul.sup-list", items) : h("div.hint", empty));
}

/** A task's title as a link that opens it; a long title wraps inside its card (at most three
 * lines, then an ellipsis; the whole title on hover). */
function taskLink(id, title) {
  return h("button.link-btn.sup-link", { type: "button", title: title ? `${id} · ${title}` : id, onclick: () => emit("open", id) },
    h("span.sup-link-text", title || id));
}

/** An escalation: the task's title on a line of its own, then who must decide, what, and when. */
function escalation(t) {
  return h("li.sup-item.sup-escalation",
    taskLink(t.id, t.title),
    h("div.sup-meta",
      h("span.pill.block-kind", t.block_to ? `for ${t.block_to}` : "for a person"),
      h("span.block-reason", t.block_reason || ""), h("span.hint", ago(t.updated_at))));
}

function proposal(p, root) {
  const act = (verb) => async () => {
    try { await api.post(`/api/supervisor/tasks/${p.id}/${verb}`); toast(`${verb === "release" ? "released" : "discarded"}: ${p.title}`); renderSupervisor(root); emit("reload"); }
    catch (err) { toast(err.message, "error"); }
  };
  return h("li.sup-item", h("span.sup-what", taskLink(p.id, p.title), " ",
    h("span.hint", `by ${p.created_by || "?"}, ${ago(p.created_at)}`)),
  h("span.sup-actions",
    h("button.btn.btn-primary.btn-sm", { type: "button", onclick: act("release") }, "Release"),
    h("button.btn.btn-sm", { type: "button", onclick: act("discard") }, "Discard")));
}

function verifying(g, root) {
  const verdict = (passed) => async () => {
    const evidence = await ask({ title: passed ? "Mark the goal done" : "Reopen the goal", input: "evidence: what was checked and what it showed", confirm: passed ? "Done" : "Reopen" });
    if (!evidence) return;
    try { await api.post(`/api/supervisor/goals/${g.id}/verdict`, { passed, evidence }, scope()); renderSupervisor(root); }
    catch (err) { toast(err.message, "error"); }
  };
  return h("li.sup-item", h("span.sup-what", g.title), h("span.sup-actions",
    h("button.btn.btn-primary.btn-sm", { type: "button", onclick: verdict(true) }, "Accept"),
    h("button.btn.btn-sm", { type: "button", onclick: verdict(false) }, "Reject")));
}

function wakesSection(wakes, root) {
  const chips = h("span.sup-filter", ["", ...meta.wakeStatuses].map((s) => h(`button.btn.btn-ghost.btn-sm${wakeFilter === s ? ".active" : ""}`, {
    type: "button", "aria-pressed": String(wakeFilter === s), onclick: () => { wakeFilter = s; renderSupervisor(root); },
  }, s || "all")));
  const shown = wakes.filter((w) => !wakeFilter || w.status === wakeFilter);
  const rows = shown.map((w) => h("tr",
    h("td", String(w.id)),
    h("td", h(`span.pill.wake-${w.status}`, w.status)),
    h("td", w.reason),
    h("td", w.subject && w.subject.startsWith("t_") ? taskLink(w.subject) : (w.subject || "")),
    h("td", w.task_id ? taskLink(w.task_id, "supervision") : ""),
    h("td.sup-note", w.note || ""),
    h("td.hint", ago(w.updated_at || w.created_at))));
  return h("section.sup-section.sup-wakes", h("div.sup-wakes-head", h("h3", "Wakes"), chips),
    shown.length ? h("table.sup-table", h("thead", h("tr", ["id", "status", "reason", "subject", "handled by", "note", ""].map((c) => h("th", c)))), h("tbody", rows))
      : h("div.hint", "No wakes."));
}

function logLine(e) {
  const p = e.payload || {};
  const what = p.note || p.excerpt || p.reason || p.why || p.evidence || "";
  return h("li.sup-log", h("span.hint", ago(e.created_at)), h("span.sup-actor", e.actor || "-"), h("span.pill", e.kind),
    e.task_id ? taskLink(e.task_id) : h("span", p.subject || p.goal_id || ""), h("span.block-reason", what));
}
