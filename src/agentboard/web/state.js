// Shared client state and a tiny hook registry the views use to ask for reloads.

// The domain's statuses and the moves by hand each allows come from the server (GET /api/meta,
// stated once in domain/states.py); setMeta fills these at boot, before anything renders.

/** Task statuses in lifecycle order. */
export const STATUSES = [];

/** status → its name on the board. */
export const STATUS_LABEL = {};

/** moves: {status: {target: verb}} (the transition table's moves by hand); goalStatuses; the
 * statuses a new task lands in (createStatuses: the columns with a create button); wakeStatuses. */
export const meta = { moves: {}, verbs: {}, goalStatuses: [], createStatuses: [], wakeStatuses: [] };

export function setMeta(m) {
  STATUSES.splice(0, STATUSES.length, ...m.statuses);
  for (const s of m.statuses) STATUS_LABEL[s] = s[0].toUpperCase() + s.slice(1);
  meta.moves = m.moves || {};
  meta.verbs = m.verbs || {};
  meta.goalStatuses = m.goal_statuses || [];
  meta.createStatuses = m.hand_create_statuses || [];
  meta.wakeStatuses = m.wake_statuses || [];
}

/** The targets a task in ``status`` may be moved to by hand, in lifecycle order. */
export function movesFrom(status) {
  return Object.keys(meta.moves[status] || {});
}

/** Who takes an unassigned task: the board's ``default_assignee``, else the installation's. */
export function defaultAssignee() {
  const b = currentBoard();
  return (b && b.settings && b.settings.default_assignee) || (state.config.settings || {}).default_assignee || "";
}

/** Why a card's own data says the server will refuse moving it to ``target`` ("" when it does not
 * say): a task that requires review becomes done only by approval in review (a running one goes
 * to review by itself), a race is finished by picking one of its attempts (docs/races.md), and a
 * task nobody would run cannot be ready. The server stays the judge. */
export function refusedMove(card, target) {
  if (card.race_until) {
    const picked = ((card.race && card.race.attempts) || []).some((a) => a.picked);
    if (target === "done" && !picked) return "a race is finished by picking one of its attempts: open it and pick";
    if (card.status === "review" && (target === "todo" || target === "ready")) {
      return "a race in review is finished by picking one of its attempts: open it and pick";
    }
  }
  if (target === "done" && card.review_required && card.status !== "review" && card.status !== "running") {
    return "it requires review, so it is done only by approving it in Review";
  }
  if (target === "ready" && !card.assignee && !defaultAssignee()) return "it has no assignee; assign it first";
  return "";
}

/** The moves by hand offered for ``card``: the transition table's, less those its data shows the
 * server will refuse (refusedMove; the drawer asks the server: ``moves`` of the task). */
export function cardMoves(card) {
  return movesFrom(card.status).filter((target) => !refusedMove(card, target));
}

/** Whether the transition table lets ``verb`` act on a task in ``status``. */
export function allows(verb, status) {
  return (meta.verbs[verb] || []).includes(status);
}

/** How a move by hand reads on a button: its verb, and the target when the verb has two. */
export const VERB_LABEL = {
  promote: "→ Ready", demote: "→ Todo", release: "Release", unblock: "Unblock", reopen: "Reopen",
  restore: "Restore", reclaim: "Reclaim", request_changes: "Request changes", approve: "Approve",
  complete: "Complete", block: "Block", archive: "Archive", request_review: "→ Review", reject: "Reject",
};

/** Moves that lose work in progress or close something: confirm them first. */
export const DESTRUCTIVE = new Set(["archived", "done", "blocked"]);

const saved = (() => {
  try { return JSON.parse(localStorage.getItem("agentboard.ui") || "{}"); } catch { return {}; }
})();

export const state = {
  board: saved.board || null,       // active board slug
  boards: [],                       // [{slug, name, settings, …}]
  view: "board",                    // board | goals | profiles
  filters: { search: "", tenant: "", assignee: "", goal: "" },
  showArchived: !!saved.showArchived,
  showSupervision: !!saved.showSupervision,  // the supervisor's own tasks (purpose "supervision")
  hiddenSupervision: 0,             // how many of them the last board view left out
  lanes: saved.lanes !== undefined ? !!saved.lanes : true,
  data: null,                       // the last board view
  cards: new Map(),                 // id → card, from the last board view
  selection: new Set(),
  profiles: [],
  goals: [],
  tenants: new Set(),
  assignees: new Set(),
  config: {},
  drawerId: null,
  cursor: 0,
};

export function persist() {
  try {
    localStorage.setItem("agentboard.ui", JSON.stringify({
      board: state.board, showArchived: state.showArchived, showSupervision: state.showSupervision, lanes: state.lanes,
    }));
  } catch { /* private mode: not fatal */ }
}

/** The query every board-scoped call carries. */
export function scope(extra = {}) {
  return { board: state.board, ...extra };
}

export function profileNames() {
  const names = new Set(state.profiles.map((p) => p.name));
  for (const a of state.assignees) names.add(a);
  return Array.from(names).sort();
}

/** Whether the LLM helpers can run, and why not (from GET /api/config; no request to the LLM). */
export function llmStatus() {
  const llm = (state.config && state.config.llm) || {};
  if (llm.available) return { available: true, reason: "" };
  return { available: false, reason: `unavailable: ${llm.reason || "no LLM configured"}` };
}

/** Whether the current board decomposes triage tasks by itself (its setting, else the installation's). */
export function autoDecompose() {
  const b = currentBoard();
  const own = b && b.settings ? b.settings.auto_decompose : undefined;
  if (own !== undefined && own !== null) return !!own;
  return !!(state.config && state.config.settings && state.config.settings.auto_decompose);
}

export function goalTitle(id) {
  const g = state.goals.find((x) => x.id === id);
  return g ? g.title : id;
}

export function currentBoard() {
  return state.boards.find((b) => b.slug === state.board) || null;
}

const hooks = {};

export function on(name, fn) {
  (hooks[name] ||= []).push(fn);
}

export function emit(name, ...args) {
  for (const fn of hooks[name] || []) fn(...args);
}

/** Normalise a list answer that may come bare or wrapped ({items}, {boards}, …). */
export function listOf(data, key) {
  if (Array.isArray(data)) return data;
  if (!data || typeof data !== "object") return [];
  for (const k of [key, "items", "results", "data"]) {
    if (k && Array.isArray(data[k])) return data[k];
  }
  return [];
}
