"""Task verbs: create, list, show, context, edit, assign, link, unlink, comment."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import click

from . import common
from .common import board_option, handle_errors, json_option, task_board_option


def _mine() -> str:
    me = common.me()
    who = me.profile or me.actor or os.environ.get("USER") or ""
    if not who:
        from agentboard.domain.errors import InvalidInput

        raise InvalidInput("--mine needs AGENTBOARD_PROFILE (or AGENTBOARD_ACTOR) to say who you are")
    return who


def _warn_if_not_a_profile(assignee: str | None) -> None:
    """A task for a name that is no profile is fine for a person, but the dispatcher skips it."""
    if not assignee or assignee == "none":
        return
    from agentboard.kernel import profiles

    warning = profiles.assignee_warning(common.db(), assignee)
    if warning:
        from .output import warn

        warn(warning)


def _field_options(fn: Any) -> Any:
    """The options of ``create``, one per new-task field (``domain/task_fields.py``): a list's
    is repeatable (``--parent A --parent B`` or ``--parent A,B``), a flag takes no value."""
    from agentboard.domain import task_fields

    for f in reversed(task_fields.FIELDS):
        if f.cli_option is None:
            continue
        if f.kind == "flag":
            fn = click.option(f.cli_option, f.name, is_flag=True, help=f.help)(fn)
        else:
            fn = click.option(f.cli_option, f.name, default=None, multiple=f.kind == "list", metavar=f.metavar,
                              help=f.describe())(fn)
    return fn


@click.command("create")
@click.argument("title")
@_field_options
@click.option("--body-file", default=None, metavar="F", help="read the body from a file ('-' = stdin)")
@click.option("--check", "checks", multiple=True, metavar="NAME",
              help="a named check of the board that must pass (repeatable; `boards checks list`)")
@board_option
@json_option
@handle_errors
def create(title: str, body_file: str | None, checks: tuple[str, ...], board: str | None, as_json: bool,
           **fields: Any) -> None:
    """Create a task (ready when every parent is done and it has an assignee)."""
    from agentboard.domain import task_fields
    from agentboard.kernel import host_access, tasks

    slug = common.resolve_board(board)
    fields["body"] = common.read_text(fields["body"], body_file)
    fields["parents"] = common.split_ids(fields["parents"])
    fields["verify"] = [*fields["verify"], *(host_access.CHECK_PREFIX + c for c in checks)]
    given = task_fields.checked({"title": title, **{k: v for k, v in fields.items() if v not in (None, (), [])}})
    title = given.pop("title")
    api = common.remote()
    if api is not None:  # a worker: only a proposal in triage, unless it is an orchestrator
        task = api.create(slug, {"title": title, **{k: list(v) if isinstance(v, tuple) else v
                                                    for k, v in given.items()}})
    else:
        task = tasks.create(common.db(), slug, title, actor=common.actor(), **given)
        _warn_if_not_a_profile(task["assignee"])
        if as_json:  # the workspace it will get, as `show` says it (a worktree on a git target)
            from agentboard.dispatch.diffs import planned

            task = planned(dict(task), common.db())
    if as_json:
        common.emit_json(task)
        return
    note = " (existing task with this idempotency key)" if task.get("existing") else ""
    from .output import status

    click.echo(f"{task['id']}  {status(task['status'])}  {task['title']}{note}")
    if task.get("attempts"):
        click.echo(f"  race ({task.get('race_until')}): " + ", ".join(
            f"{a['n']}: {a['profile']}" + (f":{a['model']}" if a.get("model") else "") for a in task["attempts"]))


@click.command("list")
@click.option("--mine", is_flag=True, help="tasks assigned to you (AGENTBOARD_PROFILE)")
@click.option("--assignee", default=None, metavar="P", help="a profile, or 'none'")
@click.option("--status", "statuses", multiple=True, metavar="S", help="repeatable or comma-separated")
@click.option("--tenant", default=None)
@click.option("--goal", default=None, metavar="G")
@click.option("--search", default=None, metavar="Q")
@click.option("--archived", is_flag=True, help="include archived tasks")
@click.option("--supervision", is_flag=True, help="include the supervisor's own tasks")
@click.option("--limit", default=200, type=click.IntRange(1), metavar="N", help="show at most N tasks")
@board_option
@json_option
@handle_errors
def list_(mine: bool, assignee: str | None, statuses: tuple[str, ...], tenant: str | None,
          goal: str | None, search: str | None, archived: bool, supervision: bool, limit: int, board: str | None,
          as_json: bool) -> None:
    """List tasks, highest priority first (the supervisor's own tasks with --supervision)."""
    from agentboard.kernel import queries

    if mine:
        assignee = _mine()
    api = common.remote()
    rows: Sequence[Mapping[str, Any]]
    if api is not None:
        slug = common.resolve_board(board)
        rows = api.list_tasks(slug, assignee=assignee, status=common.split_ids(statuses) or None,
                              tenant=tenant, goal=goal, search=search, include_archived=archived, limit=limit,
                              **({"supervision": True} if supervision else {}))
    else:
        from agentboard.kernel import boards as kboards

        row = kboards.get(common.db(), common.resolve_board(board))
        slug = row["slug"]
        if row["archived"]:
            from .output import warn

            warn(f"board {slug!r} is archived: its tasks are listed as they were left "
                 f"(`agentboard boards restore {slug}` brings it back)")
        rows = queries.list_tasks(
            common.db(), slug, assignee=assignee, status=list(statuses) or None, tenant=tenant,
            goal=goal, search=search, include_archived=archived, limit=limit, supervision=supervision,
        )
    if as_json:
        common.emit_json(rows)
        return
    from .output import age, clip, table

    table(
        ["id", "status", "pri", "assignee", "title", "updated"],
        [(r["id"], r["status"], r["priority"], r["assignee"], clip(r["title"], 70), age(r["updated_at"]))
         for r in rows],
        empty=(f"no tasks match these filters on board {slug!r}"
               if assignee or statuses or tenant or goal or search else f"no tasks on board {slug!r}"),
    )
    if len(rows) == limit:
        click.echo(f"(the first {limit}; there may be more: narrow the filters or raise --limit)", err=True)


def _print_detail(t: Mapping[str, Any]) -> None:
    from .output import age, clip, duration, echo, event_line, fields, heading, table

    fields([
        ("id", t["id"]), ("title", t["title"]), ("status", t["status"]),
        ("board", t["board"]), ("assignee", t.get("assignee")), ("priority", t.get("priority")),
        ("tenant", t.get("tenant")),
        ("goal", f"{t['goal']['id']} {t['goal']['title']}" if t.get("goal") else t.get("goal_id")),
        ("blocked", f"[{t.get('block_kind')}] {t.get('block_reason')}" if t.get("block_reason") else None),
        ("workspace", f"{t.get('workspace_kind')}" + (f":{t['workspace_path']}" if t.get("workspace_path") else "")),
        ("branch", t.get("branch_name")), ("base", t.get("base_branch")),
        ("git", (t.get("git") or {}).get("summary")),
        ("integration", (t.get("integration") or "").replace("_", " ") or None), ("pull request", t.get("pr_url")),
        ("skills", t.get("skills")), ("verify", t.get("verify")),
        ("review", "required" if t.get("review_required") else None),
        ("max runtime", duration(t["max_runtime_seconds"]) if t.get("max_runtime_seconds") else None),
        ("model", t.get("model")),
        ("race", f"{t['race']['badge']} (until {t.get('race_until')}): " + ", ".join(
            f"{a['n']} {a['profile']}{':' + a['model'] if a.get('model') else ''} {a.get('outcome') or a['state']}"
            + (" *picked*" if a.get("picked") else "") for a in t["race"]["attempts"])
         + f"; agentboard attempts {t['id']}" if t.get("race") else None),
        ("current run", t.get("current_run_id")), ("result", t.get("result")),
        ("failures", t.get("consecutive_failures") or None),
        ("created", f"{age(t.get('created_at'))} ago by {t.get('created_by') or '-'}"),
    ])
    if t.get("body"):
        click.echo("")
        heading("Body")
        echo(t["body"].rstrip())
    for key, label in (("parents", "Parents"), ("children", "Children")):
        if t.get(key):
            click.echo("")
            table(["id", "status", "assignee", "title"],
                  [(p["id"], p["status"], p["assignee"], clip(p["title"], 70)) for p in t[key]], title=label)
    if t.get("runs"):
        click.echo("")
        table(["run", "attempt", "profile", "outcome", "took", "summary / error"],
              [(r["id"], r.get("attempt"), r.get("profile"), r.get("outcome") or r.get("status"),
                duration((r["ended_at"] or 0) - r["started_at"]) if r.get("ended_at") and r.get("started_at") else "-",
                clip(r.get("summary") or r.get("error"), 60)) for r in t["runs"]],
              title="Runs", status_column=None)
    for r in t.get("runs") or []:
        meta = r.get("metadata") if isinstance(r.get("metadata"), dict) else {}
        if meta.get("degraded"):
            click.echo("")
            click.echo(f"run {r['id']}: degraded result — .board/result.json never validated; the summary was "
                       "taken from the worker's output. The validation errors:")
            for err in meta.get("errors") or []:
                echo(f"  - {err}")
    if t.get("attachments"):
        click.echo("")
        table(["name", "size", "path"], [(a["name"], a["size"], a["path"]) for a in t["attachments"]],
              title="Attachments", status_column=None)
    if t.get("reviews"):
        click.echo("")
        table(["verdict", "score", "reviewer", "summary"],
              [(r.get("verdict"), r.get("score"), r.get("reviewer"), clip(r.get("summary"), 70))
               for r in t["reviews"]], title="Reviews", status_column=None)
    if t.get("comments"):
        click.echo("")
        heading("Comments")
        for c in t["comments"]:
            echo(f"- {c['author']} ({age(c['created_at'])} ago): {c['body']}")
    if t.get("events"):
        click.echo("")
        heading("Events")
        for ev in t["events"]:
            click.echo(event_line(ev, with_task=False))


@click.command("show")
@click.argument("task_id", required=False, metavar="[ID]")
@click.option("--events", "n_events", default=50, type=click.IntRange(0), metavar="N", help="how many recent events")
@task_board_option
@json_option
@handle_errors
def show(task_id: str | None, n_events: int, board: str | None, as_json: bool) -> None:
    """A task with parents, children, comments, runs and recent events.

    Inside a worker, ID defaults to the worker's own task (AGENTBOARD_TASK).
    """
    from agentboard.kernel import queries

    tid = common.worker_task(task_id)
    api = common.remote()
    detail: Mapping[str, Any]
    if api is not None:
        detail = api.task_detail(tid, board=board, events=n_events)
    else:
        from agentboard.dispatch.diffs import with_git

        detail = with_git(queries.task_detail(common.db(), common.task_board(tid, board), tid, events=n_events), common.db())
    if as_json:
        common.emit_json(detail)
        return
    _print_detail(detail)


@click.command("context")
@click.argument("task_id", required=False, metavar="[ID]")
@task_board_option
@json_option
@handle_errors
def context(task_id: str | None, board: str | None, as_json: bool) -> None:
    """Print exactly what a worker sees first: the worker context markdown.

    With --json: {"task_id", "board", "markdown"}.
    """
    from agentboard.protocol.context import build_worker_context

    tid = common.worker_task(task_id)
    api = common.remote()
    if api is not None:
        doc = api.context(tid, board=board)
        common.emit(doc, as_json, str(doc["markdown"]).rstrip("\n"))
        return
    slug = common.task_board(tid, board)
    from agentboard.dispatch.diffs import with_git

    db = common.db()
    text = build_worker_context(db, slug, tid, enrich=lambda d: with_git(d, db)).rstrip("\n")
    common.emit({"task_id": tid, "board": slug, "markdown": text + "\n"}, as_json, text)


@click.command("edit")
@click.argument("task_id", metavar="ID")
@click.option("--title", default=None)
@click.option("--body", default=None)
@click.option("--body-file", default=None, metavar="F", help="read the body from a file ('-' = stdin)")
@click.option("--priority", default=None, metavar="N")
@click.option("--tenant", default=None, help="'' clears it")
@click.option("--goal", default=None, metavar="G")
@click.option("--max-runtime", default=None, metavar="DUR")
@click.option("--max-retries", default=None, type=int, metavar="N")
@click.option("--result", default=None, metavar="LINE")
@click.option("--verify", "verify", multiple=True, metavar="CMD",
              help="replace the verify commands (repeatable; '' alone clears them)")
@click.option("--model", "model_name", default=None, metavar="M",
              help="the model the agent CLI runs this task with ('' clears it: the profile's)")
@click.option("--branch", default=None, metavar="NAME",
              help="the git branch of a worktree task that has not started ('' clears it: ab/<id>); "
                   "an existing branch is checked out as it is, so the task starts from its commits")
@task_board_option
@json_option
@handle_errors
def edit(task_id: str, title: str | None, body: str | None, body_file: str | None,
         priority: str | None, tenant: str | None, goal: str | None, max_runtime: str | None,
         max_retries: int | None, result: str | None, verify: tuple[str, ...], model_name: str | None,
         branch: str | None, board: str | None, as_json: bool) -> None:
    """Change a task's title, body, priority, tenant, model, limits, verify commands or (before
    it starts) its branch; no status change."""
    from agentboard.domain import task_fields
    from agentboard.kernel import tasks

    slug = common.task_board(task_id, board)
    text = common.read_text(body, body_file)
    commands = [c for c in verify if c.strip()] if verify else None
    priority = task_fields.check("priority", priority)  # create's limits and message
    max_retries = task_fields.check("max_retries", max_retries)
    if max_runtime:  # create's limits and message ("" is passed on: it clears the limit)
        max_runtime = task_fields.check("max_runtime", max_runtime)
    task = tasks.edit(
        common.db(), slug, task_id, title=title, body=text, priority=priority, tenant=tenant,
        goal_id=goal, max_runtime_seconds=max_runtime, max_retries=max_retries, result=result,
        model=model_name, branch_name=branch, actor=common.actor(),
        **({"verify": commands} if commands is not None else {}),
    )
    common.emit(task, as_json, f"{task['id']}: edited")


@click.command("assign")
@click.argument("task_id", metavar="ID")
@click.argument("profile", metavar="PROFILE|none")
@click.option("--reclaim", is_flag=True, help="reclaim a running task first")
@task_board_option
@json_option
@handle_errors
def assign(task_id: str, profile: str, reclaim: bool, board: str | None, as_json: bool) -> None:
    """Give a task to a profile (or 'none' to unassign)."""
    from agentboard.kernel import tasks

    slug = common.task_board(task_id, board)
    task = tasks.assign(common.db(), slug, task_id, profile, reclaim=reclaim, actor=common.actor())
    _warn_if_not_a_profile(task["assignee"])
    if as_json:
        common.emit_json(task)
        return
    from .output import status

    click.echo(f"{task['id']}: assigned to {task['assignee'] or 'nobody'} ({status(task['status'])})")


def _link_command(name: str, doc: str, done: str) -> click.Command:
    """``link`` and ``unlink``: the same arguments, one kernel call each, on the tasks' board
    (both must be on one board: links across boards are refused)."""

    @click.command(name, help=doc)
    @click.argument("parent", metavar="PARENT")
    @click.argument("child", metavar="CHILD")
    @task_board_option
    @json_option
    @handle_errors
    def command(parent: str, child: str, board: str | None, as_json: bool) -> None:
        from agentboard.kernel import links

        api = common.remote()
        if api is not None:
            out = getattr(api, name)(parent, child, board=board)
        else:
            common.task_board(parent, board)
            slug = common.task_board(child, board)
            out = getattr(links, name)(common.db(), slug, parent, child, actor=common.actor())
        common.emit(out, as_json, f"{done} {parent} -> {child}")

    return command


link = _link_command("link", "Make CHILD wait for PARENT.", "linked")
unlink = _link_command("unlink", "Remove the dependency PARENT -> CHILD.", "unlinked")


@click.command("comment")
@click.argument("args", nargs=-1, metavar="[ID] TEXT")
@click.option("--author", default=None, metavar="NAME")
@click.option("--no-mentions", is_flag=True, help="do not turn @profile mentions into follow-up tasks")
@task_board_option
@json_option
@handle_errors
def comment(args: tuple[str, ...], author: str | None, no_mentions: bool, board: str | None,
            as_json: bool) -> None:
    """Append to a task's comment thread (@profile mentions create follow-up tasks).

    Inside a worker, ID defaults to the worker's own task: `agentboard comment "text"`.
    """
    from agentboard.domain import model
    from agentboard.domain.errors import InvalidInput
    from agentboard.kernel import comments

    if author is not None:  # one line, shown in every thread: nothing invisible (a title's rule)
        author = model.visible(author.strip(), "author") or None
    if len(args) == 2:
        task_id, text = args[0], args[1]
    elif len(args) == 1 and common.me().task:
        task_id, text = str(common.me().task), args[0]
    elif len(args) == 1:
        raise InvalidInput("give the task id and the text: agentboard comment ID \"text\"")
    else:
        raise InvalidInput("usage: agentboard comment ID \"text\" (quote the text)")
    api = common.remote()
    if api is not None:  # the API names the author (the run token's)
        out = api.comment(task_id, text, mentions=not no_mentions, board=board)
    else:
        out = comments.comment(common.db(), common.task_board(task_id, board), task_id, text,
                               author=author or common.actor(), mentions=not no_mentions,
                               run_id=common.worker_run_id(None))
    if as_json:
        common.emit_json(out)
        return
    msg = f"{task_id}: comment #{out['id']} added"
    if out.get("spawned_subtasks"):
        msg += f"; follow-up task(s) {', '.join(out['spawned_subtasks'])}"
    click.echo(msg)
    if out.get("skipped_mentions"):
        from .output import warn

        warn(f"no profile named {', '.join('@' + m for m in out['skipped_mentions'])}; no follow-up created")
