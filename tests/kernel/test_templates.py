"""Task-graph templates: a 5-task graph in one transaction, placeholders, where templates live."""

from __future__ import annotations

from pathlib import Path

import pytest
from kernelkit import check_invariants, snapshot

import agentboard
from agentboard.domain import states
from agentboard.domain.errors import InvalidInput, NotFound
from agentboard.kernel import boards, queries, templates

GRAPH = """
description = "Release {version}"
[vars]
owner = "coder"

[[task]]
key = "plan"
title = "Plan {version}"
body = "What goes into {version} on {board}."
assignee = "{owner}"

[[task]]
key = "api"
title = "API for {version}"
parents = ["plan"]
assignee = "coder"
verify = ["true"]

[[task]]
key = "ui"
title = "UI for {version}"
parents = ["plan"]
assignee = "designer"
review = true

[[task]]
key = "docs"
title = "Docs for {version}"
parents = ["api", "ui"]
assignee = "writer"
priority = 3

[[task]]
key = "ship"
title = "Ship {version}"
parents = ["docs"]
assignee = "{owner}"
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


def test_a_template_creates_a_five_task_graph_linked_as_written(home: Path) -> None:
    db = agentboard.connect(str(home)).db
    write(home / "templates", "release", GRAPH)
    out = templates.run(db, "default", "release", {"version": "2.0"}, home=home, actor="alice")
    made = {t["key"]: t for t in out["tasks"]}
    assert [t["title"] for t in out["tasks"]] == ["Plan 2.0", "API for 2.0", "UI for 2.0", "Docs for 2.0", "Ship 2.0"]
    assert made["plan"]["status"] == states.READY and made["plan"]["assignee"] == "coder"
    assert made["plan"]["body"] == "What goes into 2.0 on default."
    assert {made[k]["status"] for k in ("api", "ui", "docs", "ship")} == {states.TODO}
    docs = queries.task_detail(db, "default", made["docs"]["id"])
    assert {p["id"] for p in docs["parents"]} == {made["api"]["id"], made["ui"]["id"]}
    assert made["docs"]["priority"] == 3 and made["ui"]["review_required"] is True
    assert made["api"]["verify"] == ["true"]
    check_invariants(db)


def test_a_template_that_fails_part_way_writes_nothing(home: Path) -> None:
    db = agentboard.connect(str(home)).db
    broken = GRAPH.replace('parents = ["docs"]', 'parents = ["docs", "t_00000000"]')
    write(home / "templates", "broken", broken)
    before = snapshot(db)
    with pytest.raises(NotFound, match="t_00000000"):
        templates.run(db, "default", "broken", {"version": "1"}, home=home)
    assert snapshot(db) == before


def test_a_missing_placeholder_is_refused_with_the_flag_to_add(home: Path) -> None:
    db = agentboard.connect(str(home)).db
    write(home / "templates", "release", GRAPH)
    before = snapshot(db)
    with pytest.raises(InvalidInput, match="--set version="):
        templates.run(db, "default", "release", {}, home=home)
    assert snapshot(db) == before


def test_bad_templates_are_refused_with_the_reason(home: Path) -> None:
    db = agentboard.connect(str(home)).db
    folder = home / "templates"
    write(folder, "typo", '[[task]]\ntitle = "x"\nasignee = "y"\n')
    write(folder, "forward", '[[task]]\ntitle = "a"\nparents = ["b"]\n[[task]]\nkey = "b"\ntitle = "b"\n')
    write(folder, "notoml", "[[task]\n")
    with pytest.raises(InvalidInput, match="asignee"):
        templates.run(db, "default", "typo", home=home)
    with pytest.raises(InvalidInput, match="not the key of a task above"):
        templates.run(db, "default", "forward", home=home)
    with pytest.raises(InvalidInput, match="not valid TOML"):
        templates.run(db, "default", "notoml", home=home)
    with pytest.raises(NotFound, match="no template 'nothing'"):
        templates.run(db, "default", "nothing", home=home)
    listed = {r["name"]: r for r in templates.list_templates(home, None)}
    assert set(listed) == {"typo", "forward", "notoml"} and all("error" in r for r in listed.values())


def test_a_board_targets_template_wins_over_the_homes(home: Path, tmp_path: Path) -> None:
    db = agentboard.connect(str(home)).db
    target = tmp_path / "repo"
    boards.create(db, "proj", workdir=str(target), create_dir=True)
    write(home / "templates", "triage", '[[task]]\ntitle = "home triage"\n')
    write(target / ".agentboard" / "templates", "triage", '[[task]]\ntitle = "repo triage on {board}"\n')
    out = templates.run(db, "proj", "triage", home=home)
    assert out["tasks"][0]["title"] == "repo triage on proj"
    assert templates.run(db, "default", "triage", home=home)["tasks"][0]["title"] == "home triage"


def test_a_template_task_may_be_a_race(home: Path) -> None:
    ab = agentboard.connect(str(home))
    for name in ("coder", "critic"):
        ab.add_profile(name, command="true")
    write(home / "templates", "raced", '[[task]]\ntitle = "Fix {what}"\nrace = ["coder,critic:m2"]\n'
          'race_until = "first-pass"\n')
    out = templates.run(ab.db, "default", "raced", {"what": "the parser"}, home=home)
    (made,) = out["tasks"]
    detail = queries.task_detail(ab.db, "default", made["id"])
    assert detail["race_until"] == "first-pass" and detail["assignee"] == "coder"
    assert [(a["profile"], a["model"], a["state"]) for a in detail["race"]["attempts"]] == \
        [("coder", None, "pending"), ("critic", "m2", "pending")]
