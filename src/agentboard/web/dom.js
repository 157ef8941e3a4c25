// Small DOM helpers. Every piece of user text goes through textContent, never innerHTML.

/**
 * Build an element: h("div#main.card.is-x", {title: "…", onclick: fn, dataset: {id}}, child, "text", …)
 * Strings become text nodes; null/false children are skipped; arrays are flattened.
 */
export function h(spec, attrs, ...children) {
  const [head, ...classes] = spec.split(".");
  const [tag, id] = head.split("#");
  const el = document.createElement(tag || "div");
  if (id) el.id = id;
  if (classes.length) el.className = classes.join(" ");
  if (attrs && (typeof attrs !== "object" || attrs instanceof Node || Array.isArray(attrs))) {
    children.unshift(attrs);
    attrs = null;
  }
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key === "class") {
      el.className += (el.className ? " " : "") + value;
    } else if (key === "style" && typeof value === "object") {
      Object.assign(el.style, value);
    } else if (key in el && typeof value !== "string") {
      el[key] = value;
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.appendChild(child);
    else el.appendChild(document.createTextNode(String(child)));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

// A click is a press and a release on the same element: a live refresh that rebuilds a view
// between the two swallows the click. While a pointer is down, such a refresh waits for the
// release (and the click that follows it).
let pressed = false;
const afterRelease = [];
document.addEventListener("pointerdown", () => { pressed = true; }, true);
const released = () => {
  if (!pressed) return;
  pressed = false;
  setTimeout(() => { for (const fn of afterRelease.splice(0)) fn(); }, 0);
};
document.addEventListener("pointerup", released, true);
document.addEventListener("pointercancel", released, true);

/** True (and ``fn`` queued for after the release) while a pointer is pressed. */
export function laterIfPressed(fn) {
  if (!pressed) return false;
  afterRelease.push(fn);
  return true;
}

export function $(sel, root = document) {
  return root.querySelector(sel);
}

export function $$(sel, root = document) {
  return Array.from(root.querySelectorAll(sel));
}

/** "just now", "5m ago", "3h ago", "2d ago" for an epoch-seconds timestamp. */
export function ago(ts, now = Date.now() / 1000) {
  if (!ts) return "";
  const s = Math.max(0, now - Number(ts));
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  if (s < 86400 * 60) return `${Math.round(s / 86400)}d ago`;
  return new Date(ts * 1000).toISOString().slice(0, 10);
}

export function fmtTime(ts) {
  if (!ts) return "";
  const d = new Date(Number(ts) * 1000);
  return d.toLocaleString(undefined, {
    month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
}

export function duration(start, end) {
  if (!start) return "";
  const s = Math.max(0, (end || Date.now() / 1000) - start);
  if (s < 60) return `${Math.round(s)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${Math.round(s % 60)}s`;
  return `${Math.floor(s / 3600)}h ${Math.round((s % 3600) / 60)}m`;
}

/** How long since `start`, kept current while shown (tickClocks). */
export function clock(start) {
  return h("span.clock", { dataset: { clock: String(start) } }, duration(start));
}

/** "5m ago" for `ts`, kept current while shown (tickClocks). */
export function agoLive(ts) {
  return h("span.ago", { dataset: { ago: String(ts) } }, ago(ts));
}

/** Bring every shown clock up to now (each second), and every "… ago" (each 15 s). */
export function tickClocks(root = document, withAgo = true) {
  const now = Date.now() / 1000;
  for (const el of root.querySelectorAll("[data-clock]")) {
    const text = duration(Number(el.dataset.clock), now);
    if (el.textContent !== text) el.textContent = text;
  }
  if (!withAgo) return;
  for (const el of root.querySelectorAll("[data-ago]")) {
    const text = ago(Number(el.dataset.ago), now);
    if (el.textContent !== text) el.textContent = text;
  }
}

/**
 * Call fn once things have been quiet for `ms`; during a long burst, still call it at least
 * every `maxWait` ms so a steady stream of events cannot starve the view.
 */
export function debounce(fn, ms, maxWait = 0) {
  let timer = null;
  let first = 0;
  const fire = (args) => { clearTimeout(timer); timer = null; first = 0; fn(...args); };
  const wrapped = (...args) => {
    const now = Date.now();
    if (!first) first = now;
    clearTimeout(timer);
    if (maxWait && now - first >= maxWait) { fire(args); return; }
    timer = setTimeout(() => fire(args), ms);
  };
  wrapped.cancel = () => { clearTimeout(timer); timer = null; first = 0; };
  return wrapped;
}

/** A transient message in the corner. kind: "info" | "error" | "ok". */
export function toast(message, kind = "info", ms = 5000) {
  let host = document.getElementById("toasts");
  if (!host) {
    host = h("div", { id: "toasts", role: "status", "aria-live": "polite" });
    document.body.appendChild(host);
  }
  const item = h(`div.toast.toast-${kind}`, { role: kind === "error" ? "alert" : "status" }, message);
  const close = h("button.toast-x", { type: "button", "aria-label": "dismiss", onclick: () => item.remove() }, "×");
  item.appendChild(close);
  host.appendChild(item);
  if (ms > 0) setTimeout(() => item.remove(), kind === "error" ? ms * 2 : ms);
  return item;
}

/**
 * A modal dialog. Resolves with true (confirmed), the input's value (when `input` is given),
 * or null (cancelled). `cancel: null` leaves out the Cancel button (a dialog that only informs).
 */
export function ask({ title, message = "", input = null, value = "", confirm = "OK", cancel = "Cancel", danger = false }) {
  return new Promise((resolve) => {
    const previous = document.activeElement;
    let field = null;
    const done = (result) => {
      overlay.remove();
      document.removeEventListener("keydown", onKey, true);
      if (previous && previous.focus) previous.focus();
      resolve(result);
    };
    const ok = () => done(field ? field.value : true);
    const onKey = (ev) => {
      if (ev.key === "Escape") { ev.stopPropagation(); ev.preventDefault(); done(null); }
      else if (ev.key === "Enter" && !ev.shiftKey && (!field || field.tagName !== "TEXTAREA")) {
        ev.preventDefault(); ev.stopPropagation(); ok();
      }
    };
    if (input) field = h("input.modal-input", { type: "text", placeholder: input, value });
    const overlay = h("div.modal-overlay", { onmousedown: (ev) => { if (ev.target === overlay) done(null); } },
      h("div.modal", { role: "dialog", "aria-modal": "true", "aria-label": title },
        h("h3.modal-title", title),
        message ? h("p.modal-message", message) : null,
        field,
        h("div.modal-actions",
          cancel ? h("button.btn", { type: "button", onclick: () => done(null) }, cancel) : null,
          h(`button.btn.${danger ? "btn-danger" : "btn-primary"}.modal-ok`, { type: "button", onclick: ok }, confirm))));
    document.body.appendChild(overlay);
    document.addEventListener("keydown", onKey, true);
    (field || overlay.querySelector(".modal-ok")).focus();
  });
}
