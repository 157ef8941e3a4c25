"""a worker's completion on PostgreSQL runs fewer statements, and the count trigger has no WHEN

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-04

Most of the server's time in ``agentboard_complete_running_row`` (0030) went to starting its
statements, not to running them: each statement opens its tables and indexes and builds its
expressions anew. Measured on this revision's parent (server CPU per completion, one process,
1,500 completions, ``synchronous_commit = on``; about 320 µs in all):

- the swap's two ``NOT EXISTS`` guards (a budget that may count the run, a child waiting in todo
  with no assignee): about 25 µs. The checks after the swap read the same, under the task's lock;
- the separate ``INSERT`` of the run into the pending rollups: about 10 µs;
- the ``WHEN`` clause of ``tasks_count_update``: about 15 µs of every statement that changes a
  task's status (the server parses and prepares a trigger's ``WHEN`` once per statement).

This revision:

- ``agentboard_complete_running_row``: the swap has no guards; the checks after it decline as
  before (SQLSTATE ``ABC01``, the statement rolled back), where a budget may count the run with
  the detail ``budget`` (the kernel then sends that board's completions down the general path
  for a while, ``kernel.runs.completion``, instead of trying the function first each time).
  The same SQLSTATE, so the previous version's processes, which decline on ``ABC01`` only, keep
  completing during a rolling upgrade. The run is appended to the pending rollups by the swap's
  own statement (a fourth ``WITH`` part).
- ``agentboard_task_counts``: a status change on the same board is told apart inside the
  function (an update that sets a task's status or board to what it was appends nothing, as
  the ``WHEN`` clause did), and ``tasks_count_update`` fires on ``UPDATE OF status, board``
  with no ``WHEN``.
"""

from __future__ import annotations

import importlib

from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

_0030 = importlib.import_module("agentboard.store.migrations.versions.0030_completion_answers_columns")
_0021 = importlib.import_module("agentboard.store.migrations.versions.0021_pg_lean_writes")

_PENDING = (
    "    -- the run, pending for the insight rollups (kernel.insights.run_closed_in)\n"
    "    INSERT INTO run_rollups_pending (run_id, done) VALUES (p_run, CASE WHEN task.status = 'done' THEN 1 ELSE 0 END);\n\n"
)
_DECLINE = (
    "    IF x.run_board IS NULL OR x.run_synthetic <> 0 OR v_budget OR v_unassigned THEN\n"
    "        RAISE EXCEPTION 'agentboard: this completion takes the kernel''s general path' USING ERRCODE = 'ABC01';\n"
    "    END IF;\n"
)


def _swap(text: str, old: str, new: str) -> str:
    found = text.count(old)
    assert found == 1, f"0032: {old[:60]!r} occurs {found} times in 0030's function, not once"
    return text.replace(old, new)


def _function() -> str:
    """0030's function, leaner: the swap unguarded, the pending rollup in the swap's statement."""
    fn = _0030._function().replace("CREATE FUNCTION agentboard_complete_running_row(",
                                    "CREATE OR REPLACE FUNCTION agentboard_complete_running_row(")
    fn = _swap(fn, "    -- the swap (which declines, writing nothing, where a budget may count the run or a child\n"
                   "    -- waiting in todo has no assignee), the run closed, the event\n",
               "    -- the swap, the run closed, the event, the run pending for the insight rollups\n"
               "    -- (kernel.insights.run_closed_in)\n")
    fn = _swap(fn, "    -- (kernel.runs.completion._COMPLETE_RUNNING_PG)\n",
               "    -- (the swap: kernel.runs.completion._COMPLETE_RUNNING_PG)\n")
    # the guards, as in 0027 (formatted there from _BUDGET and _UNASSIGNED_CHILD)
    guards = fn[fn.index("            AND NOT EXISTS (SELECT 1 FROM budgets b"):fn.index("        RETURNING *\n")]
    assert guards.count("AND NOT EXISTS") == 2, "0032: the swap's guards changed"
    fn = _swap(fn, guards, "")
    fn = _swap(fn, "        SELECT t.board, t.id, p_run, t.last_outcome, p_payload, p_actor, p_now FROM t\n    )\n",
               "        SELECT t.board, t.id, p_run, t.last_outcome, p_payload, p_actor, p_now FROM t\n"
               "    ), p AS (\n"
               "        INSERT INTO run_rollups_pending (run_id, done)\n"
               "        SELECT p_run, CASE WHEN t.status = 'done' THEN 1 ELSE 0 END FROM t\n"
               "    )\n")
    fn = _swap(fn, _PENDING, "")
    fn = _swap(fn, "    -- the checks again, under the task's lock: this statement's snapshot sees what committed\n"
                   "    -- while the swap waited for it\n",
               "    -- the checks, under the task's lock: this statement's snapshot sees what committed while\n"
               "    -- the swap waited for it (a decline rolls back everything written)\n")
    fn = _swap(fn, _DECLINE,
               "    IF v_budget THEN\n"
               "        RAISE EXCEPTION 'agentboard: this completion takes the kernel''s general path' USING ERRCODE = 'ABC01',\n"
               "            DETAIL = 'budget';\n"
               "    END IF;\n"
               "    IF x.run_board IS NULL OR x.run_synthetic <> 0 OR v_unassigned THEN\n"
               "        RAISE EXCEPTION 'agentboard: this completion takes the kernel''s general path' USING ERRCODE = 'ABC01';\n"
               "    END IF;\n")
    return fn


#: 0021's count function, where an update that keeps the status on the same board appends nothing
_SAME_BOARD = ("    ELSIF OLD.board = NEW.board THEN\n"
               "        INSERT INTO task_count_deltas (board, status, d, prev) VALUES (NEW.board, NEW.status, 1, OLD.status);\n")
_COUNT_FUNCTION = _0021._COUNT_FUNCTION.replace(_SAME_BOARD, (
    "    ELSIF OLD.board = NEW.board THEN\n"
    "        IF OLD.status IS DISTINCT FROM NEW.status THEN\n"
    "            INSERT INTO task_count_deltas (board, status, d, prev) VALUES (NEW.board, NEW.status, 1, OLD.status);\n"
    "        END IF;\n"))
assert _COUNT_FUNCTION != _0021._COUNT_FUNCTION, "0032: 0021's count function changed"

_TRIGGER = ("CREATE TRIGGER tasks_count_update AFTER UPDATE OF status, board ON tasks FOR EACH ROW "
            "EXECUTE FUNCTION agentboard_task_counts()")
#: 0013's: the same with a WHEN clause
_OLD_TRIGGER = _TRIGGER.replace(" EXECUTE ", " WHEN (OLD.status IS DISTINCT FROM NEW.status OR "
                                "OLD.board IS DISTINCT FROM NEW.board) EXECUTE ")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_function())
    op.execute(_COUNT_FUNCTION)
    op.execute("DROP TRIGGER tasks_count_update ON tasks")
    op.execute(_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER tasks_count_update ON tasks")
    op.execute(_OLD_TRIGGER)
    op.execute(_0021._COUNT_FUNCTION)
    op.execute(_0030._function().replace("CREATE FUNCTION agentboard_complete_running_row(",
                                         "CREATE OR REPLACE FUNCTION agentboard_complete_running_row("))
