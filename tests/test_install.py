"""The installs people use, from a clean clone of the repository: the venv line (`python3 -m venv
V && V/bin/pip install .`, the venv's own pip building the clone's wheel first, as `pip install .`
does), `pipx install` of that wheel, and `uv tool install .` of the clone. Each installs the wheel and all its dependencies into an
environment of its own; the installed `agentboard` runs its version and the demo. Slow (a whole
install each), so marked `install`; CI runs them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.install, pytest.mark.timeout(1200)]
#: the two tests that share the venv line's wheel run on one worker; the uv install on another
VENV_LINE = pytest.mark.xdist_group("install-venv-line")


def clean_clone(tmp_path: Path) -> Path:
    """A `git clone` of this repository's committed state: nothing untracked or built comes along."""
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        if os.environ.get("CI") == "true":
            raise AssertionError("the install tests need the git repository and git")
        pytest.skip("not a git checkout")
    dest = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(dest)], check=True, timeout=300)
    assert not (dest / ".venv").exists() and not any(dest.glob("src/*.egg-info"))
    return dest


def base_python() -> str:
    """The interpreter the test virtualenv was made from: a system Python, as a user has."""
    return str(getattr(sys, "_base_executable", None) or sys.executable)


@pytest.fixture(scope="module")
def venv_line(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The venv line on a clean clone: a virtualenv of the system Python whose own pip builds the
    clone into a wheel (in an isolated build environment, what `pip install .` does first) and
    installs it with its dependencies. Returns the virtualenv and the wheel (pipx installs it too)."""
    tmp = tmp_path_factory.mktemp("venv-line")
    clone = clean_clone(tmp)
    venv = tmp / "V"
    subprocess.run([base_python(), "-m", "venv", str(venv)], check=True, timeout=300)
    pip = str(venv / "bin" / "pip")
    r = subprocess.run([pip, "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp / "dist"), "."], cwd=clone,
                       capture_output=True, text=True, timeout=1100)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    (wheel,) = (tmp / "dist").glob("agentboard-*.whl")
    r = subprocess.run([pip, "install", "--quiet", str(wheel)], cwd=clone, capture_output=True, text=True,
                       timeout=1100)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    return venv, wheel


def run_installed(exe: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AGENTBOARD_") and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["HOME"] = str(tmp_path / "person")
    env["TMPDIR"] = str(tmp_path)  # the demo's throwaway home (a new temp folder) lands here, not in /tmp
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True, env=env, timeout=120)
    assert version.returncode == 0, version.stderr
    from agentboard import __version__

    assert version.stdout.strip() == f"agentboard {__version__}"
    demo = subprocess.run([str(exe), "demo", "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert demo.returncode == 0, demo.stderr[-2000:]
    out = json.loads(demo.stdout)
    assert out["ok"] is True
    assert out["tasks"] and all(t["status"] == "done" for t in out["tasks"])


@VENV_LINE
def test_pipx_installs_agentboard_from_a_clean_clone(tmp_path: Path, venv_line: tuple[Path, Path]) -> None:
    _, wheel = venv_line
    env = {**os.environ, "PIPX_HOME": str(tmp_path / "pipx"), "PIPX_BIN_DIR": str(tmp_path / "bin"),
           "PIPX_MAN_DIR": str(tmp_path / "man")}
    r = subprocess.run([sys.executable, "-m", "pipx", "install", "--python", base_python(), str(wheel)],
                       capture_output=True, text=True, env=env, timeout=1100)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    exe = tmp_path / "bin" / "agentboard"
    assert exe.exists()
    run_installed(exe, tmp_path)


@pytest.mark.xdist_group("install-uv")
def test_uv_tool_installs_agentboard_from_a_clean_clone(tmp_path: Path) -> None:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv, "uv is a test dependency (pip install -e '.[test]')"
    clone = clean_clone(tmp_path)
    env = {**os.environ, "UV_TOOL_DIR": str(tmp_path / "uv-tools"), "UV_TOOL_BIN_DIR": str(tmp_path / "bin"),
           "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_PYTHON_DOWNLOADS": "never", "UV_NATIVE_TLS": "1"}
    r = subprocess.run([uv, "tool", "install", "--python", base_python(), str(clone)],
                       capture_output=True, text=True, env=env, timeout=1100)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    exe = tmp_path / "bin" / "agentboard"
    assert exe.exists()
    run_installed(exe, tmp_path)


@VENV_LINE
def test_the_venv_line_installs_agentboard_from_a_clean_clone(tmp_path: Path,
                                                            venv_line: tuple[Path, Path]) -> None:
    venv, _ = venv_line
    run_installed(venv / "bin" / "agentboard", tmp_path)
