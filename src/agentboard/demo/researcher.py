"""Demo agent: research a topic (deterministically) and hand the notes on.

Runs inside a worker: AGENTBOARD_TASK / AGENTBOARD_RUN_ID are set; reports with the worker verbs.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from agentboard.domain.worker_env import WorkerEnv

FACTS = {
    "boards": [
        "Kanban boards make work visible: one card per task, one column per state.",
        "A dependency graph lets a task start only when its parents are done.",
        "Durable boards survive restarts: the state lives in a database, not in memory.",
    ],
    "fleets": [
        "Agents that finish without reporting leave tasks running forever unless someone watches the process.",
        "Unbounded retries turn one broken task into an endless loop; a circuit breaker bounds them.",
        "A dispatcher that polls once a minute wastes most of a short task's life waiting.",
    ],
}


def main() -> int:
    task = str(WorkerEnv.from_environ().task)
    show = subprocess.run(["agentboard", "show", "--json"], capture_output=True, text=True, check=True)
    data = json.loads(show.stdout)
    title = (data.get("task") or data).get("title", "")
    topic = "fleets" if "fleet" in title.lower() or "failure" in title.lower() else "boards"
    subprocess.run(["agentboard", "heartbeat", "--note", f"researching {topic}"], check=True,
                   stdout=subprocess.DEVNULL)
    notes = Path.cwd() / f"notes-{topic}.md"
    lines = [f"# Notes: {title}", ""] + [f"- {fact}" for fact in FACTS[topic]]
    notes.write_text("\n".join(lines) + "\n")
    digest = hashlib.sha256(notes.read_bytes()).hexdigest()[:12]
    subprocess.run(
        ["agentboard", "complete", "--summary", f"{len(FACTS[topic])} findings on {topic} in {notes.name}",
         "--metadata", json.dumps({"notes_file": str(notes), "topic": topic, "findings": FACTS[topic],
                                   "sha256": digest}),
         "--result", f"notes on {topic}"],
        check=True, stdout=subprocess.DEVNULL,
    )
    print(f"researcher: wrote {notes} for {task}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
