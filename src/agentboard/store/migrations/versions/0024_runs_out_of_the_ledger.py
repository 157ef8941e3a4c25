"""a run's spend is read from its own row: the usage ledger keeps what is not a run

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03

- ``budget_usage`` no longer gets a row per closed run (``source = 'run'``): the run's board,
  task, profile, start and end, tokens and cost are on its row of ``task_runs`` already, and the
  readers of what was spent (a budget set or changed summing its window, the spending report,
  the gate's expected cost of one run) read them there. The ledger keeps the LLM helper calls,
  and a run closed before its worker's exit was recorded has a ``pending`` marker there
  (``source = 'pending'``, no spend) while a budget covers it, until the exit is recorded. The
  upgrade deletes the runs' rows; those still waiting for their worker's exit become markers.
  A completion on PostgreSQL wrote about 490 bytes of WAL for its row and four index entries.
- ``ix_runs_profile`` on ``task_runs (profile, id)``: a profile's last runs, newest first (the
  gate's expected cost of one run). Both columns are set when the run starts, so a run's close
  changes no indexed column and stays a HOT update on PostgreSQL.
- ``ix_budget_usage_profile`` is dropped: only the runs' rows had a profile to find them by.
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

#: ``kernel.budgets.ledger.PENDING_FOR``: an older run no longer waits for its usage
_PENDING_FOR = 600.0


def upgrade() -> None:
    op.create_index("ix_runs_profile", "task_runs", ["profile", "id"])
    op.execute(sa.text(
        "UPDATE budget_usage SET source = 'pending', runs = 0, runtime = 0, tokens = 0, cost_usd = 0 "
        "WHERE source = 'run' AND pending = 1 AND at > :since").bindparams(since=time.time() - _PENDING_FOR))
    op.execute("DELETE FROM budget_usage WHERE source = 'run'")
    op.drop_index("ix_budget_usage_profile", table_name="budget_usage")


def downgrade() -> None:
    op.create_index("ix_budget_usage_profile", "budget_usage", ["profile", "at"])
    op.execute(
        "INSERT INTO budget_usage (board, task_id, goal_id, profile, run_id, source, at, runs, runtime, tokens, "
        "cost_usd, pending) SELECT r.board, r.task_id, t.goal_id, COALESCE(r.profile, t.assignee), r.id, 'run', "
        "COALESCE(r.ended_at, r.started_at), 1, CASE WHEN r.ended_at > r.started_at THEN r.ended_at - r.started_at "
        "ELSE 0 END, COALESCE(r.input_tokens, 0) + COALESCE(r.output_tokens, 0), COALESCE(r.cost_usd, 0), "
        "CASE WHEN EXISTS (SELECT 1 FROM budget_usage m WHERE m.task_id = r.task_id AND m.run_id = r.id "
        "AND m.source = 'pending') THEN 1 ELSE 0 END "
        "FROM task_runs r LEFT JOIN tasks t ON t.id = r.task_id WHERE r.status = 'closed' AND r.synthetic = 0"
    )
    op.execute("DELETE FROM budget_usage WHERE source = 'pending'")
    op.drop_index("ix_runs_profile", table_name="task_runs")
