// The task drawer: editable fields, description, dependencies, status actions, result,
// comments, run history, recent events and the worker log tail. Refreshes live.

import { budgetBlock, diagnosticsBlock } from "./budgets.js";
import { api } from "./api.js";
import { attachmentsBlock } from "./attachments.js";
import { confirmMove } from "./board.js";
import { agoLive, clear, fmtTime, h, toast } from "./dom.js";
import { branchBlock, diffBlock } from "./diff.js";
import { eventsBlock, fetchLog, logPosition, restoreLog, runsBlock, showLogText } from "./history.js";
import { renderInto } from "./markdown.js";
import { notifySection } from "./notify.js";
import { taskPicker } from "./picker.js";
import { raceBlock } from "./race.js";
import { STATUS_LABEL, VERB_LABEL, allows, emit, goalTitle, llmStatus, profileNames, scope, state } from "./state.js";

let root = null;          // the <aside> element
let task = null;          // the last loaded detail
let editing = { title: false, body: false, verify: false };
let loadSeq = 0;
let logText = "";         // the last log tail shown, kept across re-renders
let verifyDraft = null;   // the verify editor's text while it is open, kept across re-renders
const diffView = {};      // the diff section's page and open file, kept across re-renders

const taskPath = (id, tail = "") => `/api/tasks/${encodeURIComponent(id)}${tail}`;

export function initDrawer(el) {
  root = el;
  document.addEventListener("mousedown", (ev) => {
    if (!state.drawerId || !root || root.hidden) return;
    if (root.contains(ev.target)) return;
    // clicks on cards open another task; clicks in modals/toasts/bulk bar belong to them
    if (ev.target.closest(".card, .modal-overlay, #toasts, #bulkbar, .topbar, .toolbar")) return;
    closeDrawer();
  });
}

export function isOpen() {
  return !!state.drawerId;
}

export async function openDrawer(id) {
  if (state.drawerId !== id) {
    editing = { title: false, body: false, verify: false };
    logText = "";
  }
  state.drawerId = id;
  root.hidden = false;
  document.body.classList.add("drawer-open");
  for (const el of document.querySelectorAll(".card.open")) el.classList.remove("open");
  const card = document.querySelector(`.card[data-id="${CSS.escape(id)}"]`);
  if (card) card.classList.add("open");
  if (!task || task.id !== id) {
    clear(root);
    root.appendChild(h("div.drawer-loading", "Loading…"));
  }
  await refreshDrawer();
}

export function closeDrawer() {
  state.drawerId = null;
  task = null;
  editing = { title: false, body: false, verify: false };
  if (!root) return;
  root.hidden = true;
  clear(root);
  document.body.classList.remove("drawer-open");
  for (const el of document.querySelectorAll(".card.open")) el.classList.remove("open");
}

/** Reload the open task (called on open, after every action, and on its live events). */
export async function refreshDrawer() {
  const id = state.drawerId;
  if (!id) return;
  const seq = ++loadSeq;
  let detail;
  try {
    detail = await api.get(taskPath(id), scope());
  } catch (err) {
    if (seq !== loadSeq || state.drawerId !== id) return;
    clear(root);
    root.append(header({ id, title: id, status: "" }), h("div.drawer-error", { role: "alert" }, err.message));
    return;
  }
  if (seq !== loadSeq || state.drawerId !== id) return;
  task = detail.task && !detail.id ? { ...detail.task, ...detail } : detail;
  render();
  loadLog();
}

// ---- rendering ---------------------------------------------------------------------------

function render() {
  // keep what the user is typing: comment draft, open editors, a task picker's search
  const draft = root.querySelector(".comment-input");
  const draftValue = draft ? draft.value : "";
  const draftFocused = draft && document.activeElement === draft;
  const titleEditor = editing.title ? root.querySelector(".title-input") : null;
  const bodyEditor = editing.body ? root.querySelector(".body-editor") : null;
  const pickers = keptPickers();
  const kept = keptFocus();
  const field = typedField();
  const verifyBox = editing.verify ? root.querySelector(".verify-input") : null;
  verifyDraft = verifyBox ? verifyBox.value : null;
  const verifyFocused = verifyBox && document.activeElement === verifyBox;
  const log = logPosition(root);
  const scroll = root.scrollTop;
  clear(root);
  const parts = [
    header(task, titleEditor),
    metaRow(),
    actionRow(),
    backoffNotice(),
    task.status === "blocked" && task.block_reason
      ? h("div.notice.notice-blocked", h("strong", `Blocked (${task.block_kind || "manual"}): `), task.block_reason)
      : null,
    task.status === "todo" && task.block_kind === "held"
      ? h("div.notice", h("strong", "Held: "), task.block_reason || "a person put it in todo")
      : null,
    diagnosticsBlock({ task: task.id }, refreshDrawer),
    budgetBlock({ scope: "task", ref: task.id }),
    section("Description", descriptionBlock(bodyEditor), editing.body ? null : h("button.link-btn.body-edit", {
      type: "button", onclick: () => { editing.body = true; render(); focusSoon(".body-editor textarea"); },
    }, "edit")),
    task.race_until ? section("Race", raceBlock(task, refreshDrawer)) : null,
    task.result || task.status === "done" ? section("Result", resultBlock()) : null,
    task.git ? section("Branch", branchBlock(task)) : null,
    task.git || task.workspace_kind === "dir" ? section("Diff", diffBlock(task, diffView),
      h("button.link-btn", { type: "button", onclick: () => { diffView.data = null; render(); } }, "refresh")) : null,
    section("Dependencies", depsBlock(pickers)),
    section(`Comments (${(task.comments || []).length})`, commentsBlock(draftValue)),
    section(`Attachments (${(task.attachments || []).length})`, attachmentsBlock(task, () => { emit("reload"); refreshDrawer(); })),
    section(`Runs (${(task.runs || []).length})`, runsBlock(task)),
    notifySection(task),
    section("Events", eventsBlock(task)),
    section("Worker log", h("pre.log-tail", { "aria-label": "worker log" }, logText),
      h("button.link-btn", { type: "button", onclick: loadLog }, "refresh")),
  ];
  root.append(...parts.filter(Boolean));
  root.scrollTop = scroll;
  restoreLog(root, log);
  if (draftFocused) root.querySelector(".comment-input").focus();
  if (field) restoreField(field);
  if (verifyFocused) root.querySelector(".verify-input")?.focus();
  if (kept) restoreFocus(kept);
}

/** The field the user is typing in when it is one that a refresh moves into the new drawer as
 * it is (the title and description editors, a task picker): moving an element out of the page
 * takes its focus away, and the next keys would reach the page's shortcuts instead. */
function keptFocus() {
  const el = document.activeElement;
  if (!el || !root.contains(el) || !el.matches(".title-input, .body-input, .picker-input")) return null;
  let caret = null;
  try { caret = [el.selectionStart, el.selectionEnd, el.selectionDirection]; } catch { /* no caret */ }
  return { el, caret, scroll: el.scrollTop };
}

function restoreFocus({ el, caret, scroll }) {
  if (!el.isConnected || document.activeElement === el) return;
  el.focus({ preventScroll: true });
  if (caret && caret[0] !== null) {
    try { el.setSelectionRange(caret[0], caret[1], caret[2] || "none"); } catch { /* not a text field */ }
  }
  el.scrollTop = scroll;
}

/** The meta field the user is typing in (its class, value and caret), so that a live refresh
 * arriving meanwhile does not throw the typed value away or take the focus from it. */
const KEPT_FIELDS = [".meta-priority", ".meta-model"];
function typedField() {
  const el = document.activeElement;
  const sel = el && root.contains(el) ? KEPT_FIELDS.find((s) => el.matches(s)) : null;
  if (!sel) return null;
  let caret = null;
  try { caret = [el.selectionStart, el.selectionEnd]; } catch { /* a number input has no caret */ }
  return { sel, value: el.value, caret };
}

function restoreField({ sel, value, caret }) {
  const el = root.querySelector(sel);
  if (!el) return;
  el.value = value;
  el.focus();
  if (caret && caret[0] !== null) {
    try { el.setSelectionRange(caret[0], caret[1]); } catch { /* not a text field */ }
  }
}

/** Save a meta field when it changes or loses the focus (a value carried over a refresh is set
 * by the script, which fires no change): each value once, compared with the task's own. */
function onCommit(el, save) {
  let sent = null;
  const commit = async () => {
    if (el.value === sent) return;
    sent = el.value;
    if (!(await save())) sent = null;
  };
  el.addEventListener("change", commit);
  el.addEventListener("blur", commit);
  el.addEventListener("keydown", (ev) => { if (ev.key === "Enter") el.blur(); });
}

/** A triage task whose specify / decompose failed: when auto mode tries again. */
function backoffNotice() {
  const card = state.cards.get(task.id);
  const b = task.status === "triage" && card && card.decompose_backoff;
  if (!b) return null;
  return h("div.notice.notice-backoff", h("strong", `Decompose failed (${b.attempts}×): `), b.error || "",
    b.retry_at ? ` — auto mode retries ${fmtTime(b.retry_at)}` : "");
}

function focusSoon(sel) {
  requestAnimationFrame(() => { const el = root.querySelector(sel); if (el) el.focus(); });
}

function section(title, body, action = null) {
  return h("section.drawer-section", h("h4.section-title", h("span", title), action), body);
}

function header(t, keptEditor = null) {
  let titleEl;
  if (keptEditor) {
    titleEl = keptEditor;
  } else if (editing.title) {
    titleEl = titleInput(t);
  } else {
    titleEl = h("h2.drawer-title", {
      title: "click to rename", tabindex: "0",
      onclick: () => { editing.title = true; render(); focusSoon(".title-input"); },
      onkeydown: (ev) => { if (ev.key === "Enter") { editing.title = true; render(); focusSoon(".title-input"); } },
    }, t.title);
  }
  return h("header.drawer-head",
    h("div.drawer-idrow",
      t.status ? h(`span.dot.dot-${t.status}`) : null,
      h("span.status-label", STATUS_LABEL[t.status] || t.status || ""),
      h("code.drawer-id", t.id),
      h("span.spacer"),
      h("button.icon-btn.drawer-close", { type: "button", "aria-label": "close", title: "close (Esc)", onclick: closeDrawer }, "×")),
    titleEl);
}

function titleInput(t) {
  const input = h("textarea.title-input", { rows: 2, "aria-label": "title" });
  input.value = t.title;
  const stop = () => { editing.title = false; render(); };
  input.addEventListener("keydown", async (ev) => {
    if (ev.key === "Escape") { ev.preventDefault(); ev.stopPropagation(); stop(); }
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      const value = input.value.trim();
      if (!value || value === t.title) { stop(); return; }
      if (await patch({ title: value })) { editing.title = false; await refreshDrawer(); }
    }
  });
  input.addEventListener("blur", () => {
    // leaving the field without Enter keeps the old title
    setTimeout(() => { if (editing.title && document.activeElement !== input) stop(); }, 150);
  });
  return input;
}

async function patch(fields, id = task.id) {
  try {
    await api.patch(taskPath(id), fields, scope());
    emit("reload");
    return true;
  } catch (err) {
    toast(err.message, "error");
    return false;
  }
}

function metaRow() {
  const names = profileNames();
  if (task.assignee && !names.includes(task.assignee)) names.unshift(task.assignee);
  const assignee = h("select.meta-assignee", { "aria-label": "assignee", disabled: !allows("assign", task.status) },
    h("option", { value: "" }, "unassigned"),
    names.map((n) => h("option", { value: n, selected: n === task.assignee }, n)));
  assignee.addEventListener("change", async () => {
    if (await patch({ assignee: assignee.value || null })) refreshDrawer();
  });
  // a text field (numeric keyboard): its selection survives a live refresh while the person
  // types, which a number field's cannot (typing after a refresh then landed beside the old value)
  const priority = h("input.meta-priority", { type: "text", inputmode: "numeric", pattern: "-?[0-9]*",
    value: String(task.priority ?? 0), "aria-label": "priority" });
  onCommit(priority, async () => {
    const saved = task.priority ?? 0;
    const typed = priority.value.trim();
    // a whole number, or nothing is sent: the field shows the saved value again and says why
    const refuse = (why) => { toast(`${why}; the priority stays ${saved}`, "error"); priority.value = String(saved); return true; };
    if (!typed) return refuse("Priority cannot be empty: give a whole number (0 is the default)");
    if (!/^[-+]?\d+$/.test(typed)) return refuse(`Priority “${typed}” is not a whole number`);
    const v = Number(typed);
    if (v === saved) { priority.value = String(saved); return true; }
    const ok = await patch({ priority: v });
    if (ok) refreshDrawer();
    else priority.value = String(saved);  // refused (out of range): the toast has the server's reason
    return ok;
  });
  // the task's own model, handed to whichever agent CLI runs it; empty: the profile's
  const model = h("input.meta-model", { type: "text", value: task.model || "", maxlength: "200", placeholder: "the profile's model",
    "aria-label": "model", title: "the model the agent CLI runs this task with (e.g. claude-sonnet-4-5, openai/gpt-5); empty: the profile's" });
  onCommit(model, async () => {
    const v = model.value.trim();
    if (v === (task.model || "")) return true;
    const ok = await patch({ model: v });
    if (ok) refreshDrawer();
    return ok;
  });
  return h("div.meta-grid",
    h("label", "Assignee"), assignee,
    h("label", "Priority"), priority,
    h("label", "Model"), model,
    task.status === "blocked" && task.block_kind === "rate_limited" && task.cooldown_until
      ? [h("label", "Resumes"), h("span", { title: fmtTime(task.cooldown_until) }, `${fmtTime(task.cooldown_until)} (after its rate limit)`)] : null,
    task.tenant ? [h("label", "Tenant"), h("span.pill.pill-tenant", task.tenant)] : null,
    task.goal_id ? [h("label", "Goal"), goalPill()] : null,
    h("label", "Created"), h("span", { title: fmtTime(task.created_at) }, agoLive(task.created_at), task.created_by ? ` by ${task.created_by}` : ""),
    task.started_at ? [h("label", "Started"), h("span", { title: fmtTime(task.started_at) }, agoLive(task.started_at))] : null,
    task.completed_at ? [h("label", "Completed"), h("span", { title: fmtTime(task.completed_at) }, agoLive(task.completed_at))] : null,
    task.workspace_kind ? [h("label", "Workspace"), h("code.wrap", task.workspace_path ? `${task.workspace_kind}: ${task.workspace_path}` : task.workspace_kind)] : null,
    [h("label", "Verify"), verifyField()],
    task.consecutive_failures ? [h("label", "Failures"), h("span.text-danger", `${task.consecutive_failures} in a row${task.last_failure_error ? ` — ${task.last_failure_error}` : ""}`)] : null);
}

/** The task's goal: a pill as wide as the drawer at most, a long title ending in an ellipsis
 * (the whole title on hover). */
function goalPill() {
  const title = (task.goal && task.goal.title) || goalTitle(task.goal_id);
  return h("span.pill.pill-goal.meta-goal", { title: `goal: ${title}` }, "◎ ", h("span.pill-text", title));
}

/** The task's verify commands; "edit" opens a box with one command a line (empty: none). */
function verifyField() {
  const cmds = task.verify || [];
  if (editing.verify) {
    const box = h("textarea.verify-input", { rows: Math.max(2, cmds.length + 1), "aria-label": "verify commands" });
    box.value = verifyDraft ?? cmds.join("\n");
    const save = async () => {
      const verify = box.value.split("\n").map((c) => c.trim()).filter(Boolean);
      if (await patch({ verify })) {
        editing.verify = false;
        refreshDrawer();
      }
    };
    return h("span.verify-editor", box,
      h("button.btn.btn-sm.btn-primary.verify-save", { type: "button", onclick: save }, "Save"),
      h("button.btn.btn-sm", { type: "button", onclick: () => { editing.verify = false; render(); } }, "Cancel"));
  }
  return h("span.verify-view",
    cmds.length ? cmds.map((c) => h("code.verify-cmd", c)) : h("span.muted", "none"),
    h("button.link-btn.verify-edit", { type: "button", onclick: () => {
      editing.verify = true;
      verifyDraft = null;
      render();
      focusSoon(".verify-input");
    } }, "edit"));
}

// ---- status actions --------------------------------------------------------------------------

/** The task's moves: exactly those the server says it allows now (``moves`` of the detail,
 * from the transition table), one button each; the LLM helpers on a triage task. */
function actionRow() {
  const moves = task.moves || [];
  const perVerb = {};
  for (const m of moves) perVerb[m.verb] = (perVerb[m.verb] || 0) + 1;
  const tone = { approve: ".btn-ok", complete: ".btn-ok", block: ".btn-warn", reject: ".btn-warn", archive: ".btn-danger" };
  const btns = moves.map((m) => {
    const base = VERB_LABEL[m.verb] || m.verb.replace("_", " ");
    const label = perVerb[m.verb] > 1 ? `${base} → ${STATUS_LABEL[m.status]}` : base;
    return h(`button.btn.btn-sm${tone[m.verb] || ""}`, {
      type: "button", dataset: { action: m.status, verb: m.verb }, title: `${m.verb.replace("_", " ")}: to ${m.status}`,
      onclick: () => setStatus(m.status),
    }, label);
  });
  if (task.status === "triage") btns.push(llmButton("Specify", "specify"), llmButton("Decompose", "decompose"));
  return h("div.action-row", btns);
}

/** The LLM helpers: greyed, with the reason as tooltip, while no LLM is available. */
function llmButton(label, kind) {
  const { available, reason } = llmStatus();
  const title = available
    ? (kind === "specify" ? "rewrite with the LLM (goal, approach, acceptance criteria) and release"
      : "split with the LLM into linked tasks for the roster's profiles")
    : reason;
  return h("button.btn.btn-sm.btn-accent", {
    type: "button", dataset: { llm: kind }, disabled: !available, title,
    onclick: (ev) => runLlm(kind, ev.currentTarget),
  }, label);
}

async function runLlm(kind, btn) {
  const id = task.id;
  btn.disabled = true;
  btn.textContent = kind === "specify" ? "Specifying…" : "Decomposing…";
  try {
    const out = await api.post(taskPath(id, `/${kind}`), {}, scope());
    if (out.ok) {
      const n = (out.children || []).length;
      toast(n ? `Decomposed ${id} into ${n} tasks` : `Specified ${id}`, "ok");
    } else {
      toast(out.reason || `${kind} failed`, "error", 10000);
    }
  } catch (err) {
    toast(`${kind} failed: ${err.message}`, "error");
  }
  emit("reload");
  if (state.drawerId === id) refreshDrawer();
}

/** A move the person confirms runs only from the status they saw: the server refuses it (409,
 * naming the status the task is in now; the toast says so) when a worker, a reviewer or another
 * tab moved the task while the dialog was open, and the drawer shows the task as it is now. */
async function setStatus(status) {
  const { id, status: seen } = task;
  const extra = await confirmMove(status, 1, task.title, seen);
  if (extra === null) return;
  if (!(await patch({ status, expected_status: seen, ...extra }, id))) emit("reload");
  if (state.drawerId === id) refreshDrawer();
}

// ---- description and result ----------------------------------------------------------------

function descriptionBlock(kept) {
  if (kept) return kept;
  if (editing.body) {
    const area = h("textarea.body-input", { rows: 12, "aria-label": "description" });
    area.value = task.body || "";
    const save = async () => {
      if (await patch({ body: area.value })) { editing.body = false; await refreshDrawer(); }
    };
    const cancel = () => { editing.body = false; render(); };
    area.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape") { ev.preventDefault(); ev.stopPropagation(); cancel(); }
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); save(); }
    });
    return h("div.body-editor", area,
      h("div.row-end",
        h("span.hint", "Markdown · Ctrl+Enter saves · Esc cancels"),
        h("span.spacer"),
        h("button.btn.btn-sm", { type: "button", onclick: cancel }, "Cancel"),
        h("button.btn.btn-sm.btn-primary.body-save", { type: "button", onclick: save }, "Save")));
  }
  if (!task.body) return h("div.md.empty", "No description.");
  return renderInto(h("div.md.task-body"), task.body);
}

function resultBlock() {
  const runs = task.runs || [];
  const last = [...runs].reverse().find((r) => r.outcome === "completed" || r.outcome === "review_requested");
  return h("div.result",
    task.result ? h("div.result-line", task.result) : null,
    last && last.summary && last.summary !== task.result ? renderInto(h("div.md.result-summary"), last.summary) : null,
    !task.result && !(last && last.summary) ? h("div.md.empty", "No result recorded.") : null);
}

// ---- dependencies ------------------------------------------------------------------------

/** The dependency pickers to carry into the re-rendered drawer (the same elements): one the person
 * is in, or has typed a search into, keeps its text, its list and the focus. */
function keptPickers() {
  const out = {};
  for (const role of ["parent", "child"]) {
    const el = root.querySelector(`.dep-add-${role}`);
    const input = el && el.querySelector(".picker-input");
    if (input && (document.activeElement === input || input.value)) out[role] = el;
  }
  return out;
}

function depsBlock(kept = {}) {
  const error = h("div.form-error.dep-error", { role: "alert" });
  const chip = (t, role) => h(`span.chip.chip-${t.status}`, { dataset: { id: t.id }, title: `${t.id} · ${t.status}` },
    h(`span.dot.dot-${t.status}`),
    h("button.chip-label", { type: "button", onclick: () => openDrawer(t.id) }, t.title),
    h("button.chip-x", {
      type: "button", "aria-label": `remove ${role} ${t.id}`, title: `unlink ${role}`,
      onclick: () => unlink(role === "parent" ? t.id : task.id, role === "parent" ? task.id : t.id, error),
    }, "×"));
  // every task of the board may be linked, found by the server as the person types (not only
  // the cards the board has loaded); the task itself and those linked already are left out
  const linked = () => new Set([task.id, ...(task.parents || []).map((p) => p.id), ...(task.children || []).map((c) => c.id)]);
  const picker = (role) => kept[role] || taskPicker({
    cls: `dep-add.dep-add-${role}`, label: `add ${role}`, placeholder: `+ add ${role}… (type to search)`,
    exclude: linked,
    onPick: (other) => {
      const errorEl = root.querySelector(".dep-error") || error;
      link(role === "parent" ? other.id : task.id, role === "parent" ? task.id : other.id, errorEl);
    },
  });
  return h("div.deps",
    h("div.dep-group", h("span.dep-label", "Parents"),
      h("div.chips.dep-parents", (task.parents || []).map((p) => chip(p, "parent")), picker("parent"))),
    h("div.dep-group", h("span.dep-label", "Children"),
      h("div.chips.dep-children", (task.children || []).map((c) => chip(c, "child")), picker("child"))),
    error);
}

async function link(parent, child, errorEl) {
  errorEl.textContent = "";
  try {
    await api.post("/api/links", { parent_id: parent, child_id: child }, scope());
    emit("reload");
    await refreshDrawer();
  } catch (err) {
    const el = root.querySelector(".dep-error") || errorEl;
    el.textContent = err.message;
  }
}

async function unlink(parent, child, errorEl) {
  errorEl.textContent = "";
  try {
    await api.del("/api/links", scope({ parent_id: parent, child_id: child }));
    emit("reload");
    await refreshDrawer();
  } catch (err) {
    const el = root.querySelector(".dep-error") || errorEl;
    el.textContent = err.message;
  }
}

// ---- comments and the worker log -------------------------------------------------------------

function commentsBlock(draft) {
  const list = h("ol.comments", (task.comments || []).map((c) => h(`li.comment.comment-${c.kind || "comment"}`,
    h("div.comment-head", h("span.comment-author", c.author || "someone"),
      c.kind && c.kind !== "comment" ? h("span.pill", c.kind) : null,
      h("span.comment-time", { title: fmtTime(c.created_at) }, agoLive(c.created_at))),
    renderInto(h("div.md.comment-body"), c.body))));
  const input = h("textarea.comment-input", {
    rows: 2, placeholder: "Comment — Enter sends, Shift+Enter adds a line. @profile hands it a follow-up task.",
    "aria-label": "comment",
  });
  input.value = draft;
  const error = h("div.form-error", { role: "alert" });
  input.addEventListener("keydown", async (ev) => {
    if (ev.key !== "Enter" || ev.shiftKey || ev.isComposing) return;
    ev.preventDefault();
    const body = input.value.trim();
    if (!body) return;
    input.disabled = true;
    try {
      await api.post(taskPath(task.id, "/comments"), { body }, scope());
      input.value = "";
      error.textContent = "";
      emit("reload");
      await refreshDrawer();
      const next = root.querySelector(".comment-input");
      if (next) { next.value = ""; next.focus(); }
    } catch (err) {
      error.textContent = err.message;
    } finally {
      input.disabled = false;
    }
  });
  return h("div", list, input, error);
}

async function loadLog() {
  const id = state.drawerId;
  if (!id || !root || !root.querySelector(".log-tail")) return;
  if (task && task.id === id && !(task.runs || []).length) {
    showLog(id, "(no runs yet)");
    return;
  }
  let text;
  try {
    text = (await fetchLog(taskPath(id, "/log"))) || "(no log yet)";
  } catch (err) {
    text = err.status === 404 ? "(no log yet)" : `(log unavailable: ${err.message})`;
  }
  showLog(id, text);
}

function showLog(id, text) {
  if (state.drawerId !== id) return;
  logText = text;
  const target = root.querySelector(".log-tail");
  if (target) showLogText(target, text);
}
