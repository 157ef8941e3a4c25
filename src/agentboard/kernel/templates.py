"""Task-graph templates: TOML files that create several linked tasks in one transaction.

A template lives in the home's ``templates/NAME.toml`` or in the board target's
``.agentboard/templates/NAME.toml`` (the board's wins when both exist)::

    description = "A feature: spec, build, test"

    [vars]                      # defaults of the placeholders
    area = "backend"

    [[task]]
    key = "spec"                # how later tasks name it in `parents`
    title = "Spec {feature}"
    body = "Write the spec of {feature} for the {area}."
    assignee = "writer"

    [[task]]
    key = "build"
    title = "Build {feature}"
    parents = ["spec"]          # keys of tasks above, or ids of existing tasks (t_…)
    assignee = "coder"
    verify = ["pytest -q"]
    review = true

``{name}`` in a title, body, assignee, tenant or branch is replaced by the value given with
``--set name=value``, else the ``[vars]`` default, else the built-ins ``{board}``, ``{date}``
(UTC, ``2026-12-01``) and ``{template}``. A placeholder with no value is refused before
anything is written; ``{{`` and ``}}`` are literal braces.
"""

from __future__ import annotations

import dataclasses
import string
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..domain import model, task_fields
from ..domain.errors import InvalidInput, NotFound
from ..store.engine import Database, Row, Tx
from .tasks import NewTask, create_in

NAME_RE = model.TEMPLATE_NAME_RE
#: the fields of a [[task]] table
TASK_KEYS = ("key", *task_fields.TEMPLATE_NAMES)
#: the fields placeholders are filled in
FILLED = ("title", "body", "assignee", "tenant", "branch")
#: the most tasks one template may create
MAX_TASKS = 100


@dataclass
class Template:
    name: str
    path: Path
    description: str
    vars: dict[str, str]
    tasks: list[dict[str, Any]]
    placeholders: list[str] = field(default_factory=list)

    def as_dict(self) -> Row:
        return {"name": self.name, "path": str(self.path), "description": self.description, "vars": self.vars,
                "placeholders": self.placeholders, "tasks": self.tasks}


def folders(home: Path, target: str | None) -> list[Path]:
    """Where templates are looked up, most specific first: the board target's, then the home's."""
    out = []
    if target:
        out.append(Path(target) / ".agentboard" / "templates")
    out.append(home / "templates")
    return out


def _name(value: str) -> str:
    name = value.strip().removesuffix(".toml")
    if not NAME_RE.match(name):
        raise InvalidInput(f"invalid template name {value!r}: use lower-case letters, digits, '-', '_' and '.'")
    return name


def _fields(text: str) -> list[str]:
    try:
        return [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
    except ValueError as exc:
        raise InvalidInput(f"bad placeholder in {text[:60]!r}: {exc} (write {{{{ and }}}} for literal braces)") from None


def parse(name: str, path: Path) -> Template:
    """Read and check one template file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"template {name} ({path}) is not valid TOML: {exc}") from None
    except OSError as exc:
        raise NotFound(f"cannot read template {name} ({path}): {exc.strerror}") from None
    unknown = set(data) - {"description", "vars", "task"}
    if unknown:
        raise InvalidInput(f"template {name}: unknown top-level key(s) {', '.join(sorted(unknown))} "
                           "(use description, [vars] and [[task]])")
    items = data.get("task")
    if not isinstance(items, list) or not items:
        raise InvalidInput(f"template {name} has no [[task]] tables")
    if len(items) > MAX_TASKS:
        raise InvalidInput(f"template {name} has {len(items)} tasks; at most {MAX_TASKS}")
    vars_ = {str(k): str(v) for k, v in (data.get("vars") or {}).items()}
    keys: set[str] = set()
    seen: list[str] = []
    for n, item in enumerate(items, 1):
        if not isinstance(item, dict):
            raise InvalidInput(f"template {name}: task {n} is not a table")
        bad = set(item) - set(TASK_KEYS)
        if bad:
            raise InvalidInput(f"template {name}: task {n} has unknown field(s) {', '.join(sorted(bad))} "
                               f"(known: {', '.join(TASK_KEYS)})")
        if not item.get("title"):
            raise InvalidInput(f"template {name}: task {n} has no title")
        key = str(item.get("key") or f"task{n}")
        if key in keys:
            raise InvalidInput(f"template {name}: two tasks have the key {key!r}")
        # keys or ids, as many and as long as a task's parents
        for parent in task_fields.check("parents", item.get("parents") or []):
            if not str(parent).startswith("t_") and str(parent) not in keys:
                raise InvalidInput(f"template {name}: task {key!r} names parent {parent!r}, which is not the key "
                                   "of a task above it (nor a task id)")
        keys.add(key)
        item["key"] = key
        for f in FILLED:
            if isinstance(item.get(f), str):
                seen += [p for p in _fields(item[f]) if p not in seen]
    return Template(name, path, str(data.get("description") or ""), vars_, items, seen)


def find(home: Path, target: str | None, name: str) -> Template:
    name = _name(name)
    for folder in folders(home, target):
        path = folder / f"{name}.toml"
        if path.is_file():
            return parse(name, path)
    where = " or ".join(str(f) for f in folders(home, target))
    raise NotFound(f"no template {name!r} in {where} (see: agentboard template list)")


def list_templates(home: Path, target: str | None) -> list[Row]:
    """Every template visible to a board (a board target's hides the home's of the same name)."""
    out: dict[str, Row] = {}
    for folder in folders(home, target):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            name = path.stem
            if name in out or not NAME_RE.match(name):
                continue
            try:
                t = parse(name, path)
                out[name] = {"name": name, "path": str(path), "description": t.description,
                             "tasks": len(t.tasks), "placeholders": t.placeholders, "vars": t.vars}
            except (InvalidInput, NotFound) as exc:
                out[name] = {"name": name, "path": str(path), "error": exc.message}
    return sorted(out.values(), key=lambda r: r["name"])


def board_target(db: Database, board: str) -> str | None:
    """The board's target folder (where its own templates live), if it has one."""
    from .boards import get

    return get(db, board).get("default_workdir")


class _Values(dict[str, str]):
    def __missing__(self, key: str) -> str:
        raise KeyError(key)


def render(t: Template, board: str, values: dict[str, str], *, now: float | None = None) -> list[dict[str, Any]]:
    """The template's tasks with every placeholder filled (``InvalidInput`` naming the missing ones)."""
    env = _Values({"board": board, "template": t.name,
                   "date": time.strftime("%Y-%m-%d", time.gmtime(now if now is not None else time.time()))})
    env.update(t.vars)
    env.update(values)
    missing = [p for p in t.placeholders if p not in env]
    if missing:
        raise InvalidInput(f"template {t.name} needs a value for {', '.join(missing)}: add "
                           + " ".join(f"--set {m}=…" for m in missing))
    out = []
    for item in t.tasks:
        filled = dict(item)
        for f in FILLED:
            if isinstance(filled.get(f), str):
                filled[f] = filled[f].format_map(env)
        out.append(filled)
    return out


def create_all_in(tx: Tx, records: list[tuple[str, NewTask, list[str]]]) -> list[Row]:
    """Create rendered template tasks inside the caller's transaction, parents by key."""
    ids: dict[str, str] = {}
    created: list[Row] = []
    for key, new, parents in records:
        resolved = tuple(ids.get(p, p) for p in parents)
        task = create_in(tx, dataclasses.replace(new, parents=resolved))
        ids[key] = task["id"]
        created.append({**task, "key": key})
    return created


def run(db: Database, board: str, name: str, values: dict[str, str] | None = None, *, home: Path | None = None,
        actor: str | None = None) -> Row:
    """Create the template's tasks on ``board``, linked as it says, in one transaction."""
    home = home if home is not None else db.settings.home
    t = find(home, board_target(db, board), name)
    created = db.write(create_all_in, records(render(t, board, values or {}), board, actor))
    return {"template": t.name, "board": board, "tasks": created}


def records(tasks: list[dict[str, Any]], board: str, actor: str | None) -> list[tuple[str, NewTask, list[str]]]:
    """Rendered template tasks as checked task records (``InvalidInput`` for a bad field)."""
    out = []
    for item in tasks:
        given = {k: v for k, v in item.items() if k not in ("key", "title", "parents")}
        new = NewTask.build(board, item["title"], actor=actor, **given)
        out.append((item["key"], new, [str(p) for p in item.get("parents") or []]))
    return out


def commands(db: Database, board: str, name: str, *, home: Path | None = None) -> tuple[list[str], list[str | None]]:
    """The verify commands and workspaces a template would put on the host (for the API's
    host-access check before anything is written)."""
    home = home if home is not None else db.settings.home
    t = find(home, board_target(db, board), name)
    verify = [str(v) for item in t.tasks for v in (item.get("verify") or [])]
    return verify, [item.get("workspace") for item in t.tasks]


def parse_sets(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``["k=v", ...]`` → ``{"k": "v"}`` (``InvalidInput`` for a pair without ``=``)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidInput(f"--set {pair!r}: give key=value")
        out[key.strip()] = value
    return out
