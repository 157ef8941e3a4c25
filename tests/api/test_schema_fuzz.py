"""Every operation of the OpenAPI schema, fuzzed by schemathesis over real HTTP: never a 500."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis

import agentboard
from agentboard.api import create_app

from .conftest import Api, start_api

pytestmark = pytest.mark.xdist_group("api-fuzz")


@pytest.fixture(scope="module")
def fuzz_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    home = tmp_path_factory.mktemp("fuzz") / "home"
    with agentboard.connect(str(home)) as client:
        board = client.board()
        parent = board.create("parent", assignee="worker")
        board.create("child", assignee="worker", parents=[parent["id"]])
        board.goal("a goal")
        with start_api(client) as a:
            yield a


@pytest.fixture(scope="module")
def fuzz_schema(tmp_path_factory: pytest.TempPathFactory) -> Any:
    home: Path = tmp_path_factory.mktemp("schema") / "home"
    client = agentboard.connect(str(home))
    spec = create_app(client.settings, client.db).openapi()
    client.close()
    return schemathesis.openapi.from_dict(spec)


schema = schemathesis.pytest.from_fixture("fuzz_schema")


@schema.parametrize()
@hypothesis.settings(max_examples=int(os.environ.get("AGENTBOARD_FUZZ_EXAMPLES", "12")), deadline=None, derandomize=True,
                     suppress_health_check=list(hypothesis.HealthCheck))
def test_no_operation_answers_500(case: Any, fuzz_api: Api) -> None:
    response = case.call(base_url=fuzz_api.url, headers={"Authorization": f"Bearer {fuzz_api.admin}"})
    assert response.status_code < 500 or response.status_code == 503, f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:500]}"
    if response.status_code >= 400:
        body = response.json()
        assert set(body["error"]) == {"code", "message"}

