"""What an agent CLI adapter adds to each spawn: its preparation against starting the CLI.

For each adapter (``claude``, ``codex``, ``gemini``, ``opencode``) whose real CLI is installed in
``.cache/agentclis`` (``scripts/test`` installs them; a missing one is reported as skipped):

- ``direct_ms``: the median wall time of starting the same executable directly
  (``EXE --version``, a fresh process; the cheapest start the CLI has) — the baseline;
- ``prepare_ms``: the median of ``adapters.build`` in a fresh workspace holding the board's
  ``.mcp.json``: the version probe (cached per path + modification time), the argv for that
  version and permission, the MCP config written (``.gemini/settings.json``, ``.board/opencode.json``);
- ``first_prepare_ms``: the first ``build`` of a process, with the version read (from the CLI's
  npm ``package.json``, else ``EXE --version``);
- ``ratio``: ``(direct + prepare) / direct``, the start-up a spawn pays over the bare CLI.

Target: ``ratio`` ≤ 1.05 for every adapter (the preparation is noise next to the CLI's start).

    python bench/adapters.py [--repeats 7] [--builds 50]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentboard.dispatch import adapters

CLIS = Path(__file__).resolve().parents[1] / ".cache" / "agentclis" / "node_modules" / ".bin"
TARGET = 1.05


def workspace(root: Path, i: int) -> tuple[Path, Path]:
    ws = root / f"ws{i}"
    (ws / ".board").mkdir(parents=True)
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": {"agentboard": {
        "command": sys.executable, "args": ["-m", "agentboard", "mcp"],
        "env": {"AGENTBOARD_TASK": "t_00000000", "AGENTBOARD_RUN": "1", "AGENTBOARD_TOKEN": "x" * 40}}}}))
    prompt = ws / ".board" / "prompt.md"
    prompt.write_text("Do the task described in .board/task.json.\n" * 20)
    return ws, prompt


def measure(adapter: str, exe: str, repeats: int, builds: int) -> dict[str, object]:
    profile = {"name": adapter, "adapter": adapter, "command": exe, "permission": "edit",
               "model": "anthropic/claude-sonnet-4-5" if adapter == "opencode" else None}
    with tempfile.TemporaryDirectory(prefix="ab-bench-adapters-") as tmp:
        root = Path(tmp)
        adapters.forget_versions()
        ws, prompt = workspace(root, 0)
        start = time.perf_counter()
        adapters.build(profile, task_id="t_00000000", run_id=1, workspace=ws, prompt_file=prompt, board="b",
                       worker_uid=1000)
        first = (time.perf_counter() - start) * 1000
        prep = []
        for i in range(1, builds + 1):
            ws, prompt = workspace(root, i)
            start = time.perf_counter()
            adapters.build(profile, task_id="t_00000000", run_id=i, workspace=ws, prompt_file=prompt, board="b",
                           worker_uid=1000)
            prep.append((time.perf_counter() - start) * 1000)
        direct = []
        env = {**os.environ, "DISABLE_AUTOUPDATER": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"}
        for _ in range(repeats):
            start = time.perf_counter()
            subprocess.run([exe, "--version"], capture_output=True, stdin=subprocess.DEVNULL, env=env, check=False)
            direct.append((time.perf_counter() - start) * 1000)
    d, p = statistics.median(direct), statistics.median(prep)
    ratio = (d + p) / d
    return {"adapter": adapter, "direct_ms": round(d, 2), "prepare_ms": round(p, 3),
            "prepare_p90_ms": round(sorted(prep)[int(len(prep) * 0.9) - 1], 3), "first_prepare_ms": round(first, 2),
            "ratio": round(ratio, 4), "meets_target": ratio <= TARGET}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7, help="direct starts of each CLI")
    ap.add_argument("--builds", type=int, default=50, help="preparations of each adapter")
    args = ap.parse_args(argv)
    load_start = [round(x, 2) for x in os.getloadavg()]
    results: list[dict[str, object]] = []
    for adapter in adapters.CLI_ADAPTERS:
        exe = CLIS / adapter
        if not exe.exists():
            results.append({"adapter": adapter, "skipped": f"{exe} is not installed (scripts/test installs it)"})
            continue
        results.append(measure(adapter, str(exe), args.repeats, args.builds))
    for r in results:
        if "skipped" in r:
            print(f"{r['adapter']:<9} skipped: {r['skipped']}", file=sys.stderr)
            continue
        print(f"{r['adapter']:<9} direct start {r['direct_ms']:>8.1f} ms   preparation {r['prepare_ms']:>7.3f} ms "
              f"(p90 {r['prepare_p90_ms']:.3f}, first {r['first_prepare_ms']:.1f})   ratio {r['ratio']:.4f} "
              f"{'OK' if r['meets_target'] else 'MISSES TARGET'}", file=sys.stderr)
    print(f"load average (1/5/15 min): {load_start} at the start, {[round(x, 2) for x in os.getloadavg()]} at the "
          "end", file=sys.stderr)
    print(json.dumps({"benchmark": "adapters", "target_ratio": TARGET, "results": results}))
    return 0 if all(r.get("meets_target", True) for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
