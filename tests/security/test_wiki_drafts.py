"""A worker's wiki proposals (``wikiProposals`` in its ``.board/result.json``) become draft pages
a person reads with ``agentboard wiki list`` / ``wiki show``: their titles obey the rule ``wiki
add`` enforces, and nothing of theirs acts on the person's terminal (an ESC sequence, OSC 52
writing the clipboard, OSC 0 retitling the window)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from testenv import on_terminal, wait_for

from agentboard.domain import model
from agentboard.domain.errors import InvalidInput
from agentboard.kernel import wiki

ESC, BEL = "\x1b", "\x07"
AGENT = r'''
import json
e, bel = "\x1b", "\x07"
json.dump({"success": True, "summary": "documented it",
           "followUpSuggestions": ["check the docs"],
           "wikiProposals": [
               {"contentMd": f"# wiki {e}[31m\n\n{e}]52;c;ZWNobyBwd25lZA=={bel} osc52 {e}]0;PWNED{bel}{e}[2J"},
               {"contentMd": "# Deploy checklist\n\nRun the smoke test first."}]},
          open(".board/result.json", "w"))
'''




def test_a_workers_wiki_draft_puts_no_terminal_escape_on_the_persons_terminal(ab: Any, home: Path,
                                                                               tmp_path: Path) -> None:
    from agentboard.dispatch.dispatcher import Dispatcher

    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    ab.add_profile("writer", command=f"{sys.executable} {script}")
    board = ab.board()
    tid = board.create("document it", assignee="writer")["id"]
    d = Dispatcher(ab.db, ab.settings)
    d.start()
    try:
        wait_for(lambda: board.show(tid)["status"] in ("done", "blocked"), timeout=60, what="the task done")
    finally:
        d.stop()
    t = board.show(tid)
    # the run's other results count: the task is done, its follow-up posted, both drafts made
    assert t["status"] == "done" and any("check the docs" in c["body"] for c in t["comments"])
    drafts = {p["slug"]: p for p in wiki.list_pages(ab.db, "default", status="draft")}
    titles = sorted(p["title"] for p in drafts.values())
    assert titles == ["Deploy checklist", "wiki \\x1b[31m"]  # the title rule of `wiki add`: no control
    for title in titles:
        assert model.visible(title, "title") == title
    hostile = next(s for s, p in drafts.items() if p["title"].startswith("wiki"))

    listed = on_terminal(home, "wiki", "list")
    assert "wiki \\x1b[31m" in listed and ESC not in listed
    shown = on_terminal(home, "wiki", "show", hostile)
    assert ESC not in shown and BEL not in shown
    assert "# wiki \\x1b[31m" in shown and "\\x1b]52;c;ZWNobyBwd25lZA==\\x07 osc52 \\x1b]0;PWNED\\x07\\x1b[2J" in shown
    # the page itself keeps the worker's text exactly (JSON, the dashboard renders it as text)
    exact = json.loads(subprocess.run([sys.executable, "-m", "agentboard", "wiki", "show", hostile, "--json"],
                                      capture_output=True, text=True, env={**os.environ, "AGENTBOARD_HOME": str(home)},
                                      check=True).stdout)
    assert f"{ESC}]52;c;ZWNobyBwd25lZA=={BEL}" in exact["body"]


@pytest.mark.parametrize(("heading", "title"), [
    ("a\u202etxt.exe", "a\\u202etxt.exe"), ("zero\u200bwidth", "zero\\u200bwidth"), ("bell\x07", "bell\\x07"),
    ("c1\x9bcontrol", "c1\\x9bcontrol"),
])
def test_a_proposals_title_holds_nothing_wiki_add_would_refuse(ab: Any, heading: str, title: str) -> None:
    with pytest.raises(InvalidInput):
        wiki.add(ab.db, "default", "by-hand", title=heading, body="x")
    page = wiki.propose(ab.db, "default", f"# {heading}\n\nbody")
    assert page["title"] == title and model.title(page["title"]) == title  # shown escaped, accepted by the rule


def test_a_workers_log_read_on_a_terminal_puts_no_escape_on_it_and_a_pipe_gets_it_exactly(
        ab: Any, home: Path) -> None:
    from agentboard.dispatch.dispatcher import Dispatcher

    printer = "printf 'log line \\033]0;PWNED\\a \\033[2J\\033[31mRED\\n'; agentboard complete --summary printed"
    ab.add_profile("printer", command=printer)
    board = ab.board()
    tid = board.create("print", assignee="printer")["id"]
    d = Dispatcher(ab.db, ab.settings)
    d.start()
    try:
        wait_for(lambda: board.show(tid)["status"] in ("done", "blocked"), timeout=60, what="the task done")
    finally:
        d.stop()
    shown = on_terminal(home, "log", tid)
    assert ESC not in shown and BEL not in shown
    assert "log line \\x1b]0;PWNED\\x07 \\x1b[2J\\x1b[31mRED" in shown
    piped = subprocess.run([sys.executable, "-m", "agentboard", "log", tid], capture_output=True,
                           env={**os.environ, "AGENTBOARD_HOME": str(home)}, check=True).stdout
    assert b"log line \x1b]0;PWNED\x07 \x1b[2J\x1b[31mRED" in piped
