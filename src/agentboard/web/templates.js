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
  const close = () => {
    overlay.remove();
    document.removeEventListener("keydown", onKey, true);
    if (previous && previous.focus) previous.focus();
  };
  const onKey = (ev) => { if (ev.key === "Escape") { ev.stopPropagation(); ev.preventDefault(); close(); } };
  const select = h("select.template-select", { "aria-label": "template" },
    usable.map((t) => h("option", { value: t.name }, `${t.name} (${t.tasks} task${t.tasks === 1 ? "" : "s"})`)));
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
      fields.append(h("label.template-field", h("span", name),
        h("input.modal-input", { type: "text", name, value: t.vars[name] ?? "", placeholder: t.vars[name] ? "" : "required" })));
    }
    preview.append(...t.tasks.map((task) => h("li", task.title,
      task.assignee ? h("span.pill", task.assignee) : null,
      task.parents && task.parents.length ? h("span.template-after", ` after ${task.parents.join(", ")}`) : null)));
  };

  create.addEventListener("click", async () => {
    const values = {};
    for (const input of fields.querySelectorAll("input")) values[input.name] = input.value;
    create.disabled = true;
    try {
      const out = await api.post(`/api/templates/${encodeURIComponent(select.value)}/run`, { set: values }, scope());
      toast(`Created ${out.tasks.length} tasks from ${out.template}`, "ok", 3000);
      close();
      emit("reload");
    } catch (err) {
      error.textContent = err.message;
    } finally {
      create.disabled = false;
    }
  });
  select.addEventListener("change", show);

  const body = usable.length
    ? [select, fields, h("div.template-preview-title", "Tasks"), preview]
    : [h("p.modal-message", "This board has no templates yet. Put NAME.toml files in the home's templates/ "
        + "folder or in the board target's .agentboard/templates/ (see docs/operations.md).")];
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
