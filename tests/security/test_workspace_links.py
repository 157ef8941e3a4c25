"""A worker owns its workspace and may plant symbolic links in it; the dispatcher writes the
``.board/`` files there (as root, for a ``user``-isolated worker). Links must be replaced, never
followed, so a worker cannot make the dispatcher write or read a file outside the workspace."""

from __future__ import annotations

import os
from pathlib import Path

from agentboard.protocol import boarddir


def _plant(workspace: Path, victim: Path, *names: str) -> None:
    bdir = workspace / ".board"
    bdir.mkdir(parents=True, exist_ok=True)
    for name in names:
        os.symlink(victim, bdir / name)


def test_a_worker_cannot_make_the_dispatcher_overwrite_a_file_through_a_link_in_board_dir(tmp_path: Path) -> None:
    victim = tmp_path / "outside" / "passwd"
    victim.parent.mkdir()
    victim.write_text("root:x:0:0\n")
    ws = tmp_path / "ws"
    _plant(ws, victim, "context.md", ".context.md.tmp", ".task.json.tmp", "task.json")

    boarddir.write_text(ws / ".board" / "context.md", "# the task\n")
    boarddir.write_json(ws / ".board" / "task.json", {"id": "t_00000001"})

    assert victim.read_text() == "root:x:0:0\n"
    assert not (ws / ".board" / "context.md").is_symlink()
    assert (ws / ".board" / "context.md").read_text() == "# the task\n"
    assert not list((ws / ".board").glob(".context.md*.tmp"))  # no temporary file left behind


def test_a_worker_cannot_read_a_file_outside_its_workspace_through_a_history_link(tmp_path: Path) -> None:
    secret = tmp_path / "outside" / "serve-token"
    secret.parent.mkdir()
    secret.write_text("ab_admin_secret\n")
    ws = tmp_path / "ws"
    _plant(ws, secret, "history.md")

    boarddir.append_history(ws, "## Verification failed\n\nexit 1\n")

    text = (ws / ".board" / "history.md").read_text()
    assert "ab_admin_secret" not in text and "Verification failed" in text
    assert secret.read_text() == "ab_admin_secret\n"


def test_a_worker_cannot_make_the_dispatcher_append_to_a_file_through_an_exclude_link(tmp_path: Path) -> None:
    victim = tmp_path / "outside" / "authorized_keys"
    victim.parent.mkdir()
    victim.write_text("ssh-ed25519 AAAA owner\n")
    exclude = tmp_path / "repo" / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True)
    os.symlink(victim, exclude)

    boarddir.add_lines(exclude, [".board/", ".mcp.json"])

    assert victim.read_text() == "ssh-ed25519 AAAA owner\n"
