// Notifications: the drawer's "Notify" section (subscribe this task), the Notifications view of a
// board (every subscription, its parked state and last error, test / resume / remove), and the
// links messages carry back to a task (?board=…&task=…).
//
// Targets are Apprise URLs; the server only ever answers with them masked.

import { api } from "./api.js";
import { ago, ask, clear, h, toast } from "./dom.js";
import { emit, state } from "./state.js";

const SUBS = "/api/notify/subscriptions";
const subPath = (id, tail = "") => `${SUBS}/${encodeURIComponent(id)}${tail}`;
const URL_HINT = "json://host/path, slack://…, discord://…, ntfy://topic, mailto://…";
let draft = { task: null, value: "" };  // a URL being typed survives the drawer's live refreshes

/** An empty URL field: say what to give, and put the caret there. */
function needUrl(input) {
  toast(`Give an Apprise URL to subscribe (${URL_HINT})`, "error");
  input.setAttribute("aria-invalid", "true");
  input.focus();
}

function stateOf(s) {
  if (s.parked) return h("span.pill.pill-fail.notify-parked", { title: s.last_error || "" }, "parked");
  if (s.failures) return h("span.pill.pill-warn", { title: s.last_error || "" }, `retrying (${s.failures} failed)`);
  return h("span.pill.pill-ok", "ok");
}

function follows(s) {
  if (s.scope === "board") return `board ${s.subject}`;
  if (s.scope === "task") {
    return h("span", "task ", h("button.link-btn", { type: "button", onclick: () => emit("open", s.subject) }, s.subject));
  }
  return `${s.scope} ${s.subject}`;
}

async function act(what, fn) {
  try {
    return await fn();
  } catch (err) {
    toast(`${what}: ${err.message}`, "error");
    return null;
  }
}

async function testSub(s, after) {
  const out = await act("Test failed", () => api.post(subPath(s.id, "/test"), {}));
  if (!out) return;
  if (out.ok) toast(`Test message sent to ${out.target}${out.resumed ? " — resumed" : ""}`, "ok", 3000);
  else toast(`${out.target} refused the test message: ${out.error}`, "error");
  after();
}

async function removeSub(s, after) {
  const yes = await ask({ title: "Remove this subscription?", message: `Nothing more is sent to ${s.target}.`, confirm: "Remove", danger: true });
  if (!yes) return;
  if (await act("Cannot remove", () => api.del(subPath(s.id)))) after();
}

async function resumeSub(s, after) {
  if (await act("Cannot resume", () => api.post(subPath(s.id, "/resume"), {}))) {
    toast("Resumed: the events it missed are delivered next", "ok", 3000);
    after();
  }
}

function actions(s, after) {
  return h("span.notify-actions",
    s.parked ? h("button.btn.btn-sm.notify-resume", { type: "button", onclick: () => resumeSub(s, after), title: "deliver again, from where it stopped" }, "Resume") : null,
    h("button.btn.btn-sm.btn-ghost.notify-test", { type: "button", onclick: () => testSub(s, after) }, "Test"),
    h("button.btn.btn-sm.btn-ghost.notify-remove", { type: "button", onclick: () => removeSub(s, after) }, "Remove"));
}

// ---- the drawer section ----------------------------------------------------------------------

/** The drawer's Notify section for task ``t``: who is told about it, and a form to subscribe. */
export function notifySection(t) {
  const list = h("div.notify-list", h("span.muted", "Loading…"));
  const input = h("input.notify-url", { type: "text", placeholder: URL_HINT, "aria-label": "Apprise URL to notify" });
  if (draft.task === t.id) input.value = draft.value;
  input.addEventListener("input", () => { draft = { task: t.id, value: input.value }; });
  const load = async () => {
    let subs;
    try {
      subs = await api.get(SUBS, { task: t.id });
    } catch (err) {
      clear(list).appendChild(h("span.muted", err.message));
      return;
    }
    clear(list);
    if (!subs.length) {
      list.appendChild(h("span.muted", "Nobody is notified about this task."));
      return;
    }
    for (const s of subs) {
      list.appendChild(h("div.notify-row", { dataset: { id: String(s.id) } },
        h("code.notify-target", s.target),
        h("span.notify-follows", s.scope === "task" && s.subject === t.id ? "this task" : follows(s)),
        stateOf(s),
        s.scope === "task" && s.subject === t.id ? h("button.link-btn.notify-remove", { type: "button", onclick: () => removeSub(s, load) }, "remove") : null));
    }
  };
  const add = async () => {
    const target = input.value.trim();
    if (!target) { needUrl(input); return; }
    input.removeAttribute("aria-invalid");
    const out = await act("Cannot subscribe", () => api.post(SUBS, { target, scope: "task", subject: t.id }));
    if (out) {
      input.value = "";
      draft = { task: null, value: "" };
      toast(`${out.target} follows this task (and the tasks below it)`, "ok", 3000);
      load();
    }
  };
  input.addEventListener("keydown", (ev) => { if (ev.key === "Enter") add(); });
  load();
  return h("section.drawer-section.notify-section",
    h("h4.section-title", h("span", "Notify")),
    list,
    h("div.notify-add", input, h("button.btn.btn-sm.notify-subscribe", { type: "button", onclick: add }, "Subscribe this task")));
}

// ---- the Notifications view -------------------------------------------------------------------

/** Every subscription of the current board, with an add form. */
export async function renderNotifications(root) {
  let subs;
  try {
    subs = await api.get(SUBS, { board: state.board });
    if (state.view !== "notifications") return;
  } catch (err) {
    if (state.view !== "notifications") return;
    clear(root).appendChild(h("div.panel-error", { role: "alert" }, err.message));
    return;
  }
  const again = () => renderNotifications(root);
  const previous = root.querySelector(".notify-new-url");
  const typed = previous ? previous.value : "";
  clear(root);
  const url = h("input.notify-new-url", { type: "text", placeholder: URL_HINT, "aria-label": "Apprise URL" });
  url.value = typed;
  const scopeSel = h("select.notify-new-scope", { "aria-label": "what it follows" },
    h("option", { value: "board" }, "the whole board"),
    state.goals.length ? h("option", { value: "goal" }, "a goal…") : null,
    state.profiles.length ? h("option", { value: "profile" }, "a profile's tasks…") : null);
  const subject = h("select.notify-new-subject", { "aria-label": "which one", hidden: true });
  scopeSel.addEventListener("change", () => {
    clear(subject);
    const options = scopeSel.value === "goal" ? state.goals.map((g) => [g.id, g.title])
      : scopeSel.value === "profile" ? state.profiles.map((p) => [p.name, p.name]) : [];
    for (const [v, label] of options) subject.appendChild(h("option", { value: v }, label));
    subject.hidden = !options.length;
  });
  const add = async () => {
    const target = url.value.trim();
    if (!target) { needUrl(url); return; }
    url.removeAttribute("aria-invalid");
    const body = { target, scope: scopeSel.value, subject: scopeSel.value === "board" ? "" : subject.value };
    const out = await act("Cannot subscribe", () => api.post(SUBS, body, { board: state.board }));
    if (out) { url.value = ""; toast(`Subscribed ${out.target}`, "ok", 3000); again(); }
  };
  url.addEventListener("keydown", (ev) => { if (ev.key === "Enter") add(); });
  root.appendChild(h("div.panel-head", h("h2", "Notifications"), h("span.spacer"), url, scopeSel, subject,
    h("button.btn.btn-primary.notify-add-btn", { type: "button", onclick: add }, "Subscribe")));
  root.appendChild(h("p.hint.notify-hint", "Messages go to any Apprise URL when tasks complete, block, give up, crash, time out, wait for review, hit a budget, or a goal completes. ",
    "A burst becomes one digest. A target that keeps failing is parked here with its last error until you resume it."));
  if (!subs.length) {
    root.appendChild(h("div.panel-empty", "No subscriptions on this board. Add an Apprise URL above, subscribe a task from its drawer, or use ",
      h("code", "agentboard notify add URL"), "."));
    return;
  }
  // the view scrolls (app.css); the table scrolls sideways in its box when the window is narrower
  // than it, and on a phone each subscription stacks into a card (each cell names its column)
  const cell = (tag, label, ...kids) => h(tag, { dataset: { label } }, ...kids);
  root.appendChild(h("div.notify-table-wrap", h("table.notify-table",
    h("thead", h("tr", ["Follows", "Target", "Kinds", "Delivered", "Last sent", "State", "Last error", ""].map((c) => h("th", c)))),
    h("tbody", subs.map((s) => h(`tr.notify-sub${s.parked ? ".is-parked" : ""}`, { dataset: { id: String(s.id) } },
      cell("td", "Follows", follows(s)),
      cell("td", "Target", h("code.notify-target", s.target)),
      cell("td.notify-kinds", "Kinds", s.default_kinds ? "default" : s.kinds.join(", ")),
      cell("td", "Delivered", String(s.delivered)),
      cell("td", "Last sent", s.last_sent_at ? ago(s.last_sent_at) : "—"),
      cell("td", "State", stateOf(s)),
      cell("td.notify-error", "Last error", s.last_error || "—"),
      cell("td.notify-actions-cell", "", actions(s, again))))))));
}
