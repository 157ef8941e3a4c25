"""`boards checks|paths`: what an admin configures on a board for members to pick by name, and
`create --check NAME` / `--workspace path:NAME` that pick them."""

from __future__ import annotations

from pathlib import Path

from .conftest import assert_one_line_error, task_id


def test_a_named_check_is_added_listed_picked_and_removed(cli) -> None:
    r = cli("boards", "checks", "add", "unit", "pytest -q")
    assert r.code == 0 and "unit" in r.out
    assert cli("boards", "checks", "list", "--json").json() == {"unit": "pytest -q"}
    assert "pytest -q" in cli("boards", "checks", "list").out

    t = task_id(cli("create", "x", "--check", "unit", "--verify", "true", "--json"))

    assert cli("show", t, "--json").json()["verify"] == ["true", "check:unit"]
    assert cli("boards", "checks", "rm", "unit").code == 0
    assert cli("boards", "checks", "list", "--json").json() == {}


def test_create_refuses_a_check_the_board_does_not_have(cli, counts) -> None:
    cli("boards", "checks", "add", "unit", "pytest -q")
    before = counts()

    r = cli("create", "x", "--check", "lint")

    assert_one_line_error(r, 2, "no named check 'lint'", "unit")
    assert counts() == before


def test_a_named_path_is_added_and_picked_as_a_workspace(cli, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    assert cli("boards", "paths", "add", "shared", str(shared)).code == 0
    assert cli("boards", "paths", "add", "repo", str(tmp_path / "repo"), "--worktree").code == 0
    assert cli("boards", "paths", "list", "--json").json() == {
        "shared": f"dir:{shared}", "repo": f"worktree:{tmp_path / 'repo'}"}

    t = cli("create", "x", "--workspace", "path:shared", "--json").json()

    assert (t["workspace_kind"], t["workspace_path"]) == ("dir", str(shared))
    assert_one_line_error(cli("create", "x", "--workspace", "path:nope"), 2, "no named path 'nope'")


def test_sensitive_locations_are_refused_as_named_paths_and_workspaces(cli, cli_home: Path) -> None:
    ssh = Path.home() / ".ssh"
    assert_one_line_error(cli("boards", "paths", "add", "keys", str(ssh)), 2, ".ssh")
    assert_one_line_error(cli("boards", "paths", "add", "home", str(cli_home)), 2, "agentboard home")
    assert_one_line_error(cli("create", "x", "--workspace", f"dir:{ssh}"), 2, "credentials")
    assert_one_line_error(cli("create", "x", "--workspace", f"dir:{cli_home}"), 2, "agentboard home")
    assert cli("boards", "paths", "list", "--json").json() == {}
