// The inline create form of a column (its "+" button, keys n and t): title (extra lines become
// the description), assignee, priority, an optional parent found by search (any task of the board)
// and an optional race.

import { api } from "./api.js";
import { $, h, toast } from "./dom.js";
import { taskPicker } from "./picker.js";
import { emit, profileNames, scope, state } from "./state.js";

export function openCreate(status = "todo") {
  const col = $(`.column[data-status="${status}"]`);
  if (!col) return;
  const slot = col.querySelector(".column-create");
  if (slot.firstChild) { slot.querySelector("textarea").focus(); return; }
  const title = h("textarea.create-title", {
    rows: 2, placeholder: "Task title — Enter creates, Shift+Enter adds a line (extra lines become the description)",
    "aria-label": "new task title",
  });
  const assignee = h("select.create-assignee", { "aria-label": "assignee" },
    h("option", { value: "" }, "unassigned"),
    profileNames().map((p) => h("option", { value: p }, p)));
  const priority = h("input.create-priority", { type: "number", value: "0", step: "1", title: "priority (higher runs first)", "aria-label": "priority" });
  // any task of the board, found by the server as the person types (not only the loaded cards)
  const parent = taskPicker({ cls: "create-parent", label: "parent task", placeholder: "parent: none (type to search)",
    keep: true, onPick: () => {} });
  const race = h("input.create-race", {
    type: "text", placeholder: "race: profile,profile:model", "aria-label": "race",
    title: "optional — a race: one attempt per profile, each on its own branch; the best verified one is picked",
  });
  const until = h("select.create-race-until", { "aria-label": "race until", title: "when the race ends" },
    h("option", { value: "all" }, "until all finish"), h("option", { value: "first-pass" }, "first that passes"));
  const error = h("div.form-error", { role: "alert" });
  // the form moves to the new column element when the board re-renders (after a create): close
  // removes the form wherever it is now
  let form = null;
  const close = () => { if (form) form.remove(); };
  const submit = async () => {
    const lines = title.value.split("\n");
    const text = lines[0].trim();
    if (!text) { error.textContent = "A title is required."; return; }
    const parentText = parent.querySelector("input").value.trim();
    if (parentText && !parent.picked) {
      error.textContent = `Pick the parent from the list (no task was picked for “${parentText}”), or clear the field.`;
      return;
    }
    const body = {
      title: text,
      priority: Number(priority.value) || 0,
    };
    const rest = lines.slice(1).join("\n").trim();
    if (rest) body.body = rest;
    if (assignee.value) body.assignee = assignee.value;
    if (parent.picked) body.parents = [parent.picked];
    if (status === "triage") body.triage = true;
    if (race.value.trim()) { body.race = [race.value.trim()]; body.race_until = until.value; }
    if (state.filters.tenant) body.tenant = state.filters.tenant;
    if (state.filters.goal) body.goal = state.filters.goal;
    try {
      const task = await api.post("/api/tasks", body, scope());
      toast(`Created ${task.id || "task"}`, "ok", 2500);
      title.value = "";
      error.textContent = "";
      emit("reload");
      title.focus();
    } catch (err) {
      error.textContent = err.message;
    }
  };
  title.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); submit(); }
    if (ev.key === "Escape") { ev.preventDefault(); ev.stopPropagation(); close(); }
  });
  form = h("form.create-form", {
    onsubmit: (ev) => { ev.preventDefault(); submit(); },
    onkeydown: (ev) => { if (ev.key === "Escape") { ev.stopPropagation(); close(); } },
  },
  title,
  h("div.create-row", assignee, priority),
  h("div.create-row", parent),
  h("div.create-row", race, until),
  error,
  h("div.create-row.create-actions",
    h("span.hint", status === "triage" ? "lands in Triage" : ""),
    h("span.spacer"),
    h("button.btn", { type: "button", onclick: close }, "Cancel"),
    h("button.btn.btn-primary", { type: "submit" }, "Create")));
  slot.appendChild(form);
  title.focus();
}
