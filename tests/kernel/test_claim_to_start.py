"""A dispatcher's claim of a group takes the tasks, issues their run tokens and reads what their
workers' files need in one transaction."""

from __future__ import annotations

from typing import Any

import pytest

from agentboard.domain.errors import AgentboardError
from agentboard.kernel import dispatching as kd
from agentboard.kernel import queries, tasks, tokens


def _ready(ab: Any, n: int) -> list[str]:
    ab.add_profile("w", command="true")
    return [tasks.create(ab.db, "default", f"task {i}", body=f"do part {i}", assignee="w")["id"] for i in range(n)]


def test_the_claim_of_a_group_brings_each_run_its_token_and_what_its_files_need(ab: Any) -> None:
    ids = _ready(ab, 4)
    got = kd.claim_to_start(ab.db, "default", ids, host="host-a", limit=3, tokens=True)
    assert [c["id"] for c in got.claimed] == ids[:3]  # the queue's order, at most the limit
    assert sorted(got.tokens) == sorted(int(c["run_id"]) for c in got.claimed)
    for c in got.claimed:
        who = tokens.verify(ab.db, got.tokens[int(c["run_id"])])
        assert who["run_id"] == int(c["run_id"]) and who["task_id"] == c["id"]
        assert got.inputs[c["id"]].detail["body"] == f"do part {ids.index(c['id'])}"
        assert got.inputs[c["id"]].detail["status"] == "running"
    assert queries.task_detail(ab.db, "default", ids[3])["status"] == "ready"


def test_without_tokens_asked_for_none_is_issued_and_nothing_claimed_brings_nothing(ab: Any) -> None:
    ids = _ready(ab, 2)
    got = kd.claim_to_start(ab.db, "default", ids, host="host-a")
    assert len(got.claimed) == 2 and got.tokens == {} and set(got.inputs) == set(ids)
    assert kd.claim_to_start(ab.db, "default", ids, host="host-b", tokens=True) == kd.ClaimedToStart([], {}, {})


def test_a_claim_whose_reads_fail_takes_nothing(ab: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """One transaction: a read that fails after the claim leaves every task ready and no token."""
    ids = _ready(ab, 2)

    def broken(*_a: Any, **_k: Any) -> Any:
        raise AgentboardError("the reads failed")

    monkeypatch.setattr(kd, "prepare_inputs_many_in", broken)
    with pytest.raises(AgentboardError):
        kd.claim_to_start(ab.db, "default", ids, host="host-a", tokens=True)
    assert {queries.task_detail(ab.db, "default", i)["status"] for i in ids} == {"ready"}
    assert tokens.list_tokens(ab.db, include_runs=True) == []
