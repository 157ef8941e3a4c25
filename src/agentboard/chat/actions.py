"""A chat command run through the same functions as the CLI and REST, for a linked chat user.

The caller is checked exactly as an API token of the user's role and board would be: the
surface hands in its :class:`Caller` (the API's ``Principal`` for the link), and each command
asks it the same question the matching REST route asks (``check_read`` for a read,
``check_write`` for a change). ``dispatch`` runs a pass over every board, so it needs an
unscoped admin. Every change is an event whose actor is ``chat:<platform>:<user>``.

Adding a command: its :class:`~agentboard.chat.commands.Spec` in ``commands.COMMANDS`` and a
handler in :data:`HANDLERS` here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..config import Settings
from ..dispatch import finish
from ..domain import model, states
from ..domain.errors import AgentboardError, InvalidInput, NotFound
from ..kernel import chat_links, comments, lookups, queries, tasks
from ..store.engine import Database
from . import commands
from .commands import Command
from .format import Answer
from .threads import Origin

#: tasks ``list`` shows
LIST_MAX = 15


class Caller(Protocol):
    """The role checks of an API token (``api.auth.Principal``), named ``chat:<platform>:<user>``."""

    @property
    def name(self) -> str: ...

    @property
    def default_board(self) -> str: ...

    def sees(self, board: str) -> bool: ...

    def check_read(self, board: str) -> None: ...

    def check_write(self, board: str, task_id: str | None = None) -> None: ...

    def check_admin(self, board: str | None = None) -> None: ...


class Passer(Protocol):
    """The dispatcher a server hosts (``POST /api/dispatch``'s)."""

    def run_pass(self, max_spawn: int | None = None, dry_run: bool = False) -> object: ...


@dataclass
class Context:
    db: Database
    settings: Settings
    who: Caller
    origin: Origin | None = None
    dispatcher: Passer | None = None

    @property
    def actor(self) -> str:
        return self.who.name


Handler = Callable[[Context, Command], Answer]


def refusal(platform: str, user_id: str) -> Answer:
    """The answer to a chat user nobody linked: what an admin runs to let them in."""
    return Answer(
        headline="You are not linked to this agentboard yet.",
        lines=[f"An admin can let you in with: agentboard chat link {platform} {user_id} --role member"],
        ok=False, private=True)


def run(ctx: Context, cmd: Command) -> Answer:
    """Run ``cmd`` for the caller: its answer; a refused or failed command answers with the
    reason (nothing changed)."""
    try:
        return HANDLERS[cmd.verb](ctx, cmd)
    except AgentboardError as exc:
        return Answer(headline=f"Not done: {exc.message}", ok=False, private=True)


def run_text(ctx: Context, text: str) -> Answer:
    """Parse and run the text of a ``/kanban`` command."""
    try:
        cmd = commands.parse(text)
    except InvalidInput as exc:
        return Answer(headline=exc.message, lines=[commands.usage()], ok=False, private=True)
    return run(ctx, cmd)


def _task_board(ctx: Context, task_id: str) -> str:
    """The board of ``task_id`` as the caller may see it (a task on a board the caller may not
    see is answered like an unknown id, as REST does)."""
    slug = lookups.task_board(ctx.db, task_id)
    if not ctx.who.sees(slug):
        raise NotFound(f"no task {task_id}")
    return slug


def _writable(ctx: Context, task_id: str) -> str:
    slug = _task_board(ctx, task_id)
    ctx.who.check_write(slug, task_id)
    return slug


def _line(task: Mapping[str, Any]) -> str:
    who = f" @{task['assignee']}" if task.get("assignee") else ""
    return f"{task['id']} [{task['status']}] {task['title']}{who}"


def _about(task: Mapping[str, Any], headline: str, *, lines: list[str] | None = None) -> Answer:
    return Answer(headline=headline, lines=lines if lines is not None else [_line(task)], board=task.get("board"),
                  task_id=task.get("id"))


def _help(ctx: Context, cmd: Command) -> Answer:
    return Answer(headline="agentboard commands", lines=commands.usage().splitlines(), private=True)


def _create(ctx: Context, cmd: Command) -> Answer:
    slug = ctx.who.default_board
    ctx.who.check_write(slug)
    new = tasks.NewTask.build(slug, cmd.title or "", assignee=cmd.profile, goal=cmd.goal, actor=ctx.actor)
    if ctx.origin is not None:
        task = chat_links.create_in_thread(ctx.db, new, platform=ctx.origin.platform, channel=ctx.origin.channel,
                                           thread=ctx.origin.thread, target=ctx.origin.target,
                                           display=ctx.origin.display)
    else:
        task = tasks.create_task(ctx.db, new)
    lines = [_line(task), *task.get("warnings", [])]
    if ctx.origin is not None:
        lines.append(f"Its news will be posted in this {'thread' if ctx.origin.thread else 'channel'}.")
    return _about(task, f"Created {task['id']}", lines=lines)


def _list(ctx: Context, cmd: Command) -> Answer:
    slug = ctx.who.default_board
    ctx.who.check_read(slug)
    if cmd.status and cmd.status not in states.STATUSES:
        raise InvalidInput(f"unknown status {cmd.status!r}: use one of {', '.join(states.STATUSES)}")
    rows = queries.list_tasks(ctx.db, slug, status=cmd.status, limit=LIST_MAX + 1, newest_first=True)
    what = f"{cmd.status} tasks" if cmd.status else "tasks"
    if not rows:
        return Answer(headline=f"No {what} on board {slug}.", board=slug)
    more = [f"… and more: /kanban list {cmd.status or ''}".rstrip() + " narrows it"] if len(rows) > LIST_MAX else []
    return Answer(headline=f"{what.capitalize()} on board {slug}",
                  lines=[_line(r) for r in rows[:LIST_MAX]] + more, board=slug)


def _show(ctx: Context, cmd: Command) -> Answer:
    task_id = str(cmd.task_id)
    slug = _task_board(ctx, task_id)
    ctx.who.check_read(slug)
    task = queries.task_detail(ctx.db, slug, task_id, events=0)
    lines = [_line(task)]
    if task.get("block_reason"):
        lines.append(f"blocked: {task['block_reason']}")
    if task.get("result"):
        lines.append(f"result: {str(task['result']).strip().splitlines()[0][:300]}")
    if task.get("children"):
        lines.append(f"children: {len(task['children'])}")
    if task.get("comments"):
        lines.append(f"comments: {len(task['comments'])}")
    return _about(task, task["title"], lines=lines)


def _comment(ctx: Context, cmd: Command) -> Answer:
    task_id = str(cmd.task_id)
    slug = _writable(ctx, task_id)
    comments.comment(ctx.db, slug, task_id, str(cmd.text), author=ctx.actor)
    return Answer(headline=f"Commented on {task_id}", board=slug, task_id=task_id)


def _block(ctx: Context, cmd: Command) -> Answer:
    task_id = str(cmd.task_id)
    model.plain(str(cmd.text), "reason")  # no terminal controls: the CLI's, REST's and MCP's rule
    task = tasks.block(ctx.db, _writable(ctx, task_id), task_id, str(cmd.text), actor=ctx.actor)
    return _about(task, f"Blocked {task_id}")


def _unblock(ctx: Context, cmd: Command) -> Answer:
    task_id = str(cmd.task_id)
    task = tasks.unblock(ctx.db, _writable(ctx, task_id), task_id, actor=ctx.actor)
    return _about(task, f"Unblocked {task_id}")


def _verdict(ctx: Context, cmd: Command, verdict: str) -> Answer:
    task_id = str(cmd.task_id)
    slug = _writable(ctx, task_id)
    task = finish.review(ctx.db, slug, task_id, verdict, cmd.text or "", reviewer=ctx.actor, actor=ctx.actor)
    if verdict == "approved" and task.get("integration") == "refused":
        return _about(task, f"Not approved: {task_id} is blocked",
                      lines=[_line(task), str(task.get("block_reason") or "")])
    lines = [_line(task)]
    if task.get("integration"):
        lines.append(f"branch: {task['integration']}" + (f" ({task['pr_url']})" if task.get("pr_url") else ""))
    return _about(task, f"{'Approved' if verdict == 'approved' else 'Rejected'} {task_id}", lines=lines)


def _approve(ctx: Context, cmd: Command) -> Answer:
    return _verdict(ctx, cmd, "approved")


def _reject(ctx: Context, cmd: Command) -> Answer:
    return _verdict(ctx, cmd, "rejected")


def _pick(ctx: Context, cmd: Command) -> Answer:
    task_id = str(cmd.task_id)
    slug = _writable(ctx, task_id)
    task = finish.pick(ctx.db, slug, task_id, int(cmd.n or 0), actor=ctx.actor)
    how = f" ({task['integration']})" if task.get("integration") else ""
    return _about(task, f"Picked attempt {cmd.n} of {task_id}", lines=[_line(task) + how])


def _dispatch(ctx: Context, cmd: Command) -> Answer:
    ctx.who.check_admin()  # a pass starts work on every board
    if ctx.dispatcher is None:
        return Answer(headline="This server runs without a dispatcher (--no-dispatch); "
                      "start one with `agentboard dispatcher`.", ok=False)
    result = ctx.dispatcher.run_pass()
    spawned = result.get("spawned") if isinstance(result, dict) else None
    count = len(spawned) if isinstance(spawned, list) else spawned
    return Answer(headline="Dispatcher pass done" + (f": {count} started" if count is not None else ""))


HANDLERS: dict[str, Handler] = {
    "create": _create, "list": _list, "show": _show, "comment": _comment, "block": _block,
    "unblock": _unblock, "approve": _approve, "reject": _reject, "pick": _pick, "dispatch": _dispatch, "help": _help,
}
