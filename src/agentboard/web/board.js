// The board: columns with counts, cards, lanes inside Running, drag and drop, multi-select and
// the bulk bar (the inline create form is web/create.js).

import { raceCard } from "./race.js";
import { decorateCards } from "./budgets.js";
import { api } from "./api.js";
import { openCreate } from "./create.js";
import { $, $$, agoLive, ask, clear, clock, fmtTime, h, toast } from "./dom.js";
import {
  DESTRUCTIVE, STATUSES, STATUS_LABEL, cardMoves, emit, goalTitle, llmStatus, meta as domainMeta, profileNames,
  refusedMove, scope, state,
} from "./state.js";

// ---- icons (inline SVG, no external assets) ----------------------------------------------------

const SVG = "http://www.w3.org/2000/svg";
const ICONS = {
  comment: "M2 3h12v8H6l-3 3v-3H2z",
  link: "M6.5 9.5l3-3M5 7L3.5 8.5a2.1 2.1 0 003 3L8 10M8 6l1.5-1.5a2.1 2.1 0 013 3L11 9",
  clock: "M8 2a6 6 0 100 12A6 6 0 008 2zm0 3v3.5l2.5 1.5",
};

export function icon(name) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("class", "icon");
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", ICONS[name]);
  svg.appendChild(path);
  return svg;
}

// ---- status changes --------------------------------------------------------------------------

/** Ask for confirmation (and a reason for blocks) when a move is destructive. null = cancelled. */
export async function confirmMove(status, count = 1, title = "", from = "") {
  const what = count > 1 ? `${count} tasks` : title ? `“${title}”` : "this task";
  if (status === "done" && from === "review") {
    const ok = await ask({
      title: `Approve ${what}?`,
      message: "Approval accepts the reviewed work: the task becomes done, its children are released, "
        + "and its branch is merged or opened as a pull request when the board's integrate setting says so.",
      confirm: "Approve",
    });
    return ok ? {} : null;
  }
  if (from === "review" && (status === "ready" || status === "todo")) {
    const feedback = await ask({
      title: "Request changes", message: "What should the next attempt change?", input: "feedback", confirm: "Send back",
    });
    if (feedback === null) return null;
    return { reason: feedback.trim() || "sent back from the dashboard" };
  }
  if (from === "review" && status === "blocked") {
    const why = await ask({
      title: `Reject ${what}?`, message: "Say what is wrong with the work: the task is blocked (rejected) until a person unblocks it.",
      input: "reason", confirm: "Reject", danger: true,
    });
    if (why === null) return null;
    return { reason: why.trim() || "rejected from the dashboard" };
  }
  if (from === "running" && (status === "ready" || status === "todo")) {
    const ok = await ask({
      title: `Reclaim ${what}?`, message: `The worker's run is closed as reclaimed and the task goes back to ${STATUS_LABEL[status]}.`,
      confirm: "Reclaim", danger: true,
    });
    return ok ? {} : null;
  }
  if (status === "blocked") {
    const reason = await ask({
      title: `Block ${what}?`, message: "Say what it is waiting for.", input: "reason",
      confirm: "Block", danger: true,
    });
    if (reason === null) return null;
    return { reason: reason.trim() || "blocked from the dashboard" };
  }
  if (DESTRUCTIVE.has(status)) {
    const verbs = { archived: "Archive", done: "Mark as done" };
    const ok = await ask({
      title: `${verbs[status]} ${what}?`,
      message: status === "archived"
        ? "Archived tasks leave the board; an open run is closed as reclaimed."
        : "Completing by hand records a run without a worker and releases its children.",
      confirm: verbs[status], danger: true,
    });
    return ok ? {} : null;
  }
  return {};
}

/** PATCH one task's status (the server maps it to the kernel verb). Returns true on success.
 * ``seen``: the card as the person saw it (a dragged card); its status goes with the move, and
 * the server refuses the move (409, naming the status now) when the task has left it meanwhile. */
export async function moveTask(id, status, { skipConfirm = false, onConfirmed = null, seen = null } = {}) {
  const card = seen || state.cards.get(id);
  let extra = {};
  if (!skipConfirm) {
    extra = await confirmMove(status, 1, card ? card.title : "", card ? card.status : "");
    if (extra === null) return false;
  }
  if (onConfirmed) onConfirmed();
  const expected = card ? { expected_status: card.status } : {};
  try {
    await api.patch(`/api/tasks/${encodeURIComponent(id)}`, { status, ...expected, ...extra }, scope());
    return true;
  } catch (err) {
    toast(`Cannot move ${id} to ${status}: ${err.message}`, "error");
    return false;
  } finally {
    emit("reload");
  }
}

// ---- rendering -----------------------------------------------------------------------------

export function renderBoard(root) {
  const data = state.data;
  // keep what the user is in the middle of: open create forms, focus, scroll positions
  const forms = new Map();
  const scrolls = new Map();
  for (const col of $$(".column", root)) {
    const form = col.querySelector(".create-form");
    if (form) forms.set(col.dataset.status, form);
    scrolls.set(col.dataset.status, col.querySelector(".column-body").scrollTop);
  }
  const focused = document.activeElement;
  const boardScroll = root.scrollLeft;
  clear(root);
  if (!data) return;
  const byStatus = new Map(data.columns.map((c) => [c.status, c]));
  for (const status of STATUSES) {
    if (status === "archived" && !state.showArchived) continue;
    const col = byStatus.get(status) || { status, count: 0, tasks: [] };
    const el = renderColumn(col);
    if (forms.has(status)) el.querySelector(".column-create").appendChild(forms.get(status));
    root.appendChild(el);
    if (scrolls.has(status)) el.querySelector(".column-body").scrollTop = scrolls.get(status);
  }
  root.scrollLeft = boardScroll;
  if (focused && focused.isConnected && focused !== document.activeElement) focused.focus();
  syncSelection();
  if (state.board) decorateCards(root, state.board, { onFixed: () => emit("reload") });
}

function renderColumn(col) {
  const status = col.status;
  const body = h("div.column-body");
  if (status === "running" && state.lanes && col.lanes) {
    for (const lane of col.lanes) {
      body.appendChild(h("div.lane", { dataset: { assignee: lane.assignee } },
        h("div.lane-head", h("span.lane-name", lane.assignee), h("span.lane-count", String(lane.tasks.length))),
        lane.tasks.map(renderCard)));
    }
  } else {
    for (const card of col.tasks) body.appendChild(renderCard(card));
  }
  if (!col.tasks.length) body.appendChild(h("div.column-empty", "No tasks"));
  if (col.count > col.tasks.length) {
    body.appendChild(h("div.column-more", `showing ${col.tasks.length} of ${col.count} — filter to narrow`));
  }
  const addBtn = domainMeta.createStatuses.includes(status)
    ? h("button.icon-btn.column-add", {
      type: "button", title: `New task in ${STATUS_LABEL[status]}`, "aria-label": `New task in ${STATUS_LABEL[status]}`,
      onclick: () => openCreate(status),
    }, "+")
    : null;
  // an empty column narrows (app.css), so on a laptop's window the columns with cards are seen
  // whole before the board scrolls sideways
  return h(col.tasks.length ? "section.column" : "section.column.column-is-empty",
    { dataset: { status }, "aria-label": STATUS_LABEL[status] },
    h("header.column-head",
      h(`span.dot.dot-${status}`),
      h("span.column-name", STATUS_LABEL[status]),
      h("span.column-count", String(col.count)),
      h("span.spacer"),
      addBtn),
    h("div.column-create"),
    body);
}

function renderCard(card) {
  const checked = state.selection.has(card.id);
  const pills = [];
  const prio = card.priority
    ? h(`span.pill.pill-prio${card.priority > 0 ? ".prio-high" : ".prio-low"}`, { title: "priority" }, `P${card.priority}`)
    : null;
  if (card.tenant) pills.push(h("span.pill.pill-tenant", { title: `tenant: ${card.tenant}` }, h("span.pill-text", card.tenant)));
  if (card.goal_id) pills.push(h("span.pill.pill-goal", { title: `goal: ${goalTitle(card.goal_id)}` }, "◎ ", h("span.pill-text", goalTitle(card.goal_id))));
  if (card.child_count) {
    const done = card.children_done || 0;
    pills.push(h(`span.pill.pill-progress${done === card.child_count ? ".complete" : ""}`,
      { title: `${done} of ${card.child_count} children done` }, `${done}/${card.child_count}`));
  }
  if (card.review_required) pills.push(h("span.pill.pill-review", { title: "review required" }, "review"));
  if (card.model) pills.push(h("span.pill.pill-model", { title: `model: ${card.model} (over the profile's)` }, h("span.pill-text", card.model)));
  if (card.decompose_backoff) {
    const b = card.decompose_backoff;
    pills.push(h("span.pill.pill-fail.pill-backoff", {
      title: `decompose failed ${b.attempts}×: ${b.error || ""}${b.retry_at ? ` — auto mode retries ${fmtTime(b.retry_at)}` : ""}`,
    }, `⚠ decompose ${b.retry_at && b.retry_at * 1000 > Date.now() ? `retry in ${Math.ceil((b.retry_at - Date.now() / 1000) / 60)}m` : "failed"}`));
  }
  if (card.assignee_unknown) {
    pills.push(h("span.pill.pill-fail.pill-unknown-assignee", {
      title: `no profile named ${card.assignee}: the dispatcher will not start this task until one is added`,
    }, "⚠ no such profile"));
  }
  if (card.degraded) {
    pills.push(h("span.pill.pill-fail.pill-degraded", {
      title: "the worker's result never validated: the summary was extracted from its output",
    }, "degraded result"));
  }
  if (card.integration) {
    const labels = { merged: "⎇ merged", squashed: "⎇ squashed", rebased: "⎇ rebased", pr_opened: "⎇ PR",
      left: "⎇ branch kept", refused: "⎇ not merged" };
    pills.push(h(`span.pill.pill-git.pill-git-${card.integration}`, {
      title: card.pr_url ? `pull request: ${card.pr_url}` : `${card.branch_name || "branch"}: ${card.integration.replace("_", " ")}`,
    }, labels[card.integration] || card.integration));
  }
  if (card.consecutive_failures) {
    pills.push(h("span.pill.pill-fail", { title: "consecutive failures" }, `⚠ ${card.consecutive_failures}`));
  }
  const links = (card.parent_count || 0) + (card.child_count || 0);
  const meta = [
    h(`span.assignee${card.assignee ? "" : ".unassigned"}`, { title: card.assignee ? `assignee: ${card.assignee}` : "unassigned" },
      h("span.avatar", (card.assignee || "?").slice(0, 1).toUpperCase()), h("span.assignee-name", card.assignee || "unassigned")),
    h("span.spacer"),
    card.comment_count ? h("span.meta-count", { title: `${card.comment_count} comments` }, icon("comment"), String(card.comment_count)) : null,
    links ? h("span.meta-count", { title: `${card.parent_count || 0} parents, ${card.child_count || 0} children` }, icon("link"), String(links)) : null,
    // a running card's clock: how long its current attempt has run (run_started_at: the current
    // run's start; started_at is the first attempt's)
    card.status === "running" && (card.run_started_at || card.started_at)
      ? h("span.meta-time", { title: `this attempt started ${fmtTime(card.run_started_at || card.started_at)}` },
        icon("clock"), clock(card.run_started_at || card.started_at))
      : h("span.meta-time", { title: `created ${fmtTime(card.created_at)}` }, h("span.meta-word", "created "), agoLive(card.created_at)),
  ];
  const el = h(`article.card${checked ? ".selected" : ""}`, {
    tabindex: "0", dataset: { id: card.id, status: card.status },
    "aria-label": card.title,
  },
  h("div.card-top",
    h("input.card-check", {
      type: "checkbox", checked, title: "select", "aria-label": `select ${card.id}`,
      onclick: (ev) => { ev.stopPropagation(); toggleSelect(card.id, ev.target.checked); },
    }),
    h("span.card-id", card.id),
    h("span.spacer"),
    prio),
  h("div.card-title", card.title),
  pills.length ? h("div.pills", pills) : null,
  card.race ? raceCard(card.race) : null,
  card.status === "blocked" && card.block_reason
    ? h("div.card-reason", { title: `${card.block_kind || "blocked"}: ${card.block_reason}` }, card.block_reason) : null,
  card.status === "todo" && card.block_kind === "held" && card.block_reason
    ? h("div.card-reason.card-held", { title: card.block_reason }, card.block_reason) : null,
  card.status === "done" && (card.result || card.summary_line)
    ? h("div.card-result", { title: card.result || card.summary_line }, card.result || card.summary_line) : null,
  h("div.card-meta", meta));
  el.addEventListener("click", (ev) => onCardClick(ev, card));
  el.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && ev.target === el) emit("open", card.id);
    if (ev.key === " " && ev.target === el) { ev.preventDefault(); toggleSelect(card.id); }
  });
  el.addEventListener("pointerdown", (ev) => startDrag(ev, el, card));
  return el;
}

// ---- selection and the bulk bar ---------------------------------------------------------------

let lastClicked = null;
let suppressClick = false;

function onCardClick(ev, card) {
  if (suppressClick) { suppressClick = false; return; }
  if (ev.target.closest("input, button, a")) return;
  if (ev.shiftKey && lastClicked) {
    const ids = $$(".card").map((c) => c.dataset.id);
    const a = ids.indexOf(lastClicked);
    const b = ids.indexOf(card.id);
    if (a >= 0 && b >= 0) {
      for (const id of ids.slice(Math.min(a, b), Math.max(a, b) + 1)) state.selection.add(id);
      syncSelection();
      return;
    }
  }
  if (ev.shiftKey || ev.ctrlKey || ev.metaKey) {
    toggleSelect(card.id);
    lastClicked = card.id;
    return;
  }
  lastClicked = card.id;
  emit("open", card.id);
}

export function toggleSelect(id, on) {
  const want = on === undefined ? !state.selection.has(id) : on;
  if (want) state.selection.add(id); else state.selection.delete(id);
  syncSelection();
}

export function clearSelection() {
  state.selection.clear();
  syncSelection();
}

/** Reflect the selection on the cards and the bulk bar. */
export function syncSelection() {
  for (const id of Array.from(state.selection)) if (!state.cards.has(id)) state.selection.delete(id);
  for (const el of $$(".card")) {
    const on = state.selection.has(el.dataset.id);
    el.classList.toggle("selected", on);
    const box = el.querySelector(".card-check");
    if (box) box.checked = on;
  }
  renderBulkBar();
}

let bulkParts = null;

function renderBulkBar() {
  const bar = $("#bulkbar");
  if (!bar) return;
  const n = state.selection.size;
  bar.hidden = n === 0;
  if (!n) return;
  // built once per toolbar and then only updated: a live reload must not swap the controls
  // out from under a user who is choosing from them
  if (!bulkParts || !bar.contains(bulkParts.count)) {
    const status = h("select.bulk-status", { "aria-label": "bulk status" });
    const assignee = h("select.bulk-assignee", { "aria-label": "bulk reassign" });
    status.addEventListener("change", () => {
      const value = status.value;
      status.value = "";
      if (value) bulk("status", { status: value });
    });
    assignee.addEventListener("change", () => {
      const value = assignee.value;
      assignee.value = "";
      if (value) bulk("assign", { assignee: value });
    });
    const archive = h("button.btn.btn-danger.bulk-archive", { type: "button", onclick: () => bulk("archive", {}) }, "Archive");
    bulkParts = { count: h("span.bulk-count"), status, assignee, archive, names: "", moves: "" };
    clear(bar).append(
      bulkParts.count, status, assignee,
      bulkLlm("Specify", "specify"), bulkLlm("Decompose", "decompose"),
      archive,
      h("span.spacer"),
      h("button.btn.bulk-clear", { type: "button", onclick: clearSelection }, "Clear"));
  }
  bulkParts.count.textContent = `${n} selected`;
  // the moves the selected tasks allow (the transition table's, from the server, less those a
  // card's data shows will be refused): each target with how many of the selection may make it
  // when not all may
  const allow = new Map();
  for (const id of state.selection) {
    const card = state.cards.get(id);
    for (const target of card ? cardMoves(card) : []) allow.set(target, (allow.get(target) || 0) + 1);
  }
  const targets = STATUSES.filter((s) => s !== "archived" && allow.has(s));
  const sig = JSON.stringify([n, targets.map((s) => [s, allow.get(s)])]);
  if (bulkParts.moves !== sig) {
    bulkParts.moves = sig;
    clear(bulkParts.status).append(
      h("option", { value: "" }, targets.length ? "Move to…" : "No move for these"),
      ...targets.map((s) => h("option", { value: s }, allow.get(s) === n ? STATUS_LABEL[s] : `${STATUS_LABEL[s]} (${allow.get(s)} of ${n})`)));
    bulkParts.status.disabled = !targets.length;
  }
  const archivable = allow.get("archived") || 0;
  bulkParts.archive.disabled = !archivable;
  bulkParts.archive.textContent = archivable && archivable < n ? `Archive (${archivable} of ${n})` : "Archive";
  const names = profileNames();
  if (bulkParts.names !== names.join("\n")) {
    bulkParts.names = names.join("\n");
    clear(bulkParts.assignee).append(
      h("option", { value: "" }, "Reassign to…"),
      h("option", { value: "-" }, "(unassign)"),
      ...names.map((p) => h("option", { value: p }, p)));
  }
}

/** A bulk LLM action on the selected triage tasks; greyed with the reason without an LLM. */
function bulkLlm(label, kind) {
  const { available, reason } = llmStatus();
  return h(`button.btn.btn-accent.bulk-${kind}`, {
    type: "button", disabled: !available, dataset: { llm: kind },
    title: available ? `${label.toLowerCase()} the selected triage tasks with the LLM` : reason,
    onclick: (ev) => bulkHelper(kind, ev.currentTarget),
  }, label);
}

async function bulkHelper(kind, btn) {
  const ids = Array.from(state.selection).filter((id) => (state.cards.get(id) || {}).status === "triage");
  if (!ids.length) { toast(`Select triage tasks to ${kind}`, "error"); return; }
  btn.disabled = true;
  try {
    const out = await api.post(`/api/tasks/${kind}`, { ids }, scope());
    if (out.reason && !(out.results || []).length) {
      toast(out.reason, "error", 10000);
    } else {
      const failed = (out.results || []).filter((r) => !r.ok);
      if (failed.length) {
        toast(`${ids.length - failed.length} of ${ids.length} done. Failed — ${failed.map((r) => `${r.task_id}: ${r.reason}`).join("; ")}`, "error", 12000);
      } else {
        toast(`${ids.length} task${ids.length > 1 ? "s" : ""} ${kind === "specify" ? "specified" : "decomposed"}`, "ok");
      }
      state.selection = new Set(failed.map((r) => r.task_id));
    }
  } catch (err) {
    toast(`Bulk ${kind} failed: ${err.message}`, "error");
  }
  btn.disabled = false;
  syncSelection();
  emit("reload");
}

async function bulk(action, fields) {
  const ids = Array.from(state.selection);
  if (!ids.length) return;
  // the status each selected card showed when the person chose the move: a task that has left it
  // by the time the server gets there is refused (listed with the status it is in now)
  const seen = {};
  for (const id of ids) {
    const card = state.cards.get(id);
    if (card) seen[id] = card.status;
  }
  if (action === "status" || action === "archive") fields = { ...fields, expected_statuses: seen };
  let extra = {};
  if (action === "status" || action === "archive") {
    extra = await confirmMove(action === "archive" ? "archived" : fields.status, ids.length);
    if (extra === null) return;
  }
  let results;
  try {
    const resp = await api.post("/api/tasks/bulk", { ids, action, ...fields, ...extra }, scope());
    results = Array.isArray(resp) ? resp : resp.results || [];
  } catch (err) {
    toast(`Bulk ${action} failed: ${err.message}`, "error");
    emit("reload");
    return;
  }
  const failed = results.filter((r) => !r.ok);
  if (failed.length) {
    const lines = failed.map((r) => `${r.id}: ${(r.error && r.error.message) || "failed"}`);
    toast(`${ids.length - failed.length} of ${ids.length} updated. Failed — ${lines.join("; ")}`, "error", 12000);
    state.selection = new Set(failed.map((r) => r.id));
  } else {
    toast(`${ids.length} task${ids.length > 1 ? "s" : ""} updated`, "ok");
    state.selection.clear();
  }
  syncSelection();
  emit("reload");
}

// ---- drag and drop (pointer events: mouse, pen and touch) --------------------------------------

let drag = null;

function startDrag(ev, el, card) {
  if (ev.button !== 0 || ev.target.closest("input, button, a, select, textarea")) return;
  drag = { el, card, x0: ev.clientX, y0: ev.clientY, id: ev.pointerId, started: false, ghost: null, target: null };
  document.addEventListener("pointermove", onDragMove);
  document.addEventListener("pointerup", onDragEnd);
  document.addEventListener("pointercancel", cancelDrag);
}

function onDragMove(ev) {
  if (!drag || ev.pointerId !== drag.id) return;
  const dx = ev.clientX - drag.x0;
  const dy = ev.clientY - drag.y0;
  if (!drag.started) {
    if (Math.hypot(dx, dy) < 6) return;
    drag.started = true;
    const rect = drag.el.getBoundingClientRect();
    drag.offX = drag.x0 - rect.left;
    drag.offY = drag.y0 - rect.top;
    drag.ghost = drag.el.cloneNode(true);
    drag.ghost.classList.add("drag-ghost");
    drag.ghost.style.width = `${rect.width}px`;
    document.body.appendChild(drag.ghost);
    drag.el.classList.add("dragging");
    document.body.classList.add("is-dragging");
    // before the pointer reaches one, every column says whether it takes the card: the
    // columns it may move to light up, the others dim (its own column stays as it is)
    const moves = cardMoves(drag.card);
    for (const c of $$(".column")) {
      if (c.dataset.status === drag.card.status) continue;
      c.classList.add(moves.includes(c.dataset.status) ? "drop-allowed" : "drop-dim");
    }
  }
  ev.preventDefault();
  drag.ghost.style.transform = `translate(${ev.clientX - drag.offX}px, ${ev.clientY - drag.offY}px) rotate(1.5deg)`;
  const under = document.elementFromPoint(ev.clientX, ev.clientY);
  const col = under && under.closest(".column");
  if (col !== drag.target) {
    if (drag.target) drag.target.classList.remove("drop-target");
    if (drag.refused) drag.refused.classList.remove("drop-refused");
    drag.refused = null;
    drag.target = null;
    if (col && col.dataset.status !== drag.card.status) {
      // only a column the task may move to (the transition table's moves by hand, less those
      // the card's data shows the server will refuse) takes it
      if (cardMoves(drag.card).includes(col.dataset.status)) drag.target = col;
      else drag.refused = col;
    }
    if (drag.target) drag.target.classList.add("drop-target");
    if (drag.refused) drag.refused.classList.add("drop-refused");
  }
}

function endListeners() {
  document.removeEventListener("pointermove", onDragMove);
  document.removeEventListener("pointerup", onDragEnd);
  document.removeEventListener("pointercancel", cancelDrag);
}

function cancelDrag() {
  endListeners();
  if (!drag) return;
  if (drag.ghost) drag.ghost.remove();
  drag.el.classList.remove("dragging");
  if (drag.target) drag.target.classList.remove("drop-target");
  if (drag.refused) drag.refused.classList.remove("drop-refused");
  for (const c of $$(".column.drop-allowed, .column.drop-dim")) c.classList.remove("drop-allowed", "drop-dim");
  document.body.classList.remove("is-dragging");
  drag = null;
}

function onDragEnd(ev) {
  if (!drag || ev.pointerId !== drag.id) return;
  const { started, target, refused, card, el } = drag;
  cancelDrag();
  if (!started) return;
  suppressClick = true;
  setTimeout(() => { suppressClick = false; }, 0);
  if (refused) {
    const to = refused.dataset.status;
    const allowed = cardMoves(card).filter((s) => s !== "archived").map((s) => STATUS_LABEL[s]);
    const why = refusedMove(card, to);
    const where = allowed.length ? ` (it can move to ${allowed.join(", ")})` : "";
    toast(to === "running"
      ? "A task cannot be moved to Running by hand; the dispatcher starts ready tasks."
      : why ? `${card.id} cannot move to ${STATUS_LABEL[to]}: ${why}${where}.`
        : `A ${STATUS_LABEL[card.status].toLowerCase()} task cannot move to ${STATUS_LABEL[to]}${where}.`, "error");
    return;
  }
  if (!target) return;
  const status = target.dataset.status;
  // optimistic: once confirmed, show the card in its new column while the server decides
  moveTask(card.id, status, {
    seen: card,
    onConfirmed: () => {
      if (!target.isConnected || !el.isConnected) return;
      const placeholder = target.querySelector(".column-empty");
      if (placeholder) placeholder.remove();
      target.querySelector(".column-body").prepend(el);
    },
  });
}
