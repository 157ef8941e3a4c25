"""gc --dry-run shows what would go and touches nothing; gc then removes exactly that."""

from __future__ import annotations

import os
import time

from cli.conftest import task_id


def test_gc_dry_run_lists_what_would_go_and_gc_removes_it(cli, cli_home):
    cli("profiles", "add", "w", "--command", "true")
    done = task_id(cli("create", "finished", "--assignee", "w", "--json"))
    live = task_id(cli("create", "still ready", "--assignee", "w", "--json"))
    assert cli("complete", done, "--summary", "ok").code == 0
    root = cli_home / "boards" / "default" / "workspaces"
    for tid in (done, live):
        (root / tid).mkdir(parents=True)
        (root / tid / "notes.md").write_text("work\n")
    logs = cli_home / "boards" / "default" / "logs"
    logs.mkdir(parents=True)
    old_log = logs / f"{done}.log"
    old_log.write_text("old output\n")
    past = time.time() - 40 * 86400
    os.utime(old_log, (past, past))

    r = cli("gc", "--dry-run")
    assert r.code == 0, r.err
    assert r.lines()[0] == ("would remove 1 scratch workspace(s), 0 worktree(s), 0 branch(es), 1 log(s); "
                            "would prune 0 event(s)")
    assert f"would remove {root / done}" in r.out and str(root / live) not in r.out
    assert (root / done).is_dir() and old_log.exists()  # nothing touched

    r = cli("gc", "--json")
    assert r.code == 0 and r.json()["workspaces_removed"] == [str(root / done)] and r.json()["logs_removed"] == 1
    assert not (root / done).exists() and not old_log.exists()
    assert (root / live / "notes.md").read_text() == "work\n"
