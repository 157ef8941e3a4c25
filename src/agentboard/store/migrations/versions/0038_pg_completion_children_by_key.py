"""a completion on PostgreSQL reads the children it releases by key

Revision ID: 0038
Revises: 0037
Create Date: 2026-12-06

``agentboard_complete_running_json`` (0037) finds the finished task's children by joining its
links to the tasks: which of them wait with no assignee, which to lock, which became ready and
which to promote. Planned on statistics older than the graph (a fan-out created and released
at once, before anything analyzed it: the statistics know no waiting task and no link), each of
those joins became a nested loop that scans the whole task table once per child. A parent of
150 children took 20–36 ms to complete, and one of 200 read 41,296 rows of a 201-row table.

Rewriting the joins does not help: given the same statistics, the planner puts the tasks'
scan on the inner side of whatever join it is offered (an ``= ANY`` of the children's ids
compares every scanned row with every id; a join to their ``unnest`` scans the ids once per
task). Now the function turns sequential scans off for the rest of its own transaction
(``set_config('enable_seqscan', 'off', true)``) before those statements, when the task has a
child at all: each of them then reads the children through the links' and the tasks' primary
keys, whatever the statistics say. A completion without children (most of them) runs as before,
and nothing outlives the completion's transaction. The function takes the same arguments,
writes the same rows and answers the same.
"""

from __future__ import annotations

import importlib

from alembic import op

revision = "0038"
down_revision = "0037"
branch_labels = None
depends_on = None

_0037 = importlib.import_module("agentboard.store.migrations.versions.0037_pg_completion_one_table_at_a_time")

NAME = _0037.NAME

#: where the children's statements start in 0037's function, and what goes before them
_AT = "    IF v_children THEN\n        SELECT bool_or("
_BY_KEY = (
    "    IF v_children THEN\n"
    "        -- the children by key, whatever the statistics say (a graph created and released\n"
    "        -- before anything analyzed it): for the rest of this transaction only\n"
    "        PERFORM set_config('enable_seqscan', 'off', true);\n"
    "        SELECT bool_or("
)


def _function() -> str:
    """0037's function, its children read by key."""
    fn = _0037._function()
    assert fn.count(_AT) == 1, f"0038: {_AT[:40]!r} occurs {fn.count(_AT)} times in 0037's function"
    return fn.replace(_AT, _BY_KEY)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_function())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_0037._function())
