"""a worker's completion on PostgreSQL carries the task's row as JSON from its swap, and checks the waiting children once

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-05

``agentboard_complete_running_row`` (0030, 0032) returned the task as a value of the row type
``tasks``, which the kernel turned into one JSON text (``row_to_json(f.task)``). On its way the
row's 49 columns were projected again and again: the swap answered ``RETURNING *``, each of the
four readers of the swap's answer (the run's close, the event, the pending rollup, the final
``SELECT``) scanned all 49 columns, the final ``SELECT`` built a row value from them, PL/pgSQL
copied it into its ``OUT`` parameter and the outer query took it apart again. Starting each of
those projections costs the server a type lookup per column. The checks after the swap read
the waiting children twice, once for any child and once for a child with no assignee.

``agentboard_complete_running_json`` takes the same arguments, does the same checks and writes
and declines the same way (SQLSTATE ``ABC01``, with the detail ``budget`` where a budget may
count the run). It differs in two ways:

- The swap returns ``row_to_json(tasks)`` of the updated row, plus the five columns the rest of
  the function reads. Its ``OUT task text`` is that JSON, or NULL when nothing was written.
- One read of the children answers both checks: whether any child waits in todo, and whether
  one of them has no assignee.

Measured as instructions executed by the server per completion (``valgrind --tool=callgrind`` on
a single-user backend, 300 completions against 100, same database): 1,218,000 before, 1,085,000
after (-11 %). The answer's JSON text is the same, key for key.

``agentboard_complete_running_row`` stays as it was. The processes of the previous version still
call it during a rolling upgrade (docs/deploy.md).
"""

from __future__ import annotations

import importlib

from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None

_0032 = importlib.import_module("agentboard.store.migrations.versions.0032_pg_completion_statements")

NAME = "agentboard_complete_running_json"
_DROP = (
    f"DROP FUNCTION IF EXISTS {NAME}(varchar, varchar, bigint, double precision, integer, text, integer, integer, "
    "integer, text, text, bigint, bigint, double precision, integer, text, text, text)"
)


def _swap(text: str, old: str, new: str) -> str:
    found = text.count(old)
    assert found == 1, f"0034: {old[:60]!r} occurs {found} times in 0032's function, not once"
    return text.replace(old, new)


def _function() -> str:
    """0032's function, answering the task as JSON built by the swap, the children read once."""
    fn = _0032._function()
    fn = _swap(fn, "CREATE OR REPLACE FUNCTION agentboard_complete_running_row(", f"CREATE FUNCTION {NAME}(")
    fn = _swap(fn, "OUT task tasks, OUT promoted varchar[]", "OUT task text, OUT promoted varchar[]")
    fn = _swap(fn, "    x record;\n",
               "    v_status varchar;\n    v_goal varchar;\n    v_board varchar;\n    v_run_board varchar;\n"
               "    v_synthetic integer;\n")
    # the swap answers the JSON and what the function reads; its readers scan six columns, not 49
    fn = _swap(fn, "        RETURNING *\n    ), r AS (",
               "        RETURNING row_to_json(tasks)::text AS task, tasks.id, tasks.board, tasks.status, tasks.goal_id,\n"
               "            tasks.last_outcome\n    ), r AS (")
    fn = _swap(fn, "    SELECT t AS task, r.board AS run_board, r.synthetic AS run_synthetic INTO x FROM t LEFT JOIN r ON TRUE;\n",
               "    SELECT t.task, t.status, t.goal_id, t.board, r.board, r.synthetic\n"
               "        INTO task, v_status, v_goal, v_board, v_run_board, v_synthetic FROM t LEFT JOIN r ON TRUE;\n")
    fn = _swap(fn, "    task := x.task;\n", "")
    # one read of the waiting children: NULL when none waits, else whether one has no assignee
    fn = _swap(fn, "EXISTS (SELECT 1 FROM task_links l JOIN tasks c ON c.id = l.child_id WHERE l.parent_id = p_id "
                   "AND c.status = 'todo' AND COALESCE(c.assignee, '') = ''),\n"
                   "        EXISTS (SELECT 1 FROM task_links l JOIN tasks c ON c.id = l.child_id WHERE l.parent_id = p_id "
                   "AND c.status = 'todo')\n"
                   "        INTO v_budget, v_unassigned, v_children;\n",
               "(SELECT bool_or(COALESCE(c.assignee, '') = '') FROM task_links l JOIN tasks c ON c.id = l.child_id\n"
               "            WHERE l.parent_id = p_id AND c.status = 'todo')\n"
               "        INTO v_budget, v_unassigned;\n"
               "    v_children := v_unassigned IS NOT NULL;\n"
               "    v_unassigned := COALESCE(v_unassigned, false);\n")
    fn = _swap(fn, "IF x.run_board IS NULL OR x.run_synthetic <> 0 OR v_unassigned THEN",
               "IF v_run_board IS NULL OR v_synthetic <> 0 OR v_unassigned THEN")
    fn = _swap(fn, "    IF task.status = 'done' THEN\n", "    IF v_status = 'done' THEN\n")
    fn = fn.replace("task.id", "p_id").replace("task.goal_id", "v_goal").replace("task.board", "v_board")
    assert "x." not in fn and "task." not in fn, "0034: the function still reads the old row variables"
    return fn


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_function())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_DROP)
