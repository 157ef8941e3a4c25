"""`agentboard service units`: the systemd units it writes pass `systemd-analyze verify` and say
what an operator relies on (the installed executable, restarts, the sandbox, secrets kept out)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentboard.cli import service

ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(ANALYZE is None and os.environ.get("CI") != "true",
                                   reason="systemd-analyze is not installed")
EXE = Path(sys.executable).parent / "agentboard"


def verify(*units: Path) -> list[str]:
    """The complaints of `systemd-analyze verify` about ``units`` (empty: they are clean)."""
    assert ANALYZE is not None, "systemd-analyze is not installed"
    r = subprocess.run([ANALYZE, "verify", "--man=no", *map(str, units)], capture_output=True, text=True,
                       timeout=60)
    lines = [line for line in (r.stdout + r.stderr).splitlines() if line.strip()]
    if r.returncode != 0:
        lines.append(f"exit status {r.returncode}")
    return lines


def units(home: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    r = subprocess.run([str(EXE), "service", "units", "--json", *args], capture_output=True, text=True,
                       env={**os.environ, "AGENTBOARD_HOME": str(home), **(env or {})}, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def keys(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            k, _, v = line.partition("=")
            out.setdefault(k, []).append(v)
    return out


@needs_analyze
def test_the_units_of_a_home_pass_systemd_analyze_verify_and_run_the_installed_executable(
        cli_home: Path, tmp_path: Path) -> None:
    out = units(cli_home, "--dir", str(tmp_path / "units"), "--isolation", "none")
    written = [Path(p) for p in out["units"]]  # type: ignore[union-attr]
    assert sorted(p.name for p in written) == ["agentboard-dispatcher.service", "agentboard-serve.service"]
    assert verify(*written) == []
    serve = keys((tmp_path / "units" / "agentboard-serve.service").read_text())
    disp = keys((tmp_path / "units" / "agentboard-dispatcher.service").read_text())
    assert serve["ExecStart"] == [f"{EXE} serve --no-dispatch"]
    assert disp["ExecStart"] == [f"{EXE} dispatcher"]
    assert disp["KillMode"] == ["process"] and disp["Delegate"] == ["yes"] and "Delegate" not in serve
    for k in (serve, disp):
        assert f"AGENTBOARD_HOME={cli_home}" in k["Environment"]
        assert k["EnvironmentFile"] == ["-/etc/agentboard/env"]
        assert k["Restart"] == ["on-failure"] and k["RestartSec"]
        assert k["NoNewPrivileges"] == ["yes"] and k["ProtectSystem"] == ["strict"]
        assert str(cli_home) in k["ReadWritePaths"]
        assert k["WantedBy"] == ["multi-user.target"]


@needs_analyze
def test_a_unit_with_a_mistake_fails_the_same_check(tmp_path: Path) -> None:
    p = service.plan(home=Path("/var/lib/agentboard/home"), user_units=False, isolation="none", run_as=None,
                     writable=[], env_file=None, worker_user=None)
    good = tmp_path / "agentboard-serve.service"
    good.write_text(service.render(p, "serve"))
    assert verify(good) == []
    bad = tmp_path / "agentboard-bad.service"
    bad.write_text(good.read_text().replace("ProtectSystem=strict", "ProtectSystem=everything")
                   .replace("RestartSec=", "RestartSecs="))
    complaints = "\n".join(verify(bad))
    assert "ProtectSystem" in complaints or "protect system" in complaints
    assert "RestartSecs" in complaints


def test_the_database_url_stays_out_of_the_units(cli_home: Path, tmp_path: Path) -> None:
    url = "postgresql://agentboard:s3cret-pw@db.internal:5432/agentboard"
    out = units(cli_home, "--dir", str(tmp_path / "u"), "--isolation", "none",
                env={"AGENTBOARD_DATABASE_URL": url})
    for path in out["units"]:  # type: ignore[union-attr]
        text = Path(path).read_text()
        assert "s3cret-pw" not in text and "postgresql://" not in text
        assert "EnvironmentFile=-/etc/agentboard/env" in text
    assert any("AGENTBOARD_DATABASE_URL" in step and "/etc/agentboard/env" in step
               for step in out["next"])  # type: ignore[union-attr]
    assert "s3cret-pw" not in json.dumps(out)


@needs_analyze
def test_user_units_go_to_the_users_systemd_folder_and_start_with_the_session(
        cli_home: Path, tmp_path: Path) -> None:
    fake_home = tmp_path / "person"
    fake_home.mkdir()
    out = units(cli_home, "--user", env={"HOME": str(fake_home)})
    folder = fake_home / ".config" / "systemd" / "user"
    assert sorted(out["units"]) == [str(folder / "agentboard-dispatcher.service"),  # type: ignore[arg-type]
                                    str(folder / "agentboard-serve.service")]
    assert verify(*(folder / n for n in ("agentboard-serve.service", "agentboard-dispatcher.service"))) == []
    k = keys((folder / "agentboard-dispatcher.service").read_text())
    assert k["WantedBy"] == ["default.target"]
    assert "User" not in k
    assert k["EnvironmentFile"] == [f"-{fake_home}/.config/agentboard/env"]


@needs_analyze
def test_the_sandbox_keeps_room_for_each_workers_isolation(tmp_path: Path) -> None:
    home = Path("/home/ops/.agentboard")
    texts = {}
    for mode in service.ISOLATIONS:
        p = service.plan(home=home, user_units=False, isolation=mode, run_as="ops", writable=["/srv/repo"],
                         env_file=None, worker_user=None)
        path = tmp_path / mode / "agentboard-dispatcher.service"
        path.parent.mkdir()
        path.write_text(service.render(p, "dispatcher"))
        assert verify(path) == [], mode
        texts[mode] = keys(path.read_text())
    none, user, sandbox = texts["none"], texts["user"], texts["sandbox"]
    # a home under /home is read-only there except for the home itself
    assert none["ProtectHome"] == ["read-only"] and none["PrivateTmp"] == ["yes"]
    assert {str(home), "/srv/repo"} <= set(none["ReadWritePaths"])
    assert none["User"] == ["ops"] and none["RestrictNamespaces"] == ["yes"]
    # workers of another OS user: the dispatcher runs as root and writes their workspaces
    assert "User" not in user
    assert "-/var/lib/agentboard/workspaces" in user["ReadWritePaths"]
    # bubblewrap makes namespaces and mounts its own /proc
    for key in ("RestrictNamespaces", "ProtectKernelTunables", "ProtectControlGroups"):
        assert key not in sandbox, key
    assert sandbox["ProtectSystem"] == ["strict"]


def test_a_home_kept_under_tmp_gets_no_private_tmp() -> None:
    p = service.plan(home=Path("/tmp/board-home"), user_units=False, isolation="none", run_as=None,
                     writable=[], env_file=None, worker_user=None)
    assert "PrivateTmp" not in keys(service.render(p, "serve"))


def test_the_isolation_is_read_from_the_profiles_when_not_given(cli_home: Path, tmp_path: Path) -> None:
    env = {**os.environ, "AGENTBOARD_HOME": str(cli_home)}
    r = subprocess.run([str(EXE), "profiles", "add", "boxed", "--command", "true", "--isolation", "sandbox"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    out = units(cli_home, "--dir", str(tmp_path / "u"))
    assert out["isolation"] == "sandbox"
    text = (tmp_path / "u" / "agentboard-dispatcher.service").read_text()
    assert "RestrictNamespaces" not in text


def test_a_relative_writable_path_is_refused_with_a_one_line_message(cli_home: Path, tmp_path: Path) -> None:
    r = subprocess.run([str(EXE), "service", "units", "--dir", str(tmp_path / "u"), "--writable", "repo"],
                       capture_output=True, text=True, env={**os.environ, "AGENTBOARD_HOME": str(cli_home)},
                       timeout=60)
    assert r.returncode != 0
    assert r.stderr.strip().startswith("error: ") and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "u").exists()


def test_run_as_a_module_the_units_name_the_install_of_that_python(cli_home: Path, tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "agentboard", "service", "units", "--dir", str(tmp_path / "u"),
                        "--isolation", "none", "--json"], capture_output=True, text=True,
                       env={**os.environ, "AGENTBOARD_HOME": str(cli_home), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["executable"] == [str(EXE)]
    assert f"ExecStart={EXE} dispatcher" in (tmp_path / "u" / "agentboard-dispatcher.service").read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="runs `service units` as root, as `sudo` does")
def test_service_units_run_with_sudo_leave_no_root_owned_home_behind_and_say_how_to_make_it_for_the_user(
        tmp_path: Path) -> None:
    home = tmp_path / "svc" / "home"
    out = units(home, "--dir", str(tmp_path / "units"), "--run-as", "nobody")
    assert not (tmp_path / "svc").exists()  # no home, no SQLite database the User= service cannot open
    notes = out["notes"]
    assert any("does not exist yet" in n and "install -d -m 700 -o nobody" in n and str(home) in n
               for n in notes), notes  # type: ignore[union-attr]
    home.mkdir(parents=True)  # made by root, as the units' run was
    out = units(home, "--dir", str(tmp_path / "units"), "--run-as", "nobody")
    assert any("belongs to root" in n and f"chown -R nobody: {home}" in n for n in out["notes"]), out  # type: ignore[union-attr]
    assert list(home.iterdir()) == []  # nothing made in it either
    os.chown(home, pwd.getpwnam("nobody").pw_uid, pwd.getpwnam("nobody").pw_gid)
    out = units(home, "--dir", str(tmp_path / "units"), "--run-as", "nobody")
    assert not any(str(home) in n for n in out["notes"])  # type: ignore[union-attr]
