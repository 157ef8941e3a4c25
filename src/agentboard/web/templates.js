// "+ From template": pick a task-graph template of the board, fill its placeholders, and create
// all its tasks at once (the server writes them in one transaction).

import { api } from "./api.js";
import { h, toast } from "./dom.js";
import { emit, scope, state } from "./state.js";

export function templateButton() {
  return h("button.btn.btn-ghost.btn-sm.from-template", {
    type: "button", onclick: openTemplates, title: "create tasks from a template", "aria-label": "+ From template",
  }, h("span.label-long", "+ From template"), h("span.label-short", "+ Template"));
}

async function openTemplates() {
  let list;
  try {
    list = await api.get("/api/templates", scope());
  } catch (err) {
    toast(`Cannot list templates: ${err.message}`, "error");
    return;
  }
  const previous = document.activeElement;
  const error = h("div.form-error", { role: "alert" });
  const fields = h("div.template-fields");
  const preview = h("ol.template-tasks");
  const usable = list.filter((t) => !t.error);
  // a template that cannot be read is listed greyed with its error, as `agentboard template list`
  // shows it, never left out without a word
  const broken = list.filter((t) => t.error);
  const close = () => {
    overlay.remove();
    document.removeEventListener("keydown", onKey, true);
    if (previous && previous.focus) previous.focus();
  };
  const onKey = (ev) => { if (ev.key === "Escape") { ev.stopPropagation(); ev.preventDefault(); close(); } };
  const select = h("select.template-select", { "aria-label": "template" },
    usable.map((t) => h("option", { value: t.name }, `${t.name} (${t.tasks} task${t.tasks === 1 ? "" : "s"})`)),
    broken.map((t) => h("option", { value: "", disabled: true }, `${t.name} (cannot be used: see below)`)));
  const brokenList = broken.length ? h("div.template-broken",
    h("div.template-preview-title", `Cannot be used (${broken.length})`),
    h("ul", broken.map((t) => h("li", { dataset: { name: t.name } }, h("strong", t.name), h("span.template-error", t.error))))) : null;
  const create = h("button.btn.btn-primary.modal-ok", { type: "button", disabled: !usable.length }, "Create tasks");

  const show = async () => {
    fields.replaceChildren();
    preview.replaceChildren();
    error.textContent = "";
    if (!select.value) return;
    let t;
    try {
      t = await api.get(`/api/templates/${encodeURIComponent(select.value)}`, scope());
    } catch (err) {
      error.textContent = err.message;
      return;
    }
    for (const name of t.placeholders.filter((p) => !["board", "date", "template"].includes(p))) {
      const byDefault = t.vars[name] ?? "";
      // a placeholder without a default needs a value; an emptied one with a default takes it
      fields.append(h("label.template-field", h("span", name, byDefault ? "" : h("span.required-mark", { "aria-hidden": "true" }, " *")),
        h("input.modal-input", { type: "text", name, value: byDefault, required: !byDefault,
          placeholder: byDefault ? `default: ${byDefault}` : "required" })));
    }
    preview.append(...t.tasks.map((task) => h("li", task.title,
      task.assignee ? h("span.pill", task.assignee) : null,
      task.parents && task.parents.length ? h("span.template-after", ` after ${task.parents.join(", ")}`) : null)));
  };

  create.addEventListener("click", async () => {
    // an empty field is not sent: the server fills in the default, or refuses a placeholder
    // without one as the CLI does ("needs a value for …") and creates nothing
    const values = {};
    for (const input of fields.querySelectorAll("input")) {
      input.removeAttribute("aria-invalid");
      if (input.value.trim()) values[input.name] = input.value;
    }
    create.disabled = true;
    try {
      const out = await api.post(`/api/templates/${encodeURIComponent(select.value)}/run`, { set: values }, scope());
      toast(`Created ${out.tasks.length} tasks from ${out.template}`, "ok", 3000);
      close();
      emit("reload");
    } catch (err) {
      error.textContent = err.message;
      const missing = Array.from(fields.querySelectorAll("input")).filter((i) => !i.value.trim() && i.required);
      for (const input of missing) input.setAttribute("aria-invalid", "true");
      if (missing.length) missing[0].focus();
    } finally {
      create.disabled = false;
    }
  });
  select.addEventListener("change", show);

  const body = usable.length
    ? [select, fields, h("div.template-preview-title", "Tasks"), preview, brokenList]
    : [h("p.modal-message", broken.length
      ? "None of this board's templates can be used: fix the errors below (`agentboard template list` shows them too)."
      : "This board has no templates yet. Put NAME.toml files in the home's templates/ "
        + "folder or in the board target's .agentboard/templates/ (see docs/operations.md)."), brokenList];
  const overlay = h("div.modal-overlay", { onmousedown: (ev) => { if (ev.target === overlay) close(); } },
    h("div.modal.template-modal", { role: "dialog", "aria-modal": "true", "aria-label": "create from a template" },
      h("h3.modal-title", `New tasks from a template — ${state.board}`),
      ...body, error,
      h("div.modal-actions", h("button.btn", { type: "button", onclick: close }, usable.length ? "Cancel" : "Close"),
        usable.length ? create : null)));
  document.body.appendChild(overlay);
  document.addEventListener("keydown", onKey, true);
  select.focus();
  await show();
}
