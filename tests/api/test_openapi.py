"""The OpenAPI document says what every route answers, and says it truly: each operation declares
a response schema, and each read route's real answer on a filled board (and each write's, when
it succeeds) validates against it, with no key the document does not name."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from testenv import copy_template

import agentboard
from agentboard.api import create_app

from .boardfill import fill, fill_path
from .conftest import Api, start_api
from .test_auth import _writes

pytestmark = pytest.mark.xdist_group("api-openapi")

#: read routes read again with options that change what they answer (``{name}``: an id of :func:`fill`)
VARIANTS = {
    "/api/board": ["lanes=true&include_archived=true&supervision=true"],
    "/api/budgets": ["scope=task&ref={child}", "scope=profile&ref=worker", "scope=board&ref=default"],
    "/api/goals": ["status=active"],
    "/api/supervisor/wakes": ["status=pending"],
    "/api/tasks/{task_id}": ["events=0"],
    "/api/boards": ["include_archived=true"],
    "/api/tasks": ["supervision=true&include_archived=true"],
    "/api/tokens": ["include_revoked=true"],
    "/api/diagnostics": ["tasks_only=true"],
    "/api/insights": ["by=board&since=7d", "by=model&since=30d"],
    "/api/wiki": ["status=draft"],
}

#: the ids of :func:`fill` a ``{task_id}`` route is read with (tasks in every state it makes)
TASK_KEYS = ("task_id", "parent", "child", "review", "running", "blocked", "changed", "in_git", "idea", "race")
#: the routes only some tasks answer (a race's attempts), with the keys of the tasks they are read with
ONLY_FOR = {"/api/tasks/{task_id}/attempts": ("race",)}


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[tuple[Api, dict[str, Any]]]:
    home = tmp_path_factory.mktemp("openapi") / "home"
    copy_template(sqlite_template, home)
    with agentboard.connect(str(home)) as client, start_api(client) as a:
        yield a, fill(a, home)


@pytest.fixture(scope="module")
def spec(filled: tuple[Api, dict[str, Any]]) -> dict[str, Any]:
    api, _ = filled
    doc: dict[str, Any] = api.as_admin.get("/api/openapi.json").json()
    return doc


def _closed(schema: Any) -> Any:
    """``schema`` with every object that names its properties closed to other keys (unless it
    says it is open): an answer with a key the document does not show is drift too."""
    if isinstance(schema, dict):
        out = {k: _closed(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_closed(v) for v in schema]
    return schema


#: the closed components of each document read (by its id), made once: a document is
#: hundreds of schemas, and every answer checked needs them
_COMPONENTS: dict[int, tuple[dict[str, Any], Any]] = {}


def _json_schema(doc: dict[str, Any], method: str, path: str, status: int) -> dict[str, Any] | None:
    answer = doc["paths"][path][method.lower()]["responses"].get(str(status))
    content = (answer or {}).get("content") or {}
    if "application/json" not in content:
        return None
    made = _COMPONENTS.get(id(doc))
    if made is None or made[1] is not doc:
        made = _COMPONENTS[id(doc)] = (_closed(copy.deepcopy(doc["components"])), doc)
    return {**_closed(copy.deepcopy(content["application/json"]["schema"])), "components": made[0]}


def _check(doc: dict[str, Any], method: str, path: str, r: httpx.Response) -> None:
    schema = _json_schema(doc, method, path, r.status_code)
    assert schema is not None, f"{method} {path} answered {r.status_code}, which its document does not declare"
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(r.json()), key=lambda e: list(e.path))
    assert not errors, (f"{method} {path} answers what it does not declare: "
                        + "; ".join(f"at {'/'.join(map(str, e.path)) or '(top)'}: {e.message[:300]}" for e in errors[:5]))


def test_every_operation_declares_the_schema_of_its_answer(tmp_path: Path) -> None:
    with agentboard.connect(str(tmp_path / "home")) as client:
        doc = create_app(client.settings, client.db).openapi()
    missing = []
    count = 0
    for path, item in doc["paths"].items():
        for method, op in item.items():
            count += 1
            schemas = [media.get("schema") for code, answer in op["responses"].items() if code.startswith("2")
                       for media in (answer.get("content") or {}).values()]
            if not any(schemas):
                missing.append(f"{method.upper()} {path}")
    assert count >= 90
    assert not missing, ("routes without a response model (declare response_model=, see docs/ARCHITECTURE.md): "
                         + ", ".join(missing))


def _read_every_route(api: Api, ids: dict[str, Any], spec: dict[str, Any]) -> int:
    """Call every read route of ``spec`` on ``api``'s filled board and check each answer."""
    checked = 0
    for path, item in spec["paths"].items():
        if "get" not in item:
            continue
        params = set(re.findall(r"\{(\w+)\}", path))
        unknown = params - set(ids)
        assert not unknown, f"GET {path}: give tests/api/boardfill.py's fill() an id for {sorted(unknown)}"
        keys = ONLY_FOR.get(path, TASK_KEYS)
        rounds = [dict(ids, task_id=ids[k]) for k in keys] if params == {"task_id"} else [ids]
        urls = [fill_path(path, values) for values in rounds]
        urls += [fill_path(f"{path}?{query}", ids) for query in VARIANTS.get(path, [])]
        for url in urls:
            r = api.as_admin.get(url)
            assert r.status_code == 200, f"GET {url}: {r.status_code} {r.text[:300]}"
            if _json_schema(spec, "GET", path, 200) is None:
                assert r.headers["content-type"].startswith("application/octet-stream"), path
                continue
            _check(spec, "GET", path, r)
            checked += 1
    return checked


def test_every_read_route_answers_what_its_document_declares(filled: tuple[Api, dict[str, Any]],
                                                            spec: dict[str, Any]) -> None:
    api, ids = filled
    assert _read_every_route(api, ids, spec) >= 40 + 8 * 8


@pytest.mark.postgres
def test_the_read_routes_answer_the_same_shapes_on_postgresql(pg_database: str, tmp_path: Path,
                                                              spec: dict[str, Any]) -> None:
    home = tmp_path / "home"
    with agentboard.connect(pg_database) as client, start_api(client) as a:
        client.settings.home = home
        assert _read_every_route(a, fill(a, home), spec) >= 40 + 8 * 8


def test_every_write_that_succeeds_answers_what_its_document_declares(filled: tuple[Api, dict[str, Any]],
                                                                      spec: dict[str, Any]) -> None:
    api, ids = filled
    b = api.ab.board()
    running = b.create("to be written", assignee="worker")
    b.claim(running["id"])
    writes = {"t1": running["id"], "t2": ids["parent"], "goal": ids["goal_id"], "o1": ids["child"]}
    succeeded = 0
    for method, path, body, params in _writes(writes):
        values = dict(ids, task_id=running["id"], slug="newboard",
                      name="p2" if "profiles" in path else ("x" if "tokens" in path else "pair"))
        url = fill_path(path, values)
        kw: dict[str, Any] = {"json": body} if body is not None else {}
        if path.endswith("/attachments") and method == "POST":
            kw = {"content": b"some bytes"}
        r = api.as_admin.request(method, url, params=params, **kw)
        if r.status_code < 300:
            _check(spec, method, path, r)
            succeeded += 1
    assert succeeded >= 25
    for _ in range(2):  # made, then found again by its idempotency key
        r = api.as_admin.post("/api/tasks", json={"title": "once", "idempotency_key": "k-1"})
        assert r.status_code == 201
        _check(spec, "POST", "/api/tasks", r)
    assert r.json()["existing"] is True
    for body in ({"title": "a race", "race": ["worker", "worker"], "race_until": "first-pass"},
                 {"title": "for a name with no profile", "assignee": "nobody"}):
        r = api.as_admin.post("/api/tasks", json=body)
        assert r.status_code == 201
        _check(spec, "POST", "/api/tasks", r)
