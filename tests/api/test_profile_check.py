"""POST /api/profiles/{name}/check: the `profiles check` report over REST (administrators only)."""

from __future__ import annotations

from testenv import real_cli

from .conftest import start_api


def by_name(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


def test_the_api_gives_an_administrator_the_same_check_and_refuses_others(ab, tmp_path):
    exe = real_cli("opencode")
    ab.add_profile("oc", adapter="opencode", command=exe, model_name="anthropic/claude-sonnet-4-5",
                   env={"HOME": str(tmp_path), "ANTHROPIC_API_KEY": "x"})
    with start_api(ab) as a:
        r = a.as_admin.post("/api/profiles/oc/check", params={"run": "false"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["ok"] and body["profile"] == "oc"
        assert "flags accepted" not in by_name(body)
        assert "--model anthropic/claude-sonnet-4-5" in by_name(body)["command line"]["detail"]
        member = a.client(a.token("someone"))
        assert member.post("/api/profiles/oc/check").status_code == 403
        assert a.as_admin.post("/api/profiles/nobody/check").status_code == 404


def test_a_profile_whose_script_is_a_relative_path_is_warned_about_by_the_api_as_by_the_cli(ab):
    """``python3 research.py {task_id}`` resolves in each task's workspace: every surface that
    adds or changes a profile says so (the kernel's warning), and stores it all the same."""
    with start_api(ab) as api:
        r = api.as_admin.post("/api/profiles", json={"name": "researcher",
                                                     "command": "python3 research.py {task_id}"})
        assert r.status_code == 201, r.text
        (warning,) = r.json()["warnings"]
        assert "script 'research.py' (run by python3) is a relative path" in warning
        assert "agentboard profiles set researcher --command 'python3 /path/to/research.py {task_id}'" in warning
        fixed = api.as_admin.patch("/api/profiles/researcher", json={"command": "python3 /srv/research.py {task_id}"})
        assert fixed.status_code == 200 and not any("relative" in w for w in fixed.json()["warnings"]), fixed.text
