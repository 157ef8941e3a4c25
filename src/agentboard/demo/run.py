"""``agentboard demo``: a throwaway home, three script agents, a fan-out/fan-in graph, a real run."""

from __future__ import annotations

import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import HERE

#: what makes a folder an agentboard home
_HOME_MARKS = ("agentboard.db", "config.toml", "boards", "api.json", "serve-token")


def _check_new(home: Path) -> None:
    """``InvalidInput`` unless ``home`` is a new or empty folder: the demo adds its profiles
    (shared by every board of a home) and its tasks, and starts a dispatcher, so it never runs
    in a real home, nor writes among someone's files."""
    from ..domain.errors import InvalidInput

    if not home.exists():
        return
    if not home.is_dir():
        raise InvalidInput(f"{home} is a file; give a new folder with --home, or leave out --home")
    try:
        names = {p.name for p in home.iterdir()}
    except OSError as exc:
        raise InvalidInput(f"cannot read {home}: {exc.strerror or exc}; give a new folder with --home") from None
    if names & set(_HOME_MARKS):
        raise InvalidInput(f"{home} already holds an agentboard home; give a new folder with --home, or leave out "
                           "--home (a new temp folder)")
    if names:
        raise InvalidInput(f"{home} is not empty; give a new or empty folder with --home, or leave out --home")


def run_demo(home_dir: str | None = None, *, timeout: float = 120.0,
             echo: Callable[[str], None] | None = None) -> dict[str, Any]:
    from .. import config
    from ..api.serve import WorkerAPI, run_tokens
    from ..client import Client, open_home
    from ..dispatch.dispatcher import Dispatcher
    from ..dispatch.workspaces import scratch_path

    say = echo or (lambda _s: None)
    if home_dir:
        _check_new(Path(home_dir).expanduser().absolute())
    home = Path(home_dir).expanduser().absolute() if home_dir else Path(tempfile.mkdtemp(prefix="agentboard-demo-"))
    settings = config.load(home)
    settings.database_url = None  # the demo is always a throwaway SQLite home
    settings.home = home
    settings.dispatch_interval = 5.0
    db = open_home(settings)
    ab = Client(settings, db)
    py = shlex.quote(sys.executable)
    ab.add_profile("researcher-a", command=f"{py} {shlex.quote(str(HERE / 'researcher.py'))}",
                   description="researches a topic and writes notes")
    ab.add_profile("researcher-b", command=f"{py} {shlex.quote(str(HERE / 'researcher.py'))}",
                   description="researches a topic and writes notes")
    ab.add_profile("writer", command=f"{py} {shlex.quote(str(HERE / 'writer.py'))}",
                   description="turns research notes into a briefing")
    board = ab.board()
    out_dir = home / "output"  # the briefing is copied here from the writer's workspace
    out_dir.mkdir(parents=True, exist_ok=True)
    t1 = board.create("Research: how task boards keep work visible and durable", assignee="researcher-a")
    t2 = board.create("Research: failure modes of agent fleets", assignee="researcher-b")
    t3 = board.create("Write the briefing", assignee="writer", parents=[t1["id"], t2["id"]],
                      body="Combine the researchers' findings into briefing.md.")
    ids = [t1["id"], t2["id"], t3["id"]]
    say(f"demo home: {home}")
    say(f"board 'default': 2 researchers fan out, 1 writer fans in ({', '.join(ids)})")
    api = WorkerAPI(settings, db).start()  # the agents report through it with their run tokens
    d = Dispatcher(db, settings, api_url=api.url, token_factory=run_tokens(db))
    started = time.monotonic()
    d.start()
    ok = False
    try:
        deadline = started + timeout
        while time.monotonic() < deadline:
            statuses = {t["id"]: t["status"] for t in board.list()}
            if all(statuses.get(i) == "done" for i in ids):
                ok = True
                break
            if any(statuses.get(i) == "blocked" for i in ids):
                break
            db.wait_for_commit(db.commit_seq, 0.05)
    finally:
        d.stop()
        api.stop()
    elapsed = time.monotonic() - started
    tasks = board.list()
    history = []
    for tid in ids:
        for r in board.runs(tid):
            history.append({"task": tid, "run": r["id"], "profile": r.get("profile"), "outcome": r.get("outcome"),
                            "seconds": round((r.get("ended_at") or time.time()) - r["started_at"], 2),
                            "summary": r.get("summary") or r.get("error")})
    artifact = out_dir / "briefing.md"
    written = scratch_path(home, "default", t3["id"]) / "briefing.md"
    if ok and written.exists():
        shutil.copyfile(written, artifact)
    say("")
    say("board:")
    for t in tasks:
        say(f"  {t['id']}  {t['status']:<8} {t.get('assignee') or '-':<13} {t['title']}")
    say("")
    say("run history:")
    for h in history:
        say(f"  {h['task']}  run {h['run']:<3} {h['profile'] or '-':<13} {h['outcome'] or 'open':<10} "
            f"{h['seconds']:>6.2f}s  {h['summary'] or ''}")
    say("")
    if ok and artifact.exists():
        say(f"final artifact: {artifact}")
        say(f"done in {elapsed:.1f}s; explore with AGENTBOARD_HOME={home} agentboard list")
    else:
        say(f"the demo did not finish in {timeout:.0f}s; see AGENTBOARD_HOME={home} agentboard show <id> "
            "and agentboard log <id>")
    ab.close()
    return {"ok": ok and artifact.exists(), "home": str(home), "tasks": tasks, "runs": history,
            "artifact": str(artifact), "seconds": round(elapsed, 2)}
