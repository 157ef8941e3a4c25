"""Short answers, formatted for each platform: Slack mrkdwn (and a section block), Discord
markdown content, Telegram HTML; with a link to the task in the dashboard when ``public_url``
is set."""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

#: the most characters of one answer (Discord's limit is 2000, Telegram's 4096)
MAX = 1900


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


def _cut(text: str) -> str:
    return text if len(text) <= MAX else text[: MAX - 1] + "…"


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack(answer: Answer, public_url: str | None) -> dict[str, Any]:
    """A Slack message: ``text`` (mrkdwn) and one section block; ephemeral when private."""
    text = "*" + _slack_escape(answer.headline) + "*"
    if answer.lines:
        text += "\n" + "\n".join(_slack_escape(line) for line in answer.lines)
    url = task_link(public_url, answer.board, answer.task_id)
    if url:
        text += f"\n<{url}|Open {answer.task_id} in the dashboard>"
    text = _cut(text)
    return {"response_type": "ephemeral" if answer.private else "in_channel", "text": text,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}


def discord(answer: Answer, public_url: str | None) -> dict[str, Any]:
    """A Discord message: ``content`` in Discord's markdown; ephemeral (flag 64) when private."""
    text = "**" + answer.headline.replace("*", "\\*") + "**"
    if answer.lines:
        text += "\n" + "\n".join(answer.lines)
    url = task_link(public_url, answer.board, answer.task_id)
    if url:
        text += f"\n[Open {answer.task_id} in the dashboard](<{url}>)"
    out: dict[str, Any] = {"content": _cut(text), "allowed_mentions": {"parse": []}}
    if answer.private:
        out["flags"] = 64
    return out


def telegram(answer: Answer, public_url: str | None) -> dict[str, Any]:
    """A Telegram ``sendMessage`` body's text in HTML."""
    text = "<b>" + html.escape(answer.headline) + "</b>"
    if answer.lines:
        text += "\n" + "\n".join(html.escape(line) for line in answer.lines)
    url = task_link(public_url, answer.board, answer.task_id)
    if url:
        text += f'\n<a href="{html.escape(url)}">Open {html.escape(answer.task_id or "")} in the dashboard</a>'
    return {"text": _cut(text), "parse_mode": "HTML", "disable_web_page_preview": True}


def notification(title: str, body: str) -> Answer:
    """A notifier message (title and body) as an answer posted in a thread."""
    lines = [line for line in body.splitlines() if line.strip()]
    return Answer(headline=title, lines=lines)
