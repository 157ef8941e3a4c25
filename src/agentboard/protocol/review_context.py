"""The review context: what a reviewer (a profile's agent or one LLM call) reads about a task in
review.

It holds the task and its acceptance criteria, the worker's result summary, the verify commands'
output, the diff of the work (for a worktree: ``git diff <base>...<branch>`` in the repository plus
what is not committed yet; for a ``dir:`` folder in a git repository: its working tree against
``HEAD``; else none; a file of more than ``gitsizes.SHOWN_MAX`` bytes is listed with its size, its
text left out and never loaded), truncated to ``review_diff_max`` characters with a note of what was
cut, and the verdicts given before. The profile reviewer finds it in ``.board/review-context.md`` and
in its prompt; the LLM reviewer gets it as its prompt.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import gitsafe, gitsizes
from ..kernel import queries
from ..kernel.common import run_metadata
from ..store.engine import Database, Row

CONTEXT_FILE = "review-context.md"
PROMPT_FILE = "review-prompt.md"
#: untracked files shown in a diff, at most
UNTRACKED_MAX = gitsafe.UNTRACKED_MAX
GIT_TIMEOUT = 60.0
_CRITERIA = re.compile(r"^#{1,6}\s*acceptance criteria\s*$", re.IGNORECASE | re.MULTILINE)
_HEADING = re.compile(r"^#{1,6}\s", re.MULTILINE)
_NOT_WORK = (".board/", ".mcp.json")


@dataclass(frozen=True)
class WorkspaceFacts:
    """Where the reviewed work is: ``kind`` (``worktree``, ``dir``, ``scratch``), its folder, and
    for a worktree its repository and branch."""

    kind: str
    path: Path | None
    repo: Path | None = None
    branch: str | None = None
    #: the branch the task's branch started from (None: the repository's current branch)
    base: str | None = None


@dataclass(frozen=True)
class Diff:
    """The diff of the work: ``text`` (possibly cut), ``how`` it was made, and ``note`` saying
    what was cut (empty when nothing was)."""

    text: str
    how: str
    note: str = ""


def _out(repo: Path, *args: str) -> str:
    proc = gitsafe.run(repo, *args, check=False, timeout=GIT_TIMEOUT)
    return proc.stdout if proc.returncode in (0, 1) else ""


def _diff(repo: Path, revs: str) -> str:
    """``git diff revs`` in ``repo``, a file too big to show listed with its size, never loaded
    (:func:`agentboard.gitsizes.diff`)."""
    def git(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return gitsafe.run(repo, *args, check=False, timeout=GIT_TIMEOUT, input=input)

    return gitsizes.diff(git, (revs,))


def work_diff(ws: WorkspaceFacts) -> Diff:
    """The diff of the reviewed work (uncut): see the module docstring. Every git call goes
    through :mod:`agentboard.gitsafe`: the committed work is read in the repository, what is not
    committed yet through the worktree's view (never through the worktree's own ``.git``)."""
    path = ws.path
    try:
        if ws.kind == "worktree" and ws.repo is not None and ws.branch and gitsafe.toplevel(ws.repo) is not None:
            base = ws.base or _out(ws.repo, "symbolic-ref", "--short", "-q", "HEAD").strip() or "HEAD"
            tip = gitsafe.branch_tip(ws.repo, ws.branch) if gitsafe.check_branch_name(ws.branch) is None else None
            committed = _diff(ws.repo, f"{base}...{tip}") if tip else ""
            pending, refused = "", ""
            if path is not None and path.is_dir() and tip:
                try:
                    pending = gitsafe.worktree_diff(ws.repo, path, ws.branch, exclude=_NOT_WORK)
                except gitsafe.GitError as exc:
                    refused = f"; the uncommitted changes are not shown: {exc}"
            text = committed + (f"\n# not committed yet in {path}:\n{pending}" if pending else "")
            return Diff(text, f"`git diff {base}...{ws.branch}` in {ws.repo}"
                        + (" plus the uncommitted changes in the worktree" if pending else "") + refused)
        top = gitsafe.toplevel(path) if path is not None and ws.kind == "dir" else None
        if path is not None and top is not None:
            git_dir, _ = gitsafe.locate(top)
            rel = os.path.relpath(os.path.abspath(path), top)
            text = gitsafe.view_diff(git_dir, top, exclude=_NOT_WORK, drivers_off=True,
                                     prefix="" if rel == "." else rel + "/")
            return Diff(text, f"the working tree of {path} against HEAD (`git diff HEAD`, untracked files included)")
    except gitsafe.GitError as exc:
        return Diff("", f"none: git was not run on the workspace ({exc})")
    return Diff("", "none: the workspace is not in a git repository")


def landed_diff(repo: Path, before: str, commit: str) -> Diff | None:
    """What an integration put on the base: ``git diff before..commit`` in ``repo`` (None when
    either commit is gone, e.g. the history was rewritten since)."""
    for rev in (before, commit):
        if gitsafe.run(repo, "rev-parse", "--verify", "-q", rev + "^{commit}", check=False,
                       timeout=GIT_TIMEOUT).returncode != 0:
            return None
    text = _diff(repo, f"{before}..{commit}")
    return Diff(text, f"what landed on the base: `git diff {before[:12]}..{commit[:12]}` in {repo}")


def cut(diff: Diff, limit: int) -> Diff:
    """``diff`` with its text cut to ``limit`` characters at a line end, and a note of what was
    cut (the files whose changes are not shown, at least in part)."""
    text = diff.text
    if len(text) <= limit:
        return diff
    shown = text[:limit]
    if "\n" in shown:
        shown = shown[:shown.rindex("\n") + 1]
    files = re.findall(r"^diff --git a/(\S+)", text[len(shown):], re.MULTILINE)
    partly = re.findall(r"^diff --git a/(\S+)", shown, re.MULTILINE)
    cut_files = ([partly[-1]] if partly else []) + [f for f in files if not partly or f != partly[-1]]
    note = (f"the diff was cut to the first {len(shown)} of {len(text)} characters (review_diff_max = {limit}); "
            f"not shown in full: {', '.join(cut_files[:30]) or 'the end of the last file'}"
            + (f" and {len(cut_files) - 30} more files" if len(cut_files) > 30 else ""))
    return Diff(shown, diff.how, note)


def acceptance_criteria(body: str) -> str:
    """The task body's "Acceptance criteria" section (empty when it has none)."""
    m = _CRITERIA.search(body or "")
    if not m:
        return ""
    rest = body[m.end():]
    nxt = _HEADING.search(rest)
    return (rest[:nxt.start()] if nxt else rest).strip()


def is_review_run(run: Row) -> bool:
    """Whether a run (as ``task_detail`` lists it) is a review run."""
    return bool(run_metadata(run).get("review_run"))


def reviewed_run(detail: Mapping[str, Any]) -> Row | None:
    """The worker's run that sent the task to review: the latest closed run that is not a review run."""
    for run in reversed(detail.get("runs") or []):
        if run.get("status") == "closed" and not is_review_run(run):
            return dict(run)
    return None


def _verification(meta: dict[str, Any]) -> list[str]:
    v = meta.get("verification")
    if not isinstance(v, dict):
        return ["(the task has no verify commands)"]
    if v.get("skipped"):
        return [f"Skipped: {v.get('reason') or 'verification is turned off'}"]
    out = [f"Passed: {'yes' if v.get('passed') else 'no'}", ""]
    for c in v.get("commands") or []:
        out.append(f"- `{c.get('command')}` exited {c.get('exit_code')}"
                   + (" (timed out)" if c.get("timed_out") else ""))
        tail = (c.get("output_tail") or "").strip()
        if tail:
            out += ["", "```", tail, "```"]
    return out


def render(detail: Mapping[str, Any], diff: Diff) -> str:
    """The review context of a task read by ``queries.task_detail``, as markdown."""
    t = detail
    body = (t.get("body") or "").strip()
    criteria = acceptance_criteria(body)
    run = reviewed_run(t) or {}
    meta = run_metadata(run)
    out = [f"# Review of task {t['id']}: {t['title']}", "",
           f"Done by profile `{run.get('profile') or t.get('assignee') or 'unknown'}` in run {run.get('id', '?')}.", "",
           "## The task", "", body or "(no description)", "",
           "## Acceptance criteria", "",
           criteria or "(the task states none: judge the work against the task as written)", "",
           "## The worker's result", "", (run.get("summary") or "(no summary)").strip(), ""]
    for key, label in (("filesChanged", "Files changed"), ("notes", "Notes")):
        value = meta.get(key)
        if value:
            out += [f"{label}: " + (", ".join(map(str, value)) if isinstance(value, list) else str(value)), ""]
    if meta.get("degraded"):
        out += ["Its .board/result.json never validated: the summary was taken from its output.", ""]
    out += ["## Verification", "", *_verification(meta), "", "## Diff", "", f"How: {diff.how}.", ""]
    if diff.text.strip():
        out += ["```diff", diff.text.rstrip("\n"), "```", ""]
    elif diff.how.startswith("none"):
        out += ["(no diff)", ""]
    else:
        out += ["(the diff is empty: nothing changed)", ""]
    if diff.note:
        out += [f"Note: {diff.note}.", ""]
    reviews = t.get("reviews") or []
    out += ["## Prior verdicts", ""]
    if not reviews:
        out += ["(none: this is the first review)", ""]
    for r in reviews:
        score = f", score {r['score']}" if r.get("score") is not None else ""
        out.append(f"- {r.get('verdict')} by {r.get('reviewer')}{score}: {(r.get('summary') or '').strip()}")
        for f in r.get("findings") or []:
            where = f" ({f['file']})" if isinstance(f, dict) and f.get("file") else ""
            if isinstance(f, dict):
                out.append(f"  - [{f.get('severity')}]{where} {f.get('message')}")
    if reviews:
        out.append("")
    return "\n".join(out)


def answer_instructions(task_id: str, run_id: int) -> str:
    """How a profile reviewer answers (the end of its prompt)."""
    from .review import VERDICT_FILE, VERDICT_SCHEMA

    example = {"verdict": "changes_requested", "score": 60, "summary": "What must change, and why.",
               "findings": [{"file": "src/x.py", "severity": "major", "message": "crashes on empty input"}]}
    return "\n".join([
        "---", "",
        "# How to answer (agentboard reviewer protocol)", "",
        f"You are reviewing task {task_id} (review run {run_id}). The workspace is your current directory and",
        "holds the work; the text above is also in `.board/review-context.md`. Do not change the work:",
        "judge it against the task and its acceptance criteria.", "",
        f"Answer exactly once by writing `.board/{VERDICT_FILE}`, for example:", "",
        "```json", json.dumps(example, indent=2), "```", "",
        f"`verdict` is one of {', '.join(VERDICT_SCHEMA['properties']['verdict']['enum'])}; `score` an integer "
        "from 0 to 100; `summary` says why (a person and the next worker read it); `findings` is optional "
        "(severity critical, major, minor or info); `pick` only for a race (above). Unknown keys are refused.",
        "`approved` finishes the task, `changes_requested` sends it back to its worker with your summary, "
        "`rejected` blocks it for a person.", "",
    ])


def prepare(workspace: Path, context_md: str, task_id: str, run_id: int) -> Path:
    """Write ``.board/review-context.md`` and the reviewer's prompt into ``workspace`` (a previous
    verdict or result is moved aside first); return the prompt file."""
    from . import boarddir

    bdir = boarddir.board_dir(workspace)
    boarddir.archive_outputs(workspace)  # opens .board/ (made, or a link in its place removed)
    boarddir.write_text(bdir / CONTEXT_FILE, context_md)
    prompt = bdir / PROMPT_FILE
    boarddir.write_text(prompt, context_md + "\n" + answer_instructions(task_id, run_id))
    boarddir.git_exclude(workspace)
    return prompt


def _attempt_facts(own: Row) -> WorkspaceFacts:
    """Where a race attempt's work is (its own worktree ``<repo>/.worktrees/<id>``)."""
    path = Path(own.get("workspace_path") or "")
    repo = path.parent.parent if path.parent.name == ".worktrees" else path
    if own.get("workspace_kind") != "worktree" or not own.get("workspace_path"):
        return WorkspaceFacts("none", None)
    wt = repo / ".worktrees" / str(own["id"])
    return WorkspaceFacts("worktree", wt, repo, own.get("branch_name"), own.get("base_branch"))


def render_race(race: Row, diff_max: int) -> str:
    """A race's attempts for its reviewer: each attempt's outcome, verification, cost, summary
    and diff, and how to pick one (``pick`` in the verdict)."""
    out = ["## The attempts (this task is a race)", "",
           "Several agents attempted this task, each on its own branch. Compare their work. To approve, pick "
           "the attempt that wins: add `\"pick\": N` to an `approved` verdict (only an attempt whose outcome is "
           "done and whose verification did not fail may be picked). Its branch becomes the task's.", ""]
    for a in race.get("attempts") or []:
        own = a.get("task") or {}
        head = (f"### Attempt {a['n']} ({a['profile']}{':' + str(a['model']) if a.get('model') else ''}): "
                f"{a.get('outcome') or a.get('state')}, verification {a.get('verification') or 'none'}, "
                f"${float(a.get('cost_usd') or 0):.4f}")
        out += [head, "", (a.get("summary") or a.get("error") or "(no summary)").strip(), ""]
        if own.get("id"):
            diff = cut(work_diff(_attempt_facts({**own, "id": a["attempt_task_id"]})), diff_max)
            out += ["```diff", diff.text.rstrip("\n") or "(the diff is empty)", "```", ""]
            if diff.note:
                out += [f"Note: {diff.note}.", ""]
    return "\n".join(out)


def build(db: Database, board: str, task_id: str, ws: WorkspaceFacts, diff_max: int) -> str:
    """The review context of a task (one read of the task, then git in its workspace); a race's
    context holds every attempt's diff instead (:func:`render_race`)."""
    detail = queries.task_detail(db, board, task_id, events=0)
    if detail.get("race_until"):
        from ..kernel import races

        race = races.attempts(db, board, task_id)
        return render(detail, Diff("", "none: a race's work is on its attempts' branches, below")) + "\n" + \
            render_race(race, diff_max)
    return render(detail, cut(work_diff(ws), diff_max))


__all__ = ["CONTEXT_FILE", "PROMPT_FILE", "Diff", "answer_instructions", "prepare", "WorkspaceFacts", "acceptance_criteria", "build", "cut", "is_review_run",
           "render", "reviewed_run", "work_diff"]
