// Entry point: the top bar, the toolbar, the views, live updates and keyboard shortcuts.

import { budgetBlock } from "./budgets.js";
import { api, onUnauthorized } from "./api.js";
import { clearSelection, renderBoard } from "./board.js";
import { openCreate } from "./create.js";
import { $, ask, clear, debounce, h, tickClocks, toast } from "./dom.js";
import { closeDrawer, initDrawer, isOpen, openDrawer, refreshDrawer } from "./drawer.js";
import { renderInsights } from "./insights.js";
import { renderNotifications } from "./notify.js";
import { newBoardDialog, renderGoals, renderProfiles } from "./panels.js";
import { renderSupervisor } from "./supervisor.js";
import { autoDecompose, currentBoard, emit, listOf, llmStatus, on, persist, setMeta, state } from "./state.js";
import { templateButton } from "./templates.js";

const main = $("#main");
const boardEl = h("div.board", { id: "board", "aria-label": "board" });

// ---- loading ---------------------------------------------------------------------------------

let reloadSeq = 0;

async function loadBoard() {
  const seq = ++reloadSeq;
  const f = state.filters;
  let data;
  try {
    data = await api.get("/api/board", {
      board: state.board, tenant: f.tenant, assignee: f.assignee, goal: f.goal, search: f.search,
      include_archived: state.showArchived, lanes: state.lanes, supervision: state.showSupervision,
    });
  } catch (err) {
    if (seq !== reloadSeq) return;
    if (err.status !== 401) setConn("error", err.message);
    return;
  }
  if (seq !== reloadSeq) return;
  hideSupervision(data);
  state.data = data;
  state.cards = new Map();
  for (const col of data.columns || []) {
    for (const card of col.tasks || []) {
      state.cards.set(card.id, card);
      if (card.tenant) state.tenants.add(card.tenant);
      if (card.assignee) state.assignees.add(card.assignee);
    }
  }
  if (state.view === "board") renderBoard(boardEl);
  updateFilterOptions();
  const total = data.total ?? state.cards.size;
  $("#total").textContent = `${total} task${total === 1 ? "" : "s"}`;
}

/** The supervisor's own tasks stay out of the columns unless "Supervision" is ticked (the
 * toolbar offers the box only on a board that has some). */
function hideSupervision(data) {
  let hidden = data.hidden_supervision || 0;  // the API leaves them out unless asked (supervision=true)
  for (const col of data.columns || []) {
    const keep = (c) => state.showSupervision || c.purpose !== "supervision";
    const tasks = col.tasks || [];
    const shown = tasks.filter(keep);
    if (shown.length === tasks.length) continue;
    const gone = tasks.length - shown.length;
    hidden += gone;
    col.tasks = shown;
    col.count = Math.max(0, (col.count || 0) - gone);
    if (col.lanes) col.lanes = col.lanes.map((l) => ({ ...l, tasks: l.tasks.filter(keep) })).filter((l) => l.tasks.length);
    if (typeof data.total === "number") data.total = Math.max(0, data.total - gone);
  }
  state.hiddenSupervision = hidden;
  if (state.showSupervision) {
    state.hiddenSupervision = (data.columns || []).reduce((n, col) => n + (col.tasks || []).filter((c) => c.purpose === "supervision").length, 0);
  }
}

// A burst of events (or of local actions) becomes one reload.
const scheduleReload = debounce(() => {
  loadBoard();
  if (state.view === "goals") renderGoals(main);
  if (state.view === "supervisor") renderSupervisor(main);
  if (state.view === "insights") refreshInsights();
}, 150, 1000);
// the charts are redrawn at most every few seconds while runs finish
const refreshInsights = debounce(() => { if (state.view === "insights") renderInsights(main); }, 3000, 10000);
on("reload", scheduleReload);
on("open", (id) => openDrawer(id));

async function loadBoards() {
  try {
    state.boards = listOf(await api.get("/api/boards"), "boards");
  } catch (err) {
    if (err.status === 403) state.boards = [];
    else throw err;
  }
  const slugs = state.boards.map((b) => b.slug);
  if (!state.board || (slugs.length && !slugs.includes(state.board))) {
    const current = state.boards.find((b) => b.current);
    state.board = current ? current.slug : slugs.includes("default") ? "default" : slugs[0] || "default";
  }
}

async function loadSide() {
  const [profiles, goals, config, tenants] = await Promise.allSettled([
    api.get("/api/profiles"), api.get("/api/goals", { board: state.board }), api.get("/api/config"),
    api.get("/api/tenants", { board: state.board }),
  ]);
  if (profiles.status === "fulfilled") state.profiles = listOf(profiles.value, "profiles");
  if (tenants.status === "fulfilled") {
    for (const t of listOf(tenants.value, "tenants")) if (t && t.tenant) state.tenants.add(t.tenant);
  }
  if (goals.status === "fulfilled") state.goals = listOf(goals.value, "goals");
  if (config.status === "fulfilled" && config.value && typeof config.value === "object") state.config = config.value;
}

// ---- top bar and toolbar -------------------------------------------------------------------

function renderTopbar() {
  const bar = $("#topbar");
  clear(bar);
  const board = currentBoard();
  // narrowed on a laptop's window (app.css): the whole name is its tooltip and in its list
  const switcher = h("select.board-switch", { "aria-label": "board", hidden: state.boards.length <= 1,
    title: board ? `board: ${board.name || board.slug}` : "board" },
    state.boards.map((b) => h("option", { value: b.slug, selected: b.slug === state.board },
      `${b.icon ? `${b.icon} ` : ""}${b.name || b.slug}`)));
  switcher.addEventListener("change", () => switchBoard(switcher.value));
  const tabs = ["board", "goals", "profiles", "insights", "supervisor", "notifications"].map((v) => h(`button.tab${state.view === v ? ".active" : ""}`, {
    type: "button", dataset: { view: v }, "aria-pressed": String(state.view === v), onclick: () => setView(v),
  }, v[0].toUpperCase() + v.slice(1)));
  bar.append(...[
    h("div.brand", h("span.brand-mark", "▦"), h("span.brand-name", "agentboard")),
    switcher,
    state.boards.length <= 1 && board ? h("span.board-name", { title: board.name || board.slug }, board.name || board.slug) : null,
    h("button.btn.btn-ghost.btn-sm.new-board", { type: "button", onclick: createBoard, title: "create a board", "aria-label": "+ New board" },
      h("span.label-long", "+ New board"), h("span.label-short", "+ Board")),
    templateButton(),
    h("nav.tabs", tabs),
    h("span.spacer"),
    state.board ? budgetBlock({ board: state.board }, { compact: true, scopes: ["board"] }) : null,
    orchestrationToggle(),
    h("span#conn.conn", { id: "conn", title: "live updates" }),
    h("button.btn.btn-primary.btn-sm.dispatch-now", { type: "button", onclick: dispatchNow, title: "start ready tasks now", "aria-label": "Dispatch now" },
      h("span.label-long", "▶ Dispatch now"), h("span.label-short", "▶ Dispatch")),
    h("button.icon-btn.help-btn", { type: "button", title: "keyboard shortcuts (?)", "aria-label": "keyboard shortcuts", onclick: showHelp }, "?"),
  ].filter(Boolean));  // Element.append would print a left-out part as the text "null"
  setConn(liveState, liveNote);
}

/** Orchestration: Auto (the dispatcher decomposes triage tasks with the LLM) or Manual
 * (nothing calls the LLM by itself). Greyed, with the reason, while no LLM is available. */
function orchestrationToggle() {
  const { available, reason } = llmStatus();
  const auto = autoDecompose();
  const btn = (label, on) => h(`button.seg-btn${auto === on ? ".active" : ""}`, {
    type: "button", dataset: { mode: label.toLowerCase() }, "aria-pressed": String(auto === on),
    disabled: !available, onclick: () => setAuto(on),
  }, label);
  return h("div.orchestration", {
    role: "group", "aria-label": "orchestration",
    title: available ? "Auto: the dispatcher decomposes triage tasks with the LLM (a few per pass). Manual: only you do." : reason,
  }, h("span.seg-label", "Orchestration"), h("div.seg", btn("Auto", true), btn("Manual", false)));
}

async function setAuto(on) {
  const slug = state.board;
  try {
    const b = await api.patch(`/api/boards/${encodeURIComponent(slug)}`, { settings: { auto_decompose: on } });
    const i = state.boards.findIndex((x) => x.slug === slug);
    if (i >= 0) state.boards[i] = { ...state.boards[i], settings: (b && b.settings) || { ...state.boards[i].settings, auto_decompose: on } };
    toast(on ? "Orchestration: Auto — the dispatcher decomposes triage tasks" : "Orchestration: Manual", "ok", 3000);
  } catch (err) {
    toast(`Cannot change orchestration: ${err.message}`, "error");
  }
  renderTopbar();
}

async function dispatchNow() {
  const btn = $(".dispatch-now");
  if (btn) btn.disabled = true;
  try {
    const res = await api.post("/api/dispatch", {}, { board: state.board });
    const started = res && (res.spawned ?? res.started ?? res.claimed);
    const n = Array.isArray(started) ? started.length : started;
    toast(n !== undefined && n !== null ? `Dispatch: ${n} started` : "Dispatch pass done", "ok", 3000);
  } catch (err) {
    toast(`Dispatch failed: ${err.message}`, "error");
  } finally {
    if (btn) btn.disabled = false;
    emit("reload");
  }
}

async function createBoard() {
  const slug = await newBoardDialog();
  if (!slug) return;
  await loadBoards();
  toast(`Board ${slug} created`, "ok", 2500);
  switchBoard(slug);
}

function renderToolbar() {
  const bar = $("#toolbar");
  clear(bar);
  const f = state.filters;
  const search = h("input.search", { type: "search", placeholder: "Search  /", value: f.search, "aria-label": "search" });
  const applySearch = debounce(() => { f.search = search.value.trim(); loadBoard(); }, 250);
  search.addEventListener("input", applySearch);
  search.addEventListener("keydown", (ev) => { if (ev.key === "Escape") { search.value = ""; applySearch(); search.blur(); } });
  const select = (cls, label, key) => {
    const el = h(`select.${cls}`, { "aria-label": label });
    el.addEventListener("change", () => { f[key] = el.value; clearSelection(); loadBoard(); });
    return el;
  };
  const check = (cls, label, key) => {
    const box = h("input", { type: "checkbox", checked: state[key] });
    box.addEventListener("change", () => { state[key] = box.checked; persist(); loadBoard(); });
    return h(`label.check.${cls}`, box, label);
  };
  bar.append(
    search,
    select("filter-tenant", "tenant", "tenant"),
    select("filter-assignee", "assignee", "assignee"),
    select("filter-goal", "goal", "goal"),
    check("toggle-archived", "Show archived", "showArchived"),
    check("toggle-lanes", "Lanes by profile", "lanes"),
    check("toggle-supervision", "Supervision", "showSupervision"),
    h("span.spacer"),
    h("span#total.total", { id: "total" }),
    h("div#bulkbar.bulkbar", { id: "bulkbar", hidden: true, role: "toolbar", "aria-label": "bulk actions" }));
  updateFilterOptions();
}

function fillSelect(el, placeholder, options, value) {
  if (!el) return;
  const wanted = JSON.stringify([placeholder, options, value]);
  if (el.dataset.sig === wanted) return;
  el.dataset.sig = wanted;
  clear(el);
  el.appendChild(h("option", { value: "" }, placeholder));
  for (const [v, label] of options) el.appendChild(h("option", { value: v, selected: v === value }, label));
  el.value = value;
}

function updateFilterOptions() {
  const f = state.filters;
  const sup = $(".toggle-supervision");
  if (sup) {
    sup.hidden = !state.hiddenSupervision && !state.showSupervision;
    sup.title = state.showSupervision
      ? "the supervisor's own tasks are shown in the columns"
      : `${state.hiddenSupervision} supervision task${state.hiddenSupervision === 1 ? "" : "s"} (the supervisor's own) left out of the columns`;
    const count = sup.querySelector(".check-count") || sup.appendChild(h("span.check-count"));
    count.textContent = state.hiddenSupervision ? `(${state.hiddenSupervision})` : "";
  }
  const tenants = Array.from(state.tenants).sort();
  const assignees = new Set([...state.profiles.map((p) => p.name), ...state.assignees]);
  fillSelect($(".filter-tenant"), "All tenants", tenants.map((t) => [t, t]), f.tenant);
  fillSelect($(".filter-assignee"), "All assignees",
    [["none", "(unassigned)"], ...Array.from(assignees).sort().map((a) => [a, a])], f.assignee);
  fillSelect($(".filter-goal"), "All goals", state.goals.map((g) => [g.id, g.title]), f.goal);
}

// ---- views -----------------------------------------------------------------------------------

function setView(view) {
  state.view = view;
  document.body.dataset.view = view;
  renderTopbar();
  $("#toolbar").hidden = view !== "board" || signedOut;
  if (signedOut) { showLoggedOut(); return; }  // nothing but the notice until the person signs in again
  clear(main);
  if (view === "board") {
    main.appendChild(boardEl);
    renderBoard(boardEl);
    loadBoard();
  } else if (view === "goals") {
    main.appendChild(h("div.panel-loading", "Loading goals…"));
    renderGoals(main);
  } else if (view === "notifications") {
    main.appendChild(h("div.panel-loading", "Loading notifications…"));
    renderNotifications(main);
  } else if (view === "insights") {
    main.appendChild(h("div.panel-loading", "Loading insights…"));
    renderInsights(main);
  } else if (view === "supervisor") {
    main.appendChild(h("div.panel-loading", "Loading the supervisor…"));
    renderSupervisor(main);
  } else {
    main.appendChild(h("div.panel-loading", "Loading profiles…"));
    renderProfiles(main);
  }
}

async function switchBoard(slug) {
  if (slug === state.board) return;
  state.board = slug;
  state.filters = { search: "", tenant: "", assignee: "", goal: "" };
  state.tenants = new Set();
  state.assignees = new Set();
  state.selection.clear();
  state.data = null;
  state.cursor = 0; // the new socket starts from the new board's present
  persist();
  closeDrawer();
  await loadSide();
  renderTopbar();
  renderToolbar();
  setView(state.view);
  connectLive();
}

// ---- live updates ----------------------------------------------------------------------------

let socket = null;
let retry = 0;
let retryTimer = null;
let liveState = "connecting";
let liveNote = "";
let hadSocket = false;

function setConn(kind, note = "") {
  liveState = kind;
  liveNote = note;
  const el = $("#conn");
  if (!el) return;
  el.className = `conn conn-${kind}`;
  const labels = {
    live: "Live", connecting: "Connecting…", offline: "Reconnecting…", forbidden: "No live updates", error: "Error",
    signedout: "Signed out",
  };
  el.textContent = labels[kind] || kind;
  el.title = note || "live updates";
  el.dataset.state = kind;
}

const reloadDrawerSoon = debounce(() => refreshDrawer(), 150);

function connectLive() {
  clearTimeout(retryTimer);
  if (signedOut) return;
  if (socket) {
    socket.onclose = null;
    socket.close();
    socket = null;
  }
  const board = state.board;
  const proto = location.protocol === "https:" ? "wss" : "ws";
  const params = new URLSearchParams({ board });
  if (state.cursor) params.set("since", String(state.cursor));
  const ws = new WebSocket(`${proto}://${location.host}/api/events?${params}`);
  socket = ws;
  setConn("connecting");
  ws.onopen = () => {
    retry = 0;
    setConn("live");
    // whatever happened while we were away: reload instead of replaying events one by one
    if (hadSocket) emit("reload");
    hadSocket = true;
  };
  ws.onmessage = (msg) => {
    let data;
    try { data = JSON.parse(msg.data); } catch { return; }
    if (typeof data.cursor === "number") state.cursor = data.cursor;
    const events = data.events || [];
    if (!events.length) return;
    scheduleReload();
    if (state.drawerId && events.some((e) => e.task_id === state.drawerId)) reloadDrawerSoon();
    if (state.view === "notifications" && events.some((e) => e.kind.startsWith("notify_"))) renderNotifications(main);
    for (const e of events) {
      if (e.kind === "goal_created" || e.kind === "goal_completed" || e.kind === "goal_cancelled") { loadSide(); break; }
    }
  };
  ws.onclose = (ev) => {
    if (socket !== ws) return;
    socket = null;
    if (ev.code === 4403 || ev.code === 4404 || ev.code === 4400) {
      setConn("forbidden", ev.reason || "this token may not follow this board");
      return; // forbidden: never retry
    }
    if (ev.code === 4401) {
      showLoggedOut();  // never retried: the token is no longer valid
      return;
    }
    setConn("offline", "connection lost; retrying");
    retry = Math.min(retry + 1, 6);
    retryTimer = setTimeout(connectLive, Math.min(500 * 2 ** retry, 15000));
  };
}

// ---- keyboard shortcuts ----------------------------------------------------------------------

const SHORTCUTS = [
  ["/", "focus search"],
  ["n", "new task in Todo"],
  ["t", "new task in Triage"],
  ["b / g / p / i / s", "board, goals, profiles, insights, supervisor view"],
  ["a", "show or hide archived"],
  ["l", "lanes by profile in Running"],
  ["r", "reload"],
  ["Esc", "close the drawer, a dialog or the create form; clear the selection"],
  ["Enter", "open the focused card"],
  ["Space", "select the focused card"],
  ["Shift/Ctrl-click", "select several cards"],
  ["?", "this help"],
];

function showHelp() {
  ask({ title: "Keyboard shortcuts", message: "", confirm: "Close", cancel: null });
  const modal = $(".modal .modal-title");
  if (modal) {
    modal.after(h("table.shortcuts", SHORTCUTS.map(([k, what]) => h("tr", h("td", h("kbd", k)), h("td", what)))));
  }
}

function typing(el) {
  return el && (el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName));
}

document.addEventListener("keydown", (ev) => {
  if (document.querySelector(".modal-overlay")) return;
  if (ev.key === "Escape") {
    if (typing(ev.target)) { ev.target.blur(); return; }
    if (isOpen()) { closeDrawer(); return; }
    if (state.selection.size) { clearSelection(); return; }
    return;
  }
  if (typing(ev.target) || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const key = ev.key;
  if (key === "/") { ev.preventDefault(); setView("board"); $(".search").focus(); }
  else if (key === "n" && state.view === "board") { ev.preventDefault(); openCreate("todo"); }
  else if (key === "t" && state.view === "board") { ev.preventDefault(); openCreate("triage"); }
  else if (key === "b") setView("board");
  else if (key === "g") setView("goals");
  else if (key === "p") setView("profiles");
  else if (key === "i") setView("insights");
  else if (key === "s") setView("supervisor");
  else if (key === "a") { state.showArchived = !state.showArchived; persist(); renderToolbar(); loadBoard(); }
  else if (key === "l") { state.lanes = !state.lanes; persist(); renderToolbar(); loadBoard(); }
  else if (key === "r") { loadSide().then(() => setView(state.view)); }
  else if (key === "?") showHelp();
});

// ---- auth ------------------------------------------------------------------------------------

let signedOut = false;

/** The token is no longer valid (revoked, expired, logged out elsewhere): no live updates, no
 * drawer or selection to act on (every write would be refused), only the notice of how to sign
 * in again — whichever view the person turns to. */
function showLoggedOut() {
  signedOut = true;
  clearTimeout(retryTimer);
  if (socket) { socket.onclose = null; socket.close(); socket = null; }
  setConn("signedout", "signed out: the token is no longer valid, so the board is not followed live");
  closeDrawer();
  if (state.selection.size) clearSelection();
  $("#toolbar").hidden = true;
  const login = `${location.origin}/login?token=…`;
  clear(main).appendChild(h("div.login-needed", { role: "alert" },
    h("h2", "Not signed in"),
    h("p", "Your session has no valid token (it was revoked or has expired). Open the login URL that ",
      h("code", "agentboard serve"), " printed (it looks like ", h("code", login), "), or create a token with ",
      h("code", "agentboard tokens create NAME"), " and open ", h("code", "/login?token=TOKEN"), ".")));
}

onUnauthorized(showLoggedOut);

// ---- boot ------------------------------------------------------------------------------------

/** What a link asks for: ``?board=SLUG`` shows that board; ``?task=ID`` opens that task on
 * whichever board it lives (a ``board`` given with it that is not the task's gives way). The
 * answer also says why a linked task cannot be opened. */
async function followLink() {
  const params = new URLSearchParams(location.search);
  const board = params.get("board");
  const task = params.get("task");
  if (board) state.board = board;
  if (!task) return { task: null, error: null, board };
  try {
    const detail = await api.get(`/api/tasks/${encodeURIComponent(task)}`, { events: 0 });
    const t = detail.task && !detail.id ? detail.task : detail;
    if (t.board) state.board = t.board;
    return { task, error: null, board: t.board || board };
  } catch (err) {
    if (err.status === 401) throw err;
    return { task: null, error: `Cannot open the linked task ${task}: ${err.message}`, board };
  }
}

async function boot() {
  initDrawer($("#drawer"));
  let linked;
  try {
    setMeta(await api.get("/api/meta"));
    linked = await followLink();
    await loadBoards();
  } catch (err) {
    if (err.status !== 401) clear(main).appendChild(h("div.panel-error", { role: "alert" }, `Cannot load boards: ${err.message}`));
    return;
  }
  if (linked.board && linked.board !== state.board && !linked.error) {
    linked.error = `No board “${linked.board}” that this token sees; showing ${state.board}.`;
  }
  persist();
  // the link has been followed: a reload shows what the person has moved on to since
  if (location.search) history.replaceState(null, "", location.pathname + location.hash);
  await loadSide();
  renderTopbar();
  renderToolbar();
  setView("board");
  connectLive();
  if (linked.task) openDrawer(linked.task);
  if (linked.error) toast(linked.error, "error", 10000);
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") emit("reload");
  });
  // a running card's clock and the drawer's open run count on between events; "… ago" labels
  // follow every 15 s (a hidden tab skips the work)
  let ticks = 0;
  setInterval(() => {
    if (document.visibilityState === "hidden") return;
    tickClocks(document, ++ticks % 15 === 0);
  }, 1000);
}

boot();
