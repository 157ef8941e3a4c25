"""The workspace file operations of ``protocol.safefs``, with ``openat2`` and with the
per-component walk that stands in for it on kernels without it."""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentboard.dispatch import workspaces
from agentboard.protocol import boarddir, safefs


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "walk":
        monkeypatch.setattr(safefs, "_openat2_ok", False)
    else:
        fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
        try:
            opened = safefs._openat2(fd, "tmp", os.O_RDONLY | os.O_DIRECTORY)
            if opened is None:
                pytest.skip("this kernel has no openat2")
            os.close(opened)
        finally:
            os.close(fd)
    yield request.param


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    (v / "sub").mkdir(parents=True)
    (v / "keep.txt").write_text("keep\n")
    (v / "sub" / "deep.txt").write_text("deep\n")
    return v


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_folder_reached_through_a_link_anywhere_on_the_way_is_refused(resolver: str, tmp_path: Path,
                                                                        victim: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".board").mkdir(parents=True)
    os.symlink(victim, ws / ".board" / "inbox")
    with safefs.open_root(ws) as root:
        with pytest.raises(safefs.NotAFolder):
            root.sub(".board/inbox/sub")
        with pytest.raises(safefs.NotAFolder):
            root.sub(".board/inbox")
        with pytest.raises(FileNotFoundError):
            root.sub(".board/nothing")
        with pytest.raises(safefs.Unsafe):
            root.sub("../victim")
        with pytest.raises(safefs.NotAFolder):  # never read through
            safefs.read_file(ws / ".board" / "inbox" / "keep.txt")
    assert safefs.has_openat2() is (resolver == "openat2")


def test_writing_beneath_a_planted_folder_link_replaces_the_link_and_leaves_its_target_alone(
        resolver: str, tmp_path: Path, victim: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    os.symlink(victim, ws / ".board")
    before = _listing(victim)
    boarddir.write_text(ws / ".board" / "wiki" / "INDEX.md", "# index\n")
    assert not (ws / ".board").is_symlink()
    assert (ws / ".board" / "wiki" / "INDEX.md").read_text() == "# index\n"
    assert _listing(victim) == before


def test_a_file_in_a_folder_just_made_is_written_in_place_but_never_through_a_link_planted_there(
        resolver: str, tmp_path: Path, victim: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with safefs.open_board(ws) as bdir:
        assert bdir.fresh  # made by this call
        bdir.write_text("context.md", "new\n")
        os.symlink(victim / "keep.txt", ws / ".board" / "task.json")  # a link planted in between
        bdir.write_text("task.json", "{}\n")
    assert (victim / "keep.txt").read_text() == "keep\n"
    assert not (ws / ".board" / "task.json").is_symlink()
    assert (ws / ".board" / "task.json").read_text() == "{}\n"
    assert (ws / ".board" / "context.md").read_text() == "new\n"
    assert sorted(os.listdir(ws / ".board")) == ["context.md", "task.json"]  # no temporary file left
    with safefs.open_board(ws) as again:
        assert not again.fresh  # there already: written as a new file renamed over the name


def test_removing_a_tree_unlinks_its_links_and_never_deletes_what_they_point_at(
        resolver: str, tmp_path: Path, victim: Path) -> None:
    ws = tmp_path / "ws"
    wiki = ws / ".board" / "wiki"
    (wiki / "nested").mkdir(parents=True)
    os.symlink(victim, wiki / "nested" / "escape")
    os.symlink(victim / "keep.txt", wiki / "file-link.md")
    os.link(victim / "keep.txt", wiki / "hard.md")
    before = _listing(victim)
    with safefs.open_board(ws) as bdir:
        assert bdir.remove("wiki") is True
        assert bdir.remove("wiki") is False
    assert not wiki.exists()
    assert _listing(victim) == before and (victim / "keep.txt").read_text() == "keep\n"
    # the same when wiki/ itself is the link
    os.symlink(victim, wiki)
    boarddir.write_wiki(ws, [])
    assert _listing(victim) == before and not wiki.is_symlink()


def test_a_link_a_hard_link_a_fifo_and_an_oversized_file_are_not_read(tmp_path: Path, victim: Path) -> None:
    ws = tmp_path / "ws"
    bdir = ws / ".board"
    bdir.mkdir(parents=True)
    os.symlink(victim / "keep.txt", bdir / "link.json")
    os.link(victim / "keep.txt", bdir / "hard.json")
    os.mkfifo(bdir / "fifo.json")
    (bdir / "big.json").write_bytes(b"x" * 2048)
    (bdir / "fine.json").write_text("{}")
    for name, why in (("link.json", "symbolic link"), ("hard.json", "hard-linked"), ("fifo.json", "not a regular"),
                      ("big.json", "over the 1024-byte limit")):
        with pytest.raises(safefs.Unsafe, match=why):
            safefs.read_file(bdir / name, limit=1024)
    assert safefs.read_file(bdir / "fine.json") == b"{}"
    assert safefs.read_file(bdir / "missing.json") is None


def test_writing_over_a_hard_link_replaces_the_name_and_leaves_the_other_file_unchanged(
        tmp_path: Path, victim: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".board").mkdir(parents=True)
    os.link(victim / "keep.txt", ws / ".board" / "history.md")
    boarddir.append_history(ws, "## Verification failed\n")
    assert (victim / "keep.txt").read_text() == "keep\n"
    text = (ws / ".board" / "history.md").read_text()
    assert "Verification failed" in text and "keep" not in text
    assert (ws / ".board" / "history.md").stat().st_nlink == 1


def test_a_linked_mcp_json_is_replaced_and_its_target_never_merged(tmp_path: Path) -> None:
    secret = tmp_path / "root-only.json"
    secret.write_text('{"mcpServers": {"stolen": {"command": "SECRET"}}}')
    for how in (os.symlink, os.link):
        ws = tmp_path / f"ws-{how.__name__}"
        ws.mkdir()
        how(secret, ws / ".mcp.json")
        boarddir.write_mcp_json(ws, {"AGENTBOARD_TASK": "t_00000001"})
        text = (ws / ".mcp.json").read_text()
        assert "SECRET" not in text and "agentboard" in text
        assert not (ws / ".mcp.json").is_symlink()
    assert secret.read_text() == '{"mcpServers": {"stolen": {"command": "SECRET"}}}'
    # a worker's own regular .mcp.json is still merged
    own = tmp_path / "ws-own"
    own.mkdir()
    (own / ".mcp.json").write_text('{"mcpServers": {"mine": {"command": "my-server"}}}')
    boarddir.write_mcp_json(own, {})
    assert "my-server" in (own / ".mcp.json").read_text()


def test_archiving_into_a_planted_archive_link_moves_nothing_outside(tmp_path: Path, victim: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".board").mkdir(parents=True)
    os.symlink(victim, ws / ".board" / "archive")
    (ws / ".board" / "result.json").write_text("{}")
    before = _listing(victim)
    moved = boarddir.archive_outputs(ws)
    assert len(moved) == 1 and moved[0].parent == ws / ".board" / "archive"
    assert (ws / ".board" / "archive").is_dir() and not (ws / ".board" / "archive").is_symlink()
    assert _listing(victim) == before


def test_the_git_exclude_file_is_never_written_through_a_linked_info_folder(tmp_path: Path, victim: Path) -> None:
    git = tmp_path / "repo" / ".git"
    git.mkdir(parents=True)
    os.symlink(victim, git / "info")
    before = _listing(victim)
    boarddir.add_lines(git / "info" / "exclude", [".board/"])
    assert _listing(victim) == before
    assert (git / "info" / "exclude").read_text() == ".board/\n"
    # a missing git folder is not made
    boarddir.add_lines(tmp_path / "nowhere" / ".git" / "info" / "exclude", [".board/"])
    assert not (tmp_path / "nowhere").exists()


def test_handing_board_files_to_the_worker_user_never_changes_the_owner_of_a_link_target(
        tmp_path: Path, victim: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("changing owners needs root")
    nobody = pwd.getpwnam("nobody")
    ws = tmp_path / "ws"
    (ws / ".board" / "wiki").mkdir(parents=True)
    (ws / ".board" / "context.md").write_text("ctx")
    os.symlink(victim, ws / ".board" / "wiki" / "escape")
    os.link(victim / "keep.txt", ws / ".board" / "hard.md")
    os.symlink(victim / "sub" / "deep.txt", ws / ".mcp.json")
    workspaces.hand_over(workspaces.Workspace("dir", ws), nobody.pw_uid, nobody.pw_gid)
    assert (ws / ".board" / "context.md").stat().st_uid == nobody.pw_uid
    assert (ws / ".board" / "wiki").stat().st_uid == nobody.pw_uid
    for p in (victim, victim / "keep.txt", victim / "sub", victim / "sub" / "deep.txt"):
        assert p.stat().st_uid == 0, p
