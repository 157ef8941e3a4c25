"""Human output: tables, key/value blocks, colours and times.

Rich is imported only when printing for a person on a terminal; piped output is plain text
(aligned columns, no escape codes) so it stays cheap to produce and easy to grep.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
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


def age(ts: float | None, now: float | None = None) -> str:
    """``12s``, ``5m``, ``3h``, ``2d`` — how long ago ``ts`` was."""
    from agentboard.domain.model import elapsed

    return elapsed(ts, now) or "-"


def when(ts: float | None) -> str:
    """A local timestamp, second precision."""
    if not ts:
        return "-"
    return datetime.fromtimestamp(float(ts)).strftime("%Y-%m-%d %H:%M:%S")


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
    value = "" if text is None else str(text)
    value = " ".join(value.split())
    return value if len(value) <= width else value[: width - 1] + "…"


def cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "-"
    return str(value)


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

        t = Table(title=title, header_style="bold", show_edge=False, pad_edge=False)
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
        click.echo(title)
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
        click.secho(text, bold=True)
    else:
        click.echo(text)


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


def event_line(ev: dict[str, Any], *, with_task: bool = True) -> str:
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
    return "  ".join(parts)
