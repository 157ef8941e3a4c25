"""A degraded result's summary is what the agent said, not its CLI's raw JSON output: for an agent
CLI (Claude Code's stream-json, …) the adapter's parsed final message."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

from agentboard.protocol import repair

from .conftest import FAKES, wait_for


def test_a_claude_agent_whose_result_never_validates_is_summarized_by_its_final_message(
        ab: Any, board: Any, dispatcher: Any, tmp_path: Path) -> None:
    claude = tmp_path / "claude_badjson"
    claude.write_text(
        "#!/bin/sh\n"
        # every session leaves an invalid result.json (so both repair attempts fail), then runs
        # the stand-in of Claude Code without reporting
        "[ \"$1\" = --version ] || printf '{not json' > .board/result.json\n"
        f"FAKE_CLAUDE_MODE=silent exec {shlex.quote(sys.executable)} {shlex.quote(str(FAKES / 'fake_claude'))} \"$@\"\n")
    claude.chmod(0o755)
    ab.add_profile("cclaude", adapter="claude", command=str(claude))
    t = board.create("forget to report", assignee="cclaude")["id"]
    dispatcher()
    wait_for(lambda: board.show(t)["status"] == "review", timeout=60, what="the degraded result in review")
    run = board.runs(t)[-1]
    # the agent's final message ("Done: wrote notes.md.", read as a labelled line)
    assert run["summary"] == "wrote notes.md."
    assert '"type"' not in run["summary"]
    degraded = wait_for(lambda: [e for e in board.events(0, limit=100000)
                                 if e["task_id"] == t and e["kind"] == "result_degraded"], what="result_degraded")
    assert degraded[0]["payload"]["summary"] == "wrote notes.md."


def test_a_summary_line_in_a_cli_agents_final_message_wins_and_an_earlier_runs_output_is_not_read(
        tmp_path: Path) -> None:
    import json

    log = tmp_path / "t_1.log"
    result = {"type": "result", "subtype": "success", "is_error": False,
              "result": "Looked at it.\n\nSummary: the parser handles numbers now"}
    log.write_text(
        "=== run 1 of t_1 by c (claude) at 2025-01-01T00:00:00Z ===\n"
        + json.dumps({"type": "result", "subtype": "success", "result": "the first run's words"}) + "\n"
        + "=== run 2 of t_1 by c (claude) at 2025-01-01T00:01:00Z ===\n"
        + json.dumps({"type": "system", "subtype": "init"}) + "\n" + json.dumps(result) + "\n"
        + "=== run 2 of t_1: repair attempt 1 ===\n"
        + json.dumps({"type": "system", "subtype": "init"}) + "\n")
    assert repair.extract_summary(log, "{not json") == "the parser handles numbers now"
    # a run of that CLI with no final message: its other output (stderr), never its JSON lines
    log.write_text(log.read_text() + "=== run 3 of t_1 by c (claude) at 2025-01-01T00:02:00Z ===\n"
                   + json.dumps({"type": "system", "subtype": "init"}) + "\nit stopped: out of memory\n")
    assert repair.extract_summary(log, None) == "it stopped: out of memory"
    # a plain command's output is read as before
    log.write_text("=== run 4 of t_1 by s (command) at 2025-01-01T00:03:00Z ===\nworking\n\nall done here\n")
    assert repair.extract_summary(log, None) == "all done here"
