"""With the JSON log format, every line a dispatcher prints on stderr is one JSON object, its
start and stop lines included (a log shipper parses each line)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def test_a_dispatchers_start_and_stop_lines_are_json_objects_when_its_log_is_json(cli_home: Path) -> None:
    env = {**os.environ, "AGENTBOARD_HOME": str(cli_home)}
    env.pop("AGENTBOARD_DATABASE_URL", None)
    proc = subprocess.Popen([sys.executable, "-m", "agentboard", "dispatcher", "--log-format", "json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    first = ""
    while time.monotonic() < deadline and "Ctrl-C to stop" not in first:
        first += proc.stderr.readline() if proc.stderr else ""
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=60)
    lines = [ln for ln in (first + (rest or "")).splitlines() if ln.strip()]
    events = [json.loads(ln)["event"] for ln in lines]  # each line parses
    assert any(e.startswith("dispatcher on ") for e in events)
    assert any(e.startswith("dispatcher stopped") for e in events)
