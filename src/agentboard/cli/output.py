"""Human output: tables, key/value blocks, colours and times.

Rich is imported only when printing for a person on a terminal; piped output is plain text
(aligned columns, no escape codes) so it stays cheap to produce and easy to grep.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import click

STATUS_STYLE = {
    "triage": "magenta",
    "todo": "white",
    "ready": "cyan",
    "running": "bold yellow",
    "review": "blue",
    "blocked": "bold red",
    "done": "green",
    "archived": "dim",
}


def is_tty() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


#: what :func:`printable` shows escaped: C0 controls but the line break and the tab, DEL, C1
#: controls, and the bidirectional overrides and isolates (``model.terminal_control``)
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    o = ord(m.group())
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


def printable(text: Any) -> str:
    """``text`` safe to print on a terminal: a control character that would act on it (ESC
    starting a sequence that moves the cursor, clears lines, sets the title or the clipboard;
    BEL, a carriage return, a C1 control) or a bidirectional override is shown as a visible
    escape (``\\x1b``, ``\\u202e``); line breaks and tabs stay. Every human renderer of
    the CLI prints free text through it; ``--json`` output stays exact."""
    value = "" if text is None else str(text)
    return _UNPRINTABLE.sub(_escape, value)


def echo(text: Any = "", **kwargs: Any) -> None:
    """``click.echo`` of :func:`printable` text."""
    click.echo(printable(text), **kwargs)


def age(ts: float | None, now: float | None = None) -> str:
    """``12s``, ``5m``, ``3h``, ``2d`` — how long ago ``ts`` was."""
    from agentboard.domain.model import elapsed

    return elapsed(ts, now) or "-"


def when(ts: float | None) -> str:
    """A local timestamp, second precision."""
    if not ts:
        return "-"
    try:
        return datetime.fromtimestamp(float(ts)).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):  # beyond the calendar: never an error after a commit
        return "never" if float(ts) > 0 else str(ts)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(round(float(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def clip(text: Any, width: int = 60) -> str:
    value = printable(" ".join(("" if text is None else str(text)).split()))
    return value if len(value) <= width else value[: width - 1] + "…"


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return printable(", ".join(str(v) for v in value)) or "-"
    return printable(value)


def table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    title: str | None = None,
    status_column: str | None = "status",
    empty: str = "nothing to show",
) -> None:
    """Print rows as a table: rich on a terminal, aligned plain text otherwise."""
    data = [[cell(v) for v in row] for row in rows]
    if not data:
        click.echo(empty)
        return
    if is_tty():
        from rich.table import Table
        from rich.text import Text

        t = Table(title=Text(printable(title)) if title else None, header_style="bold", show_edge=False, pad_edge=False)
        for col in columns:
            t.add_column(col, overflow="fold")
        si = columns.index(status_column) if status_column in columns else -1
        for row in data:
            cells: list[Any] = [Text(v) for v in row]
            if si >= 0:
                cells[si] = Text(row[si], style=STATUS_STYLE.get(row[si], ""))
            t.add_row(*cells)
        _console().print(t)
        return
    if title:
        click.echo(printable(title))
    widths = [max(len(str(c)), *(len(r[i]) for r in data)) for i, c in enumerate(columns)]
    lines = [columns, *data]
    for line in lines:
        click.echo("  ".join(str(v).ljust(widths[i]) for i, v in enumerate(line)).rstrip())


def fields(pairs: Iterable[tuple[str, Any]], *, title: str | None = None) -> None:
    """Print ``key: value`` lines (skipping empty values), aligned."""
    items = [(k, cell(v)) for k, v in pairs if v not in (None, "", [], {})]
    if title:
        heading(title)
    if not items:
        return
    width = max(len(k) for k, _ in items)
    tty = is_tty()
    for k, v in items:
        if tty and k == "status":
            _console().print(f"[bold]{k.ljust(width)}[/bold]  [{STATUS_STYLE.get(v, '')}]{v}[/]")
        else:  # a multi-line value keeps its later lines under the first one
            click.echo(f"{k.ljust(width)}  {v}".rstrip().replace("\n", "\n" + " " * (width + 2)))


def heading(text: str) -> None:
    if is_tty():
        click.secho(printable(text), bold=True)
    else:
        click.echo(printable(text))


def status(value: str) -> str:
    """A status word, coloured on a terminal."""
    if is_tty():
        fg = {"ready": "cyan", "running": "yellow", "review": "blue", "blocked": "red",
              "done": "green", "triage": "magenta"}.get(value)
        return click.style(value, fg=fg, bold=value in ("running", "blocked"))
    return value


def ok(message: str) -> None:
    click.echo(message)


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


def event_line(ev: Mapping[str, Any], *, with_task: bool = True) -> str:
    """One event as one line: ``#id time task kind actor details``."""
    payload = ev.get("payload") or {}
    details = []
    for key in ("status", "summary", "reason", "note", "assignee", "title", "error", "feedback", "excerpt", "name"):
        val = payload.get(key)
        if val not in (None, "", [], {}):
            details.append(f"{key}={clip(val, 80)}")
    parts = [f"#{ev['id']}", when(ev.get("created_at"))]
    if with_task:
        parts.append(ev.get("task_id") or "-")
    parts.append(ev.get("kind", "?"))
    if ev.get("run_id") is not None:
        parts.append(f"run={ev['run_id']}")
    if ev.get("actor"):
        parts.append(f"by={ev['actor']}")
    parts.extend(details)
    return printable("  ".join(str(p) for p in parts))


#: ``progress(phase, done, total)``: how far a long verb is (``total`` None: not known yet)
ProgressFn = Callable[[str, int, int | None], None]


def progress_shown(as_json: bool = False, *, data_on_stdout: bool = False) -> bool:
    """Whether a long verb shows a progress bar: never with --json, only when its output goes
    to a terminal (``data_on_stdout``: stdout carries the verb's data, e.g. ``export``; then the
    bar's own stream, stderr, decides)."""
    if as_json:
        return False
    try:
        err = sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
    return err and (data_on_stdout or is_tty())


@contextmanager
def progress(unit: str, *, as_json: bool = False, data_on_stdout: bool = False) -> Iterator[ProgressFn | None]:
    """A rich progress bar on stderr (what is done, the rate, the time left) for a long verb, or
    None when :func:`progress_shown` says no; the bar is gone when the block ends."""
    if not progress_shown(as_json, data_on_stdout=data_on_stdout):
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    class Rate(TransferSpeedColumn):
        def render(self, task: Any) -> Any:
            from rich.text import Text

            speed = task.finished_speed or task.speed
            return Text(f"{speed:,.0f} {unit}/s" if speed is not None else f"? {unit}/s", style="progress.data.speed")

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
                   TaskProgressColumn(), Rate(), TimeRemainingColumn(), console=Console(stderr=True),
                   transient=True, redirect_stdout=False, redirect_stderr=False)
    tasks: dict[str, Any] = {}

    def update(phase: str, done: int, total: int | None) -> None:
        new = phase not in tasks
        if new:
            for other in tasks.values():
                bar.update(other, visible=False)
            tasks[phase] = bar.add_task(phase, total=total)
        bar.update(tasks[phase], completed=done, total=total)
        if new or done == total:  # in between, rich redraws ten times a second
            bar.refresh()

    with bar:
        yield update
