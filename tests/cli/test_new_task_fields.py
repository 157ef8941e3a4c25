"""The new-task fields are defined once (``domain/task_fields.py``): every surface that creates a
task refuses a value just over a limit with the same one-line message and writes nothing, and
takes a value at the limit.

The surfaces: the CLI (``agentboard create``), REST (``POST /api/tasks``), the MCP create tool
(an orchestrator's), a template's ``[[task]]`` table and the Python API (``Board.create``).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from api.conftest import Api, start_api
from mcp import Client as McpClient

import agentboard
from agentboard.api.models import TaskCreate
from agentboard.client import Board
from agentboard.domain import task_fields
from agentboard.domain.errors import InvalidInput
from agentboard.domain.task_fields import FIELDS, TaskField
from agentboard.kernel import tasks, templates
from agentboard.mcp.server import LocalOps, Scope, build_server

from .conftest import Runner, assert_one_line_error

#: the MCP create tool's parameters (an orchestrator's)
MCP_FIELDS = ("title", "assignee", "body", "parents", "skills", "goal", "priority")


@dataclass(frozen=True)
class Case:
    """One limit of one field: ``value`` is just over it or at it."""

    field: TaskField
    limit: str
    value: Any

    @property
    def id(self) -> str:
        return f"{self.field.name}-{self.limit}"


def _over(f: TaskField) -> Iterator[Case]:
    if f.kind == "list":
        if f.max_items is not None:
            yield Case(f, "items", [f"t_{i:08x}" for i in range(f.max_items + 1)])
        if f.max_chars is not None:
            yield Case(f, "item-chars", ["c" * (f.max_chars + 1)])
        return
    if f.max_chars is not None:
        yield Case(f, "chars", "a" * (f.max_chars + 1))
    if f.max_bytes is not None:
        yield Case(f, "bytes", "é" * (f.max_bytes // 2) + "x")
    if f.maximum is not None:
        yield Case(f, "maximum", f.maximum + 1)
    if f.minimum is not None:
        yield Case(f, "minimum", f.minimum - 1)


OVER = [c for f in FIELDS for c in _over(f)]


def _refusal(case: Case) -> str:
    with pytest.raises(InvalidInput) as exc:
        task_fields.check(case.field.name, case.value)
    return exc.value.message


def _args(name: str, value: Any) -> dict[str, Any]:
    """The fields of a create with ``name`` set (and an assignee, which the MCP tool requires)."""
    out: dict[str, Any] = {"title": "a task", "assignee": "writer"}
    out[name] = value
    return out


def _cli_args(given: dict[str, Any]) -> list[str]:
    args = ["create", str(given["title"]), "--json"]
    for name, value in given.items():
        f = task_fields.BY_NAME[name]
        if f.cli_option is None:
            continue
        for v in value if isinstance(value, list) else [value]:
            args += [f.cli_option, str(v)]
    return args


def _template(home: Path, given: dict[str, Any]) -> None:
    folder = home / "templates"
    folder.mkdir(exist_ok=True)
    lines = ["[[task]]"] + [f"{k} = {json.dumps(v)}" for k, v in given.items()]
    (folder / "limits.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _mcp(ab: Any, given: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    scope = Scope(board="default", task_id=None, run_id=None, profile="lead", workspace=None, orchestrator=True)
    server = build_server(LocalOps(ab.db, scope, ab.settings), scope)

    async def main() -> Any:
        async with McpClient(server) as client:
            return await client.call_tool("kanban_create", given)

    result = anyio.run(main)
    data = result.structured_content or json.loads(result.content[0].text)
    return bool(result.is_error), data


class Surfaces:
    """Each road to a new task on one home, and what it answers."""

    def __init__(self, cli: Runner, home: Path, ab: Any, api: Api) -> None:
        self.cli, self.home, self.ab, self.api = cli, home, ab, api

    def refusals(self, case: Case) -> dict[str, str]:
        """The message each surface refuses ``case`` with (asserting the refusal's shape)."""
        name, out = case.field.name, {}
        given = _args(name, case.value)
        if case.field.cli_option is not None or name == "title":
            r = self.cli(*_cli_args(given))
            assert_one_line_error(r, 2)
            out["cli"] = r.err.strip().removeprefix("error: ")
        resp = self.api.as_admin.post("/api/tasks", json=given)
        assert resp.status_code == 400, resp.text
        assert resp.json()["error"]["code"] == "invalid_input"
        out["rest"] = resp.json()["error"]["message"]
        if name in MCP_FIELDS:
            is_error, data = _mcp(self.ab, given)
            assert is_error and data["error"] == "invalid_input", data
            out["mcp"] = data["message"]
        if case.field.template:
            _template(self.home, given)
            with pytest.raises(InvalidInput) as exc:
                templates.run(self.ab.db, "default", "limits", home=self.home)
            out["template"] = exc.value.message
        with pytest.raises(InvalidInput) as exc:
            self.ab.board().create(**given)
        out["python"] = exc.value.message
        return out

    def accepted(self, given: dict[str, Any], name: str) -> list[str]:
        """Create ``given`` on every surface that has field ``name``; the new tasks' ids."""
        f = task_fields.BY_NAME[name]
        ids = []
        if f.cli_option is not None or name == "title":
            r = self.cli(*_cli_args(given))
            assert r.code == 0, r.err
            ids.append(r.json()["id"])
        resp = self.api.as_admin.post("/api/tasks", json=given)
        assert resp.status_code == 201, resp.text
        ids.append(resp.json()["id"])
        if name in MCP_FIELDS:
            is_error, data = _mcp(self.ab, given)
            assert not is_error, data
            ids.append(data["id"])
        if f.template:
            _template(self.home, given)
            ids += [t["id"] for t in templates.run(self.ab.db, "default", "limits", home=self.home)["tasks"]]
        ids.append(self.ab.board().create(**given)["id"])
        return ids


@pytest.fixture
def surfaces(cli: Runner, cli_home: Path) -> Iterator[Surfaces]:
    with agentboard.connect(str(cli_home)) as ab, start_api(ab) as api:
        ab.add_profile("writer", command="true")
        yield Surfaces(cli, cli_home, ab, api)


@pytest.mark.parametrize("case", OVER, ids=lambda c: c.id)
def test_a_value_just_over_a_limit_is_refused_alike_everywhere_and_nothing_is_written(
        surfaces: Surfaces, counts: Callable[[], dict[str, int]], case: Case) -> None:
    before = counts()
    said = surfaces.refusals(case)
    assert set(said.values()) == {_refusal(case)}, said
    assert {"cli", "rest", "python"} <= set(said) or case.field.cli_option is None
    assert counts() == before


#: at a limit, a field whose value must also name something that exists is left out: a goal's
#: id (64 characters name no goal), a workspace path (4,096 characters name no folder), a parent
#: id of 64 characters (no task has one; the count of parents is tested), a race entry of 2,000
#: characters (no profile and model are that long; the count of attempts is tested), a race's end
#: (it is one of two words)
AT_LIMIT_SKIPPED = {"goal-chars", "workspace-chars", "parents-item-chars", "race-item-chars", "race_until-chars"}


def _at(case: Case) -> Any:
    f = case.field
    if case.limit == "items":
        return case.value[:-1]
    if case.limit == "item-chars":
        return ["c" * (f.max_chars or 0)]
    if case.limit == "chars":
        return "a" * (f.max_chars or 0)
    if case.limit == "bytes":
        return "é" * ((f.max_bytes or 0) // 2)
    return f.maximum if case.limit == "maximum" else f.minimum


def test_a_value_at_each_limit_is_taken_everywhere(surfaces: Surfaces) -> None:
    parents = [surfaces.ab.board().create(f"parent {i}")["id"] for i in range(200)]
    for case in OVER:
        if case.id in AT_LIMIT_SKIPPED:
            continue
        value = {"parents-items": parents, "race-items": ["writer"] * (case.field.max_items or 0)}.get(
            case.id, _at(case))
        assert task_fields.check(case.field.name, value) is not None
        ids = surfaces.accepted(_args(case.field.name, value), case.field.name)
        shown = surfaces.ab.board().show(ids[0])
        column = {"goal": "goal_id", "branch": "branch_name", "max_retries": "max_retries"}.get(
            case.field.name, case.field.name)
        if column in shown and case.field.kind != "list":
            assert all(surfaces.ab.board().show(i)[column] == shown[column] for i in ids), case.id


def test_every_surface_names_the_same_fields() -> None:
    names = set(task_fields.NAMES)
    assert set(TaskCreate.model_fields) == names
    kwargs = set(task_fields.NewTaskFields.__annotations__)
    assert kwargs | {"title"} == names
    for fn in (tasks.create, Board.create):
        params = inspect.signature(fn).parameters
        assert "title" in params and "fields" in params, fn
    assert set(templates.TASK_KEYS) == {"key", *task_fields.TEMPLATE_NAMES}
    from agentboard.cli.tasks import create

    options = {p.name for p in create.params}
    assert {f.name for f in FIELDS} <= options
