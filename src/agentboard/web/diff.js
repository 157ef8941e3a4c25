// A task's branch and its diff in the drawer: branch, base, commits ahead/behind, the diff
// stat, what approval did (merged, pull request), then the changed files with their +/- counts;
// a file opens its unified diff. Large diffs are paged (GET /api/tasks/{id}/diff?page=N).

import { api } from "./api.js";
import { clear, h } from "./dom.js";
import { scope } from "./state.js";

const INTEGRATION = {
  merged: "merged into the base branch", squashed: "squashed onto the base branch",
  rebased: "rebased onto the base branch", pr_opened: "pull request opened", left: "branch left as it is",
  refused: "integration refused",
};

/** The "Branch" facts of a worktree task (null for other workspaces). */
export function branchBlock(task) {
  const g = task.git;
  if (!g) return null;
  const rows = [
    h("label", "Branch"), h("code.wrap.git-branch", g.branch || "(none yet)"),
    h("label", "Base"), h("code.wrap.git-base", g.base || "-"),
  ];
  if (g.exists) {
    rows.push(h("label", "Commits"), h("span.git-ahead", g.landed
      ? `landed on ${g.base || "the base"} (${g.landed})` : `${g.ahead} ahead, ${g.behind} behind`));
    rows.push(h("label", g.landed ? "Landed" : "Changes"), h("span.git-stat",
      `${g.files} file${g.files === 1 ? "" : "s"} `, h("span.diff-add", `+${g.insertions}`), " ",
      h("span.diff-del", `−${g.deletions}`),
      g.uncommitted ? ` · ${g.uncommitted} uncommitted` : ""));
  } else if (g.note) {
    rows.push(h("label", "Note"), h("span.muted", g.note));
  }
  if (g.integration) {
    rows.push(h("label", "On approval"), h(`span.git-integration.integration-${g.integration}`,
      INTEGRATION[g.integration] || g.integration));
  }
  if (g.pr_url) rows.push(h("label", "Pull request"), h("a.git-pr", { href: g.pr_url, target: "_blank", rel: "noopener" }, g.pr_url));
  return h("div.meta-grid.git-grid", rows);
}

/** The "Diff" section body: loads on demand, keeps the open file and page across refreshes. */
export function diffBlock(task, view) {
  const box = h("div.diff-view", { "aria-label": "diff" });
  if (!view.loaded || view.id !== task.id) {
    Object.assign(view, { id: task.id, page: 1, open: null, data: null, loaded: true });
  }
  if (view.stamp !== task.updated_at) Object.assign(view, { stamp: task.updated_at, data: null });
  load(box, task, view);
  return box;
}

async function load(box, task, view) {
  let data = view.data;
  if (!data || data.page !== view.page) {
    box.append(h("div.muted", "Loading the diff…"));
    try {
      data = await api.get(`/api/tasks/${encodeURIComponent(task.id)}/diff`, scope({ page: view.page }));
    } catch (err) {
      clear(box);
      box.append(h("div.drawer-error", { role: "alert" }, `diff unavailable: ${err.message}`));
      return;
    }
    view.data = data;
  }
  draw(box, task, view, data);
}

function draw(box, task, view, data) {
  clear(box);
  if (!data.files.length) {
    const g = task.git || {};
    const landed = ["merged", "squashed", "rebased"].includes(g.integration);
    box.append(h("div.md.empty", data.how.startsWith("none") ? "No diff: the workspace is not in a git repository."
      : landed ? `Nothing left to merge: the branch's changes are on ${g.base || "the base branch"} (${INTEGRATION[g.integration]}).`
        : "No changes yet."));
    return;
  }
  box.append(h("div.diff-summary", `${data.total_files} file${data.total_files === 1 ? "" : "s"} changed `,
    h("span.diff-add", `+${data.additions}`), " ", h("span.diff-del", `−${data.deletions}`)));
  const onPage = new Set(data.shown.map((f) => f.path));
  const list = h("ul.diff-files");
  for (const f of data.files) {
    const shown = data.shown.find((s) => s.path === f.path);
    const item = h("li.diff-file", { dataset: { path: f.path } },
      h("button.link-btn.diff-file-name", {
        type: "button", disabled: !onPage.has(f.path), title: onPage.has(f.path) ? "show the diff" : "on another page",
        onclick: () => { view.open = view.open === f.path ? null : f.path; draw(box, task, view, data); },
      }, f.path),
      h(`span.diff-status.diff-status-${f.status}`, f.status),
      f.uncommitted ? h("span.pill", { title: "not committed on the branch yet" }, "uncommitted") : null,
      f.binary ? h("span.diff-counts", "binary")
        : h("span.diff-counts", h("span.diff-add", `+${f.additions}`), " ", h("span.diff-del", `−${f.deletions}`)));
    if (shown && view.open === f.path) item.append(unified(shown));
    list.append(item);
  }
  box.append(list);
  if (data.pages > 1) {
    const go = (p) => { view.page = p; view.open = null; box.replaceChildren(); load(box, task, view); };
    box.append(h("div.diff-pager",
      h("button.btn.btn-sm", { type: "button", disabled: data.page <= 1, onclick: () => go(data.page - 1) }, "‹ Previous"),
      h("span.diff-page", `files page ${data.page} of ${data.pages}`),
      h("button.btn.btn-sm", { type: "button", disabled: data.page >= data.pages, onclick: () => go(data.page + 1) }, "Next ›")));
  }
}

function unified(file) {
  const pre = h("pre.diff-text");
  for (const line of file.diff.split("\n")) {
    let cls = "";
    if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff --git") || line.startsWith("index ")) cls = ".diff-meta";
    else if (line.startsWith("@@")) cls = ".diff-hunk";
    else if (line.startsWith("+")) cls = ".diff-line-add";
    else if (line.startsWith("-")) cls = ".diff-line-del";
    pre.append(h(`span.diff-line${cls}`, `${line}\n`));
  }
  if (file.truncated) pre.append(h("span.diff-line.diff-meta", `… cut: ${file.size} characters in all\n`));
  return pre;
}
