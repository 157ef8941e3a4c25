#!/usr/bin/env python3
"""A fake agent CLI for protocol tests: a real process that reads its prompt file and reports
through `.board/result.json` or the worker verbs, as told by FAKE_AGENT_MODE.

Usage: fake_agent.py PROMPT_FILE
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

mode = os.environ.get("FAKE_AGENT_MODE", "ok")
prompt = Path(sys.argv[1]).read_text() if len(sys.argv) > 1 else ""
repairing = "Repair your result" in prompt
board = Path(".board")


def write(data: object) -> None:
    text = data if isinstance(data, str) else json.dumps(data)
    (board / "result.json").write_text(text)


print(f"fake agent: mode={mode} repairing={repairing}")
if mode == "ok":
    Path("out.txt").write_text("work\n")
    write({"success": True, "summary": "did the work", "filesChanged": ["out.txt"]})
elif mode == "malformed_then_fix":
    if repairing:
        write({"schema_version": 1, "success": True, "summary": "did the work (result repaired)"})
    else:
        write('{"success": "yes", "summary": "", "extra": 1}')
elif mode == "never_fix":
    write("{not json")
    print("I changed the parser and all tests pass.")
    print()
    print("Rewrote the tokenizer so numbers parse; tests are green.")
elif mode == "no_evidence":
    # claims success without producing what --verify checks, unless told to do it properly
    if os.environ.get("FAKE_AGENT_PRODUCE"):
        Path("out.txt").write_text("made it\n")
    write({"success": True, "summary": "produced out.txt"})
elif mode == "needs_input":
    write({"success": False, "summary": "Which database should I migrate: staging or prod?"})
elif mode == "extras":
    write({"success": True, "summary": "documented the deploy",
           "followUpSuggestions": ["add rate limiting"],
           "wikiProposals": [{"contentMd": "# Deploy checklist\n\nRun the smoke test first.", "note": "learned"}]})
elif mode == "cli_complete":
    if os.environ.get("FAKE_AGENT_PRODUCE"):
        Path("out.txt").write_text("made it\n")
    subprocess.run([sys.executable, "-m", "agentboard", "complete", "--summary", "reported through the CLI"],
                   check=True)
elif mode == "mcp_request_review":  # hands its task to review through its MCP tools
    import asyncio

    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    if os.environ.get("FAKE_AGENT_PRODUCE"):
        Path("out.txt").write_text("made it\n")

    async def _review() -> None:
        server = StdioServerParameters(command=sys.executable, args=["-m", "agentboard", "mcp"], env=dict(os.environ))
        async with stdio_client(server) as (read, send), ClientSession(read, send) as session:
            await session.initialize()
            out = await session.call_tool("kanban_request_review", {"summary": "ready for a look"})
            print("request_review:", out.content[0].text if out.content else out)

    asyncio.run(_review())
elif mode == "silent":
    pass
elif mode == "review_context":
    ctx = (board / "context.md").read_text()
    hist = (board / "history.md").read_text()
    Path("seen-context.md").write_text(ctx + "\n----\n" + hist)
    write({"success": True, "summary": "addressed the feedback" if "Changes requested" in hist else "first try"})
else:
    print(f"unknown mode {mode}", file=sys.stderr)
    sys.exit(2)
