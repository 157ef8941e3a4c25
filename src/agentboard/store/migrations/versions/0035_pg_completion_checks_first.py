"""a worker's completion on PostgreSQL looks for budgets and children before it checks them

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-06

After its swap, ``agentboard_complete_running_json`` (0034) checked in one statement whether a
budget may count the run (any budget of the task, its goal, its board or a profile) and whether
a child of the task waits in todo, and whether one of them has no assignee. That statement's plan
(a sequential scan of ``budgets`` under an OR of four scopes, a join of the task's links with
their tasks and an aggregate over it) was started in full at every completion, on a board with
no budget at all and for a task with no child.

Now one statement first asks whether any budget exists and whether the task has any link to a
child, each a single probe, and the detailed checks run only when one of them says yes. The
function takes the same arguments, answers the same and declines the same way (SQLSTATE
``ABC01``, with the detail ``budget`` where a budget may count the run). Each check runs in a
statement of its own, after the swap, under the task's lock, as before: its snapshot sees what
committed while the swap waited.

Measured as instructions executed by the server per completion of a task without budget or
child (``bench/pg_instructions.py``): 925,000 before, 865,000 after (-6.5 %); the checks
themselves went from 86,000 to 25,000.
"""

from __future__ import annotations

import importlib

from alembic import op

revision = "0035"
down_revision = "0034"
branch_labels = None
depends_on = None

_0034 = importlib.import_module("agentboard.store.migrations.versions.0034_pg_completion_narrow_answer")

NAME = _0034.NAME

_CHECKS = (
    "    SELECT EXISTS (SELECT 1 FROM budgets b WHERE (b.scope = 'task' AND b.ref = p_id) OR (b.scope = 'goal' "
    "AND b.ref = v_goal) OR (b.scope IN ('board', 'supervision') AND b.ref = v_board) OR b.scope = 'profile'), "
    "(SELECT bool_or(COALESCE(c.assignee, '') = '') FROM task_links l JOIN tasks c ON c.id = l.child_id\n"
    "            WHERE l.parent_id = p_id AND c.status = 'todo')\n"
    "        INTO v_budget, v_unassigned;\n"
    "    v_children := v_unassigned IS NOT NULL;\n"
    "    v_unassigned := COALESCE(v_unassigned, false);\n"
)

_PROBED = (
    "    -- one probe each first: most completions have no budget to count and no child to check\n"
    "    SELECT EXISTS (SELECT 1 FROM budgets), EXISTS (SELECT 1 FROM task_links WHERE parent_id = p_id)\n"
    "        INTO v_budget, v_children;\n"
    "    IF v_budget THEN\n"
    "        SELECT EXISTS (SELECT 1 FROM budgets b WHERE (b.scope = 'task' AND b.ref = p_id) OR (b.scope = 'goal' "
    "AND b.ref = v_goal)\n"
    "            OR (b.scope IN ('board', 'supervision') AND b.ref = v_board) OR b.scope = 'profile')\n"
    "            INTO v_budget;\n"
    "    END IF;\n"
    "    v_unassigned := false;\n"
    "    IF v_children THEN\n"
    "        SELECT bool_or(COALESCE(c.assignee, '') = '') FROM task_links l JOIN tasks c ON c.id = l.child_id\n"
    "            WHERE l.parent_id = p_id AND c.status = 'todo'\n"
    "            INTO v_unassigned;\n"
    "        v_children := v_unassigned IS NOT NULL;\n"
    "        v_unassigned := COALESCE(v_unassigned, false);\n"
    "    END IF;\n"
)


def _function() -> str:
    """0034's function, its checks after a probe for budgets and children."""
    fn = _0034._function()
    fn = _0034._swap(fn, f"CREATE FUNCTION {NAME}(", f"CREATE OR REPLACE FUNCTION {NAME}(")
    return _0034._swap(fn, _CHECKS, _PROBED)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_function())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_0034._function().replace(f"CREATE FUNCTION {NAME}(", f"CREATE OR REPLACE FUNCTION {NAME}("))
