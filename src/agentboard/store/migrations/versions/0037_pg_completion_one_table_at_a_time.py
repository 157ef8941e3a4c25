"""a worker's completion on PostgreSQL writes its tables one statement each

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-06

``agentboard_complete_running_json`` (0034–0036) wrote the task, the run, the event and the
pending rollup in one statement of four data-modifying ``WITH`` parts. That statement opened the
indexes of all four tables at once: 21 indexes and 5 tables. A backend holds 16 relation locks
on its fast path; the rest went to the server's shared lock table, whose partitions every other
backend takes too, at every completion. The three later parts joined the task's answer (a
``WITH`` scan) to write their rows.

Now the function writes each table with a statement of its own: the task's swap (its answer
read into variables), the run's close by its id, the event and the pending rollup from values.
Each statement closes its indexes (and lets go of their locks) before the next opens its own:
the swap holds the task's table and its 14 indexes, and the count trigger's table makes 16, so
every lock of a completion stays on the fast path. The function takes the same arguments, writes the same rows, answers
the same and declines the same way (SQLSTATE ``ABC01``; detail ``budget`` where a budget may
count the run). A run that is no longer open is still found by its close changing no row (the
general path decides then, everything rolled back).

Measured as instructions executed by the server per completion (``bench/pg_instructions.py``):
865,000 before, 827,000 after (-4.4 %). The shared lock table is no longer touched; before, 26
relations were open at once and 10 of them, then the count trigger's table and the event's
sequence, went there at every completion.
"""

from __future__ import annotations

import importlib

from alembic import op

revision = "0037"
down_revision = "0036"
branch_labels = None
depends_on = None

_0034 = importlib.import_module("agentboard.store.migrations.versions.0034_pg_completion_narrow_answer")
_0035 = importlib.import_module("agentboard.store.migrations.versions.0035_pg_completion_checks_first")

NAME = _0034.NAME

#: where 0035's writing statement starts, and the end of the test that follows it
_FROM = "    -- the swap, the run closed, the event, the run pending for the insight rollups\n"
_TO = "    IF NOT FOUND THEN\n        RETURN;\n    END IF;\n"
#: the swap's ``SET`` and ``WHERE``, as 0035 has them (between these two markers)
_SET_FROM = "        UPDATE tasks SET\n"
_SET_TO = "        RETURNING row_to_json(tasks)::text AS task"

_WRITES = (
    "    -- one statement per table, so that no statement holds the indexes of several tables at\n"
    "    -- once: the swap (kernel.runs.completion._COMPLETE_RUNNING_PG), the run closed, the event,\n"
    "    -- the run pending for the insight rollups (kernel.insights.run_closed_in)\n"
    "{swap}"
    "    RETURNING row_to_json(tasks)::text, tasks.status, tasks.goal_id, tasks.last_outcome\n"
    "        INTO task, v_status, v_goal, v_outcome;\n"
    "    IF NOT FOUND THEN\n"
    "        RETURN;\n"
    "    END IF;\n"
    "    v_board := p_board;\n"
    "    UPDATE task_runs SET status = 'closed', outcome = v_outcome, ended_at = p_now, summary = p_summary,\n"
    "            metadata = p_metadata, input_tokens = COALESCE(p_in, input_tokens),\n"
    "            output_tokens = COALESCE(p_out, output_tokens), cost_usd = COALESCE(p_cost, cost_usd),\n"
    "            exit_code = COALESCE(p_exit, exit_code)\n"
    "        WHERE id = p_run AND status = 'open'\n"
    "        RETURNING board, synthetic INTO v_run_board, v_synthetic;\n"
    "    INSERT INTO task_events (board, task_id, run_id, kind, payload, actor, created_at)\n"
    "        VALUES (p_board, p_id, p_run, v_outcome, p_payload, p_actor, p_now);\n"
    "    INSERT INTO run_rollups_pending (run_id, done)\n"
    "        VALUES (p_run, CASE WHEN v_status = 'done' THEN 1 ELSE 0 END);\n"
)


def _between(text: str, start: str, end: str) -> tuple[int, int]:
    """Where the one span from ``start`` up to the end of ``end`` is in ``text``."""
    assert text.count(start) == 1, f"0037: {start[:60]!r} occurs {text.count(start)} times in 0035's function"
    i = text.index(start)
    j = text.index(end, i)
    return i, j + len(end)


def _function() -> str:
    """0035's function, its one writing statement split into one per table."""
    fn = _0035._function()
    i, j = _between(fn, _FROM, _TO)
    a, b = _between(fn[i:j], _SET_FROM, _SET_TO)
    swap = "    " + fn[i:j][a:b - len(_SET_TO)].replace("\n        ", "\n    ").lstrip()
    fn = fn[:i] + _WRITES.format(swap=swap) + fn[j:]
    return _0034._swap(fn, "    v_synthetic integer;\n", "    v_synthetic integer;\n    v_outcome text;\n")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_function())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_0035._function())
