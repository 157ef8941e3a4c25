"""a worker's completion on PostgreSQL answers the task's columns, not a JSON text

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-03

``agentboard_complete_running`` (0027, 0029) answered ``{"task": <row>, "promoted": [...]}`` as
one JSON text: the server built it from the task's ~55 columns (``row_to_json``), the client
parsed it back and mended the types JSON loses (a whole ``double precision`` reads as an int).
Both ends spent more on that answer than on any statement of the completion but the swap.

``agentboard_complete_running_row`` takes the same arguments and does the same checks and writes
(0029's, with the same ``ABC01`` decline), and has two ``OUT`` parameters, ``task tasks`` and
``promoted varchar[]``: the kernel reads ``SELECT (f.task).*, f.promoted FROM
agentboard_complete_running_row(...) f``, the task's columns with their own types, decoded by the
driver. Nothing written: ``task`` is NULL (every column of the answer NULL). The run's closing
answers only what the checks read (its board and whether it is synthetic).

``agentboard_complete_running`` stays as it was: the processes of the previous version still call
it during a rolling upgrade (docs/deploy.md). A later revision drops it.
"""

from __future__ import annotations

import importlib

from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

_0029 = importlib.import_module("agentboard.store.migrations.versions.0029_rollups_pending")


def _swap(text: str, old: str, new: str, count: int = 1) -> str:
    """``text`` with ``old`` replaced: it must occur exactly ``count`` times (0029's function
    changed under this revision otherwise)."""
    found = text.count(old)
    assert found == count, f"0030: {old[:60]!r} occurs {found} times in 0029's function, not {count}"
    return text.replace(old, new)


def _function() -> str:
    """0029's function with the answer of this revision, under its new name."""
    fn = _0029._function()
    fn = _swap(fn, "CREATE OR REPLACE FUNCTION agentboard_complete_running(",
               "CREATE FUNCTION agentboard_complete_running_row(")
    fn = _swap(fn, "    p_by text\n) RETURNS json LANGUAGE plpgsql AS $fn$",
               "    p_by text,\n    OUT task tasks, OUT promoted varchar[]\n) RETURNS record LANGUAGE plpgsql AS $fn$")
    fn = fn[:fn.index("DECLARE\n")] + (
        "DECLARE\n    x record;\n    v_budget boolean;\n    v_unassigned boolean;\n    v_children boolean;\n"
        "    v_settles boolean;\n") + fn[fn.index("BEGIN\n"):]
    run_returning = fn.index("        RETURNING task_runs.board, ")
    fn = fn[:run_returning] + "        RETURNING task_runs.board, task_runs.synthetic\n" + fn[fn.index("    ), e AS (", run_returning):]
    into = fn.index("    SELECT t.*, r.board AS run__board")
    fn = fn[:into] + (
        "    SELECT t AS task, r.board AS run_board, r.synthetic AS run_synthetic INTO x FROM t LEFT JOIN r ON TRUE;\n"
        "    IF NOT FOUND THEN\n        RETURN;\n    END IF;\n    task := x.task;\n"
    ) + fn[fn.index("    END IF;\n", into) + len("    END IF;\n"):]
    fn = _swap(fn, "x.run__board IS NULL OR x.run__synthetic <> 0", "x.run_board IS NULL OR x.run_synthetic <> 0")
    for field, count in (("id", 1), ("board", 1), ("status", 2), ("goal_id", 4)):
        fn = _swap(fn, f"x.{field}", f"task.{field}", count)
    fn = _swap(fn, "    IF task.status = 'done' THEN\n", "    promoted := ARRAY[]::varchar[];\n    IF task.status = 'done' THEN\n")
    fn = _swap(fn, "SELECT array_agg(up.id ORDER BY up.id) INTO v_promoted FROM up;",
               "SELECT COALESCE(array_agg(up.id ORDER BY up.id), ARRAY[]::varchar[]) INTO promoted FROM up;")
    fn = _swap(fn, "    RETURN json_build_object('task', row_to_json(x), 'promoted', COALESCE(v_promoted, ARRAY[]::varchar[]));\n",
               "")
    return fn


_DROP = (
    "DROP FUNCTION IF EXISTS agentboard_complete_running_row(varchar, varchar, bigint, double precision, integer, "
    "text, integer, integer, integer, text, text, bigint, bigint, double precision, integer, text, text, text)"
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_function())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_DROP)
