// The profiles page's "Check" button: the report of POST /api/profiles/{name}/check (the same as
// `agentboard profiles check NAME`), each check with its fix when it fails.

import { api } from "./api.js";
import { clear, h } from "./dom.js";

export function profileCheck(p) {
  const out = h("div.profile-check", { "aria-live": "polite" });
  const button = h("button.btn.btn-sm.profile-check-btn", {
    type: "button",
    title: "Find the executable and its version, try the command line on the CLI (no credentials, no network), check MCP wiring and credentials",
  }, "Check");
  button.addEventListener("click", async () => {
    button.disabled = true;
    clear(out).appendChild(h("div.check-running", `Checking ${p.name}… (the agent CLI is started once, with no credentials and no network)`));
    try {
      render(out, await api.post(`/api/profiles/${encodeURIComponent(p.name)}/check`));
    } catch (err) {
      clear(out).appendChild(h("div.check-item.check-fail", { role: "alert" },
        h("span.check-mark", "✗"), h("span.check-name", "check"), h("span.check-detail", err.message)));
    } finally {
      button.disabled = false;
    }
  });
  return { button, out };
}

function render(out, report) {
  clear(out);
  out.appendChild(h(`div.check-summary.${report.ok ? "check-ok" : "check-fail"}`,
    report.ok ? `${report.profile} is ready` : `${report.profile} is not ready`));
  for (const c of report.checks || []) {
    const kind = !c.ok ? "check-fail" : c.warn ? "check-warn" : "check-ok";
    out.appendChild(h(`div.check-item.${kind}`,
      h("span.check-mark", !c.ok ? "✗" : c.warn ? "!" : "✓"),
      h("span.check-name", c.name),
      h("code.check-detail", c.detail),
      c.fix && (!c.ok || c.warn) ? h("div.check-fix", "Fix: ", h("code", c.fix)) : null));
  }
}
