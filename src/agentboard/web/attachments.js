// The drawer's attachments: the files of a task, each a download with a remove button, and a
// drop zone (drag files in, or pick them) that uploads them to the task.

import { CSRF_HEADER } from "./api.js";
import { ask, h, toast } from "./dom.js";

const filesPath = (id, tail = "") => `/api/tasks/${encodeURIComponent(id)}/attachments${tail}`;

function size(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

async function send(method, url, body) {
  const init = { method, credentials: "same-origin", headers: { [CSRF_HEADER]: "1", Accept: "application/json" } };
  if (body !== undefined) {
    init.body = body;
    init.headers["Content-Type"] = "application/octet-stream";
  }
  const resp = await fetch(url, init);
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error((data.error && data.error.message) || `request failed (${resp.status})`);
  return data;
}

/** Upload each file to the task; resolves with the names stored. */
export async function uploadFiles(taskId, files) {
  const stored = [];
  for (const file of files) {
    const url = filesPath(taskId) + "?name=" + encodeURIComponent(file.name);
    const out = await send("POST", url, await file.arrayBuffer());
    stored.push(out.name);
  }
  return stored;
}

/** The attachments section body; `changed` runs after an upload or removal. */
export function attachmentsBlock(task, changed) {
  const files = task.attachments || [];
  const error = h("div.form-error", { role: "alert" });
  const list = files.length
    ? h("ul.attachments", files.map((a) => h("li.attachment",
      h("a.attachment-name", { href: filesPath(task.id, `/${a.id}`), download: a.name }, a.name),
      h("span.attachment-size", size(a.size || 0)),
      h("button.link-btn.attachment-remove", {
        type: "button", title: `remove ${a.name}`, "aria-label": `remove ${a.name}`,
        onclick: async () => {
          const ok = await ask({ title: "Remove attachment", message: `Remove ${a.name} from ${task.id}?`,
            confirm: "Remove", danger: true });
          if (!ok) return;
          try {
            await send("DELETE", filesPath(task.id, `/${a.id}`));
            toast(`removed ${a.name}`);
            changed();
          } catch (err) {
            error.textContent = err.message;
          }
        },
      }, "remove"))))
    : h("div.md.empty", "No files.");
  const picker = h("input.attachment-picker", { type: "file", multiple: true, hidden: true });
  const zone = h("div.dropzone", { tabindex: "0", role: "button", "aria-label": "attach files" },
    "Drop files here or ", h("span.link-btn", "choose files"), " to attach them.");
  const upload = async (fileList) => {
    const chosen = Array.from(fileList || []);
    if (!chosen.length) return;
    zone.classList.add("busy");
    error.textContent = "";
    try {
      const names = await uploadFiles(task.id, chosen);
      toast(`attached ${names.join(", ")}`);
      changed();
    } catch (err) {
      error.textContent = err.message;
    } finally {
      zone.classList.remove("busy");
    }
  };
  zone.addEventListener("click", () => picker.click());
  zone.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); picker.click(); } });
  picker.addEventListener("change", () => upload(picker.files));
  zone.addEventListener("dragover", (ev) => { ev.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (ev) => {
    ev.preventDefault();
    zone.classList.remove("over");
    upload(ev.dataTransfer && ev.dataTransfer.files);
  });
  return h("div", list, zone, picker, error);
}
