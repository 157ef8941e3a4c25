"""Short answers, formatted for each platform: Slack mrkdwn (and a section block), Discord
markdown content, Telegram HTML; with a link to the task in the dashboard when ``public_url``
is set."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

#: the most characters of one answer, markup included (Discord's limit is 2000, Telegram's 4096)
MAX = 1900
#: the most characters of the headline's and of one line's markup in a long answer, so that a
#: long title leaves room for the lines after it
HEADLINE_MAX, LINE_MAX = 400, 500
#: a line cut to fewer characters than this is left out ("…" says some were)
PIECE_MIN = 40
ELLIPSIS = "…"


@dataclass
class Answer:
    """What a command answers: a headline, a few lines, the task it is about (for the link);
    ``private``: only the asker should see it (a refusal, help)."""

    headline: str
    lines: list[str] = field(default_factory=list)
    board: str | None = None
    task_id: str | None = None
    ok: bool = True
    private: bool = False

    def plain(self) -> str:
        return "\n".join([self.headline, *self.lines])


def task_link(public_url: str | None, board: str | None, task_id: str | None) -> str | None:
    """The dashboard address of a task, or ``None`` without ``public_url``."""
    if not public_url or not board or not task_id:
        return None
    return f"{public_url.rstrip('/')}/?board={quote(board)}&task={quote(task_id)}"


def _fit(plain: str, escape: Callable[[str], str], room: int) -> str:
    """``plain`` escaped in at most ``room`` characters: when it does not fit, the longest start
    of the *plain* text that does, escaped, then "…" — a cut never falls inside an entity."""
    out = escape(plain)
    if len(out) <= room:
        return out
    kept: list[str] = []
    used = 0
    for char in plain:
        piece = escape(char)
        if used + len(piece) > room - len(ELLIPSIS):
            break
        kept.append(piece)
        used += len(piece)
    return "".join(kept) + ELLIPSIS if room >= len(ELLIPSIS) else ""


def _compose(answer: Answer, wrap: tuple[str, str], head_escape: Callable[[str], str],
             escape: Callable[[str], str], tail: str) -> str:
    """The headline (escaped, inside ``wrap``), the lines (escaped), then ``tail`` (the link,
    kept whole), in at most :data:`MAX` characters. A long answer is cut in its plain text,
    before it is escaped and wrapped, so its markup stays whole; a long headline or line leaves
    room for the lines after it (:data:`HEADLINE_MAX`, :data:`LINE_MAX`), and lines with no
    room left are left out ("…")."""
    lines = [escape(line) for line in answer.lines]
    whole = wrap[0] + head_escape(answer.headline) + wrap[1] + "".join("\n" + line for line in lines) + tail
    if len(whole) <= MAX:
        return whole
    # what each line would take at most, its newline included
    needs = [1 + min(len(line), LINE_MAX) for line in lines]
    room = MAX - len(tail) - len(wrap[0]) - len(wrap[1])
    text = wrap[0] + _fit(answer.headline, head_escape, max(HEADLINE_MAX, room - sum(needs))) + wrap[1]
    room = MAX - len(tail) - len(text)
    for i, line in enumerate(answer.lines):
        if len(lines[i]) >= room and room <= PIECE_MIN:  # no room for a useful piece of it
            text += "\n" + ELLIPSIS if room > len(ELLIPSIS) else ""
            break
        piece = _fit(line, escape, min(room, max(LINE_MAX + 1, room - sum(needs[i + 1:]))) - 1)
        text += "\n" + piece
        room -= 1 + len(piece)
    return text + tail


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack(answer: Answer, public_url: str | None) -> dict[str, Any]:
    """A Slack message: ``text`` (mrkdwn) and one section block; ephemeral when private."""
    url = task_link(public_url, answer.board, answer.task_id)
    tail = f"\n<{url}|Open {answer.task_id} in the dashboard>" if url else ""
    text = _compose(answer, ("*", "*"), _slack_escape, _slack_escape, tail)
    return {"response_type": "ephemeral" if answer.private else "in_channel", "text": text,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}


def _discord_head(text: str) -> str:
    return text.replace("*", "\\*")


def discord(answer: Answer, public_url: str | None) -> dict[str, Any]:
    """A Discord message: ``content`` in Discord's markdown; ephemeral (flag 64) when private."""
    url = task_link(public_url, answer.board, answer.task_id)
    tail = f"\n[Open {answer.task_id} in the dashboard](<{url}>)" if url else ""
    out: dict[str, Any] = {"content": _compose(answer, ("**", "**"), _discord_head, str, tail),
                           "allowed_mentions": {"parse": []}}
    if answer.private:
        out["flags"] = 64
    return out


def telegram(answer: Answer, public_url: str | None) -> dict[str, Any]:
    """A Telegram ``sendMessage`` body's text in HTML."""
    url = task_link(public_url, answer.board, answer.task_id)
    tail = f'\n<a href="{html.escape(url)}">Open {html.escape(answer.task_id or "")} in the dashboard</a>' if url else ""
    return {"text": _compose(answer, ("<b>", "</b>"), html.escape, html.escape, tail), "parse_mode": "HTML",
            "disable_web_page_preview": True}


def notification(title: str, body: str) -> Answer:
    """A notifier message (title and body) as an answer posted in a thread."""
    lines = [line for line in body.splitlines() if line.strip()]
    return Answer(headline=title, lines=lines)
