"""Demo agent: read the researchers' hand-offs and write the final briefing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def main() -> int:
    import agentboard

    task_id = os.environ["AGENTBOARD_TASK"]
    board_slug = os.environ.get("AGENTBOARD_BOARD", "default")
    ab = agentboard.connect(os.environ.get("AGENTBOARD_DATABASE_URL") or os.environ["AGENTBOARD_HOME"])
    board = ab.board(board_slug)
    detail = board.show(task_id)
    parents = detail.get("parents") or []
    sections = []
    for parent in parents:
        pid = parent["id"] if isinstance(parent, dict) else parent
        done = [r for r in board.runs(pid) if r.get("outcome") == "completed"]
        meta = (done[-1].get("metadata") if done else None) or {}
        if isinstance(meta, str):
            meta = json.loads(meta)
        topic = str(meta.get("topic") or pid)
        findings = meta.get("findings", [])
        sections.append((topic, findings))
    ab.close()
    out = Path.cwd() / "briefing.md"
    text = ["# Briefing: running a fleet of agents on a task board", ""]
    for topic, findings in sorted(sections):
        text.append(f"## {topic.capitalize()}")
        text += [f"- {f}" for f in findings]
        text.append("")
    text.append(f"_{sum(len(f) for _, f in sections)} findings from {len(sections)} researchers._")
    out.write_text("\n".join(text) + "\n")
    subprocess.run(
        ["agentboard", "complete", "--summary", f"briefing written to {out}",
         "--metadata", json.dumps({"artifact": str(out), "sections": len(sections)}), "--result", str(out)],
        check=True, stdout=subprocess.DEVNULL,
    )
    print(f"writer: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
