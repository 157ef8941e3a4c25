"""A worker that heartbeats until its answer says stop; it then notes the reason and keeps going
(the dispatcher must end it). Run again after being told once, it completes."""

import json
import subprocess
import sys
import time
from pathlib import Path

marker = Path(sys.argv[1])
if marker.exists():
    subprocess.run(["agentboard", "complete", "--summary", "finished after the budget was cleared"], check=True)
    sys.exit(0)
while True:
    out = subprocess.run(["agentboard", "heartbeat", "--json"], capture_output=True, text=True)
    try:
        answer = json.loads(out.stdout)
    except ValueError:
        answer = {}
    if answer.get("stop"):
        marker.write_text(answer.get("stop_reason") or "stop")
    time.sleep(0.2)
