"""A race of real agent CLIs: the comment comparing its attempts, posted when it goes to review,
gives what each attempt's CLI spent (not 0 tokens, though each reported before it exited), and a
cost the CLI never reported (Gemini CLI reports none) as unknown, not $0.0000."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .conftest import Board, Model, wait_for


def _work(name: str) -> list[dict[str, object]]:
    """Report, then take a few seconds before the turn ends: the race settles meanwhile."""
    return [{"calls": [{"mcp": "kanban_complete", "args": {"summary": f"{name} attempt"}}]},
            {"calls": [{"shell": "sleep 4"}]}, {"text": "Done."}]


def test_the_race_comment_gives_each_attempts_spend_and_an_unreported_cost_as_unknown(
        board: Board, model: Model, tmp_path: Path) -> None:
    other = Model(tmp_path / "model2")
    try:
        model.script(*_work("claude"), usage={"input_tokens": 1000, "output_tokens": 10})
        other.script(*_work("gemini"), usage={"input_tokens": 800, "output_tokens": 20})
        board.setup("boards", "create", "plain")  # no target: each attempt's report closes its run at once
        board.claude(model, "cc")
        board.gemini(other, "gm")
        tid = str(board.json("create", "race it", "--board", "plain", "--race", "cc,gm")["id"])

        board.start("dispatcher", "--interval", "1")
        wait_for(lambda: board.task(tid)["status"] in ("review", "blocked"), timeout=180, what="the race to finish")

        race = json.loads(board.setup("attempts", tid, "--json"))
        by_n = {a["n"]: a for a in race["attempts"]}
        assert all(a["outcome"] == "done" and a["tokens"] > 0 for a in by_n.values()), by_n
        [comment] = [c["body"] for c in board.task(tid)["comments"] if c["body"].startswith("Race finished")]
        claude = re.search(r"#1 cc\*\*: done; (\d+) tokens, (\S+)", comment)
        gemini = re.search(r"#2 gm\*\*: done; (\d+) tokens, (cost unknown|\S+)", comment)
        assert claude and gemini, comment
        assert int(claude.group(1)) == by_n[1]["tokens"] and claude.group(2) == f"${by_n[1]['cost_usd']:.4f}"
        assert int(gemini.group(1)) == by_n[2]["tokens"] and gemini.group(2) == "cost unknown", comment
        assert by_n[1]["cost_known"] and not by_n[2]["cost_known"]
        # the table says the same: Gemini's cost is unknown (-), not $0
        rows = {line.split()[0]: line.split() for line in board.setup("attempts", tid).splitlines()[1:]
                if line.split() and line.split()[0].isdigit()}
        assert f"${by_n[1]['cost_usd']:.4f}" in rows["1"] and "$0.0000" not in rows["2"], rows
    finally:
        other.stop()
