"""Demo agent: read the researchers' hand-offs and write the final briefing.

Like every worker it reaches the board only through the worker verbs (the API, with its run
token): ``agentboard show --json`` gives its task with each parent's hand-off.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def main() -> int:
    show = subprocess.run(["agentboard", "show", "--json"], capture_output=True, text=True, check=True)
    detail = json.loads(show.stdout)
    sections = []
    for parent in detail.get("parents") or []:
        meta = (parent.get("handoff") or {}).get("metadata") or {}
        if isinstance(meta, str):
            meta = json.loads(meta)
        topic = str(meta.get("topic") or parent["id"])
        findings = meta.get("findings", [])
        sections.append((topic, findings))
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
