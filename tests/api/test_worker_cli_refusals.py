"""What a worker's CLI says when the board refuses it: a run's limit exits 4 (HTTP 429, as the
settings say, so a script tells it apart from a crash), and a create outside its task says to
propose the work with ``--triage``."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from typing import Any

from agentboard import remote
from agentboard.domain import errors
from agentboard.kernel import profiles, runs, tokens
from api.conftest import Api


def _worker_cli(api: Api, tid: str, run_id: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "AGENTBOARD_API_URL": api.url,
           "AGENTBOARD_TOKEN": tokens.create_run_token(api.db, "default", tid, run_id),
           "AGENTBOARD_TASK": tid, "AGENTBOARD_RUN_ID": str(run_id), "AGENTBOARD_BOARD": "default"}
    return subprocess.run([sys.executable, "-m", "agentboard", *args], env=env, capture_output=True, text=True,
                          timeout=60)


def _worker(api: Api) -> tuple[str, int]:
    profiles.add(api.db, "worker", command="true")
    tid = api.ab.board().create("the work", assignee="worker")["id"]
    return tid, int(runs.claim(api.db, "default", tid)["run_id"])


def test_a_worker_past_its_proposal_limit_exits_4_not_1(api: Api) -> None:
    api.db.settings.run_proposal_limit = 1
    tid, run_id = _worker(api)
    first = _worker_cli(api, tid, run_id, "create", "sub 1", "--assignee", "worker", "--triage")
    assert first.returncode == 0, first.stderr
    second = _worker_cli(api, tid, run_id, "create", "sub 2", "--assignee", "worker", "--triage")
    assert second.returncode == 4, second.stderr
    assert "run_proposal_limit = 1" in second.stderr


def test_a_workers_create_without_triage_is_refused_with_how_to_propose_it(api: Api) -> None:
    tid, run_id = _worker(api)
    out = _worker_cli(api, tid, run_id, "create", "sub", "--assignee", "worker")
    assert out.returncode == 5, out.stderr
    assert f"may only change its own task ({tid})" in out.stderr and "agentboard create --triage" in out.stderr
    assert [t["title"] for t in api.as_admin.get("/api/tasks").json()] == ["the work"]


def test_every_domain_error_comes_back_from_the_api_as_itself() -> None:
    found = [cls for _, cls in inspect.getmembers(errors, inspect.isclass)
             if issubclass(cls, errors.AgentboardError) and cls is not errors.AgentboardError]
    for cls in found:
        body: dict[str, Any] = {"error": {"code": cls.code, "message": "no"}}
        assert type(remote.error_for(cls.http_status, body)) is cls, cls
        if cls.http_status not in (409, 400):  # (several errors share these statuses; their code tells)
            assert type(remote.error_for(cls.http_status, {})) is cls, cls
