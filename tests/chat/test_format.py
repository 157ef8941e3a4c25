"""Answers cut to the platforms' limits stay valid markup: the plain text is cut, never a tag,
a link or an entity, and the link to the task is kept whole."""

from __future__ import annotations

import re

import pytest

from agentboard.chat import format as fmt

from .conftest import PUBLIC_URL, telegram_html_error

LONG = [
    fmt.Answer(headline="<" * 480, lines=["t_1a2b3c4d [todo] " + "<" * 480, "blocked: " + "&" * 900],
               board="default", task_id="t_1a2b3c4d"),
    fmt.Answer(headline="R&D " * 300, lines=["a & b < c > d " * 200], board="default", task_id="t_1a2b3c4d"),
    fmt.Answer(headline="Tasks on board default", lines=[f"t_{i:08d} [todo] " + "x&y " * 40 for i in range(15)],
               board="default"),
]
_SLACK_TOKEN = re.compile(r"<[^<>|]+\|[^<>]*>|&(?:amp|lt|gt);|[<>&]")


@pytest.mark.parametrize("answer", LONG)
def test_a_long_telegram_answer_is_cut_in_its_text_and_stays_valid_html(answer: fmt.Answer) -> None:
    text = fmt.telegram(answer, PUBLIC_URL)["text"]
    assert len(text) <= fmt.MAX
    assert telegram_html_error(text) is None, text[-80:]
    assert text.startswith("<b>") and "</b>\n" in text and "…" in text
    if answer.task_id:
        assert text.endswith(f'&amp;task={answer.task_id}">Open {answer.task_id} in the dashboard</a>')


@pytest.mark.parametrize("answer", LONG)
def test_a_long_slack_answer_keeps_its_entities_and_its_link_whole(answer: fmt.Answer) -> None:
    text = fmt.slack(answer, PUBLIC_URL)["text"]
    assert len(text) <= fmt.MAX
    broken = [m.group(0) for m in _SLACK_TOKEN.finditer(text) if m.group(0) in ("<", ">", "&")]
    assert broken == [], text[-80:]
    if answer.task_id:
        assert text.endswith(f"&task={answer.task_id}|Open {answer.task_id} in the dashboard>")


@pytest.mark.parametrize("answer", LONG)
def test_a_long_discord_answer_keeps_its_link_whole(answer: fmt.Answer) -> None:
    text = fmt.discord(answer, PUBLIC_URL)["content"]
    assert len(text) <= fmt.MAX and text.startswith("**") and "**\n" in text
    if answer.task_id:
        assert text.endswith(f"&task={answer.task_id}>)")


def test_a_long_answer_still_shows_the_lines_after_a_long_headline() -> None:
    answer = LONG[0]
    for text in (fmt.telegram(answer, PUBLIC_URL)["text"], fmt.slack(answer, PUBLIC_URL)["text"]):
        assert "t_1a2b3c4d [todo]" in text and "blocked: &amp;" in text


def test_a_short_answer_is_not_cut() -> None:
    answer = fmt.Answer(headline="Created t_1 <a&b>", lines=["t_1 [todo] R&D"], board="default", task_id="t_1")
    assert fmt.telegram(answer, None)["text"] == "<b>Created t_1 &lt;a&amp;b&gt;</b>\nt_1 [todo] R&amp;D"
    assert fmt.slack(answer, None)["text"] == "*Created t_1 &lt;a&amp;b&gt;*\nt_1 [todo] R&amp;D"
    assert fmt.discord(answer, None)["content"] == "**Created t_1 <a&b>**\nt_1 [todo] R&D"
