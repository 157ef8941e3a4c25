// A search-as-you-type task picker (the drawer's "add parent / add child", the inline create
// form's parent): it asks the server for the board's tasks matching what is typed (title,
// description or id, GET /api/tasks?search=), so every task of the board can be found, not only
// the cards the board has loaded (a column shows its first 100) or those a filter leaves shown.

import { api } from "./api.js";
import { debounce, h } from "./dom.js";
import { STATUS_LABEL, scope } from "./state.js";

/** How many matches the list shows; typing more narrows them. */
const SHOWN = 20;
let seq = 0;

/**
 * ``label``: the field's accessible name; ``placeholder``; ``exclude()``: the ids to leave out
 * (asked at each search, so it follows the task as it changes); ``onPick(task)``. With ``keep``
 * the picked task stays in the field (``el.picked``: its id, null until one is picked or after
 * the text is changed); without, the field empties for the next pick.
 */
export function taskPicker({ cls = "", label, placeholder, exclude = () => new Set(), onPick, keep = false }) {
  const listId = `task-picker-${++seq}`;
  const input = h("input.picker-input", {
    type: "text", role: "combobox", autocomplete: "off", spellcheck: "false", placeholder,
    "aria-label": label, "aria-autocomplete": "list", "aria-expanded": "false", "aria-controls": listId,
  });
  const list = h("ul.picker-list", { id: listId, role: "listbox", "aria-label": label, hidden: true });
  const el = h(`div.task-picker${cls ? `.${cls}` : ""}`, input, list);
  el.picked = null;
  let items = [];
  let active = -1;
  let asked = 0;

  const close = () => {
    asked++;  // an answer still on its way is not shown
    list.hidden = true;
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
    active = -1;
  };
  const highlight = (i) => {
    active = i;
    list.querySelectorAll(".picker-option").forEach((li, j) => li.setAttribute("aria-selected", String(j === i)));
    const li = list.children[i];
    if (li && li.id) {
      input.setAttribute("aria-activedescendant", li.id);
      li.scrollIntoView({ block: "nearest" });
    }
  };
  const show = (rows, note) => {
    items = rows;
    const options = rows.map((t, i) => h("li.picker-option", {
      id: `${listId}-${i}`, role: "option", "aria-selected": "false", dataset: { id: t.id },
      title: `${t.id} · ${STATUS_LABEL[t.status] || t.status} · ${t.title}`,
      // mousedown, not click: the field keeps the focus (its blur would close the list first)
      onmousedown: (ev) => { ev.preventDefault(); pick(t); },
    }, h(`span.dot.dot-${t.status}`), h("code.picker-id", t.id), h("span.picker-title", t.title)));
    // (replaceChildren would print a left-out note as the text "null")
    list.replaceChildren(...options, ...(note ? [h("li.picker-note", { role: "presentation" }, note)] : []));
    list.hidden = false;
    input.setAttribute("aria-expanded", "true");
    active = -1;
  };
  const search = async () => {
    const query = input.value.trim();
    const n = ++asked;
    const skip = exclude();
    let rows;
    try {
      rows = await api.get("/api/tasks", scope({ search: query, limit: SHOWN + skip.size + 1 }));
    } catch (err) {
      if (n === asked) show([], `Cannot search the tasks: ${err.message}`);
      return;
    }
    if (n !== asked || document.activeElement !== input) return;
    const found = rows.filter((t) => !skip.has(t.id));
    const shown = found.slice(0, SHOWN);
    show(shown, !shown.length ? (query ? `No task matches “${query}”` : "No other task on this board")
      : found.length > SHOWN ? `first ${SHOWN} shown — type to narrow` : "");
  };
  const searchSoon = debounce(search, 150);
  const pick = (t) => {
    close();
    if (keep) {
      el.picked = t.id;
      input.value = `${t.id} · ${t.title}`;
    } else {
      input.value = "";
    }
    onPick(t);
  };

  // the list opens on a click, on typing and on the arrow keys (not on the focus alone: a
  // refresh of the view around the picker gives it the focus back without opening it)
  input.addEventListener("click", () => { if (list.hidden && !el.picked) search(); });
  input.addEventListener("input", () => { el.picked = null; searchSoon(); });
  input.addEventListener("blur", () => {
    // a refresh that moves the picker into the new view takes the focus away and gives it back
    // at once: the list stays open then
    setTimeout(() => {
      if (document.activeElement === input) return;
      searchSoon.cancel();
      close();
    }, 0);
  });
  input.addEventListener("keydown", (ev) => {
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      ev.preventDefault();
      if (list.hidden) { search(); return; }
      if (!items.length) return;
      const step = ev.key === "ArrowDown" ? 1 : -1;
      highlight((active + step + items.length) % items.length);
    } else if (ev.key === "Enter") {
      ev.preventDefault();  // never submits the form the picker is in
      ev.stopPropagation();
      if (!list.hidden && items.length) pick(items[Math.max(active, 0)]);
    } else if (ev.key === "Escape" && !list.hidden) {
      ev.preventDefault();
      ev.stopPropagation();  // closes the list, not the drawer or the form
      close();
    }
  });
  return el;
}
