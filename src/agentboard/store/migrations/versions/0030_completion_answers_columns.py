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

_0027 = importlib.import_module("agentboard.store.migrations.versions.0027_pg_completion_function")

_BUDGET = _0027._BUDGET
_UNASSIGNED_CHILD = _0027._UNASSIGNED_CHILD
_ARGS = (
    "p_id varchar, p_board varchar, p_run bigint, p_now double precision, p_force integer, p_result text, "
    "p_noverify integer, p_integrated integer, p_await_spawn integer, p_summary text, p_metadata text, "
    "p_in bigint, p_out bigint, p_cost double precision, p_exit integer, p_actor text, p_payload text, p_by text"
)

_FUNCTION = f"""
CREATE FUNCTION agentboard_complete_running_row(
    {_ARGS},
    OUT task tasks, OUT promoted varchar[]
) RETURNS record LANGUAGE plpgsql AS $fn$
DECLARE
    x record;
    v_budget boolean;
    v_unassigned boolean;
    v_children boolean;
    v_settles boolean;
BEGIN
    -- the swap (which declines, writing nothing, where a budget may count the run or a child
    -- waiting in todo has no assignee), the run closed, the event
    -- (kernel.runs.completion._COMPLETE_RUNNING_PG)
    WITH t AS (
        UPDATE tasks SET
            status = CASE WHEN review_required = 1 AND p_force = 0 THEN 'review' ELSE 'done' END,
            current_run_id = NULL, claim_lock = NULL, claim_expires = NULL, worker_pid = NULL, worker_host = NULL,
            completed_at = CASE WHEN review_required = 1 AND p_force = 0 THEN NULL ELSE p_now END,
            result = COALESCE(p_result, result), consecutive_failures = 0, protocol_violations = 0,
            block_kind = NULL, block_reason = NULL,
            last_outcome = CASE WHEN review_required = 1 AND p_force = 0 THEN 'review_requested' ELSE 'completed' END,
            updated_at = p_now
        WHERE id = p_id AND board = p_board AND status = 'running' AND current_run_id = p_run
            AND (p_noverify = 1 OR verify = '[]') AND (p_integrated = 1 OR workspace_kind != 'worktree')
            AND (p_await_spawn = 0 OR worker_pid IS NOT NULL)
            AND NOT {_BUDGET.format(id="tasks.id", goal="tasks.goal_id", board="tasks.board")}
            AND NOT {_UNASSIGNED_CHILD}
        RETURNING *
    ), r AS (
        UPDATE task_runs SET status = 'closed', outcome = t.last_outcome, ended_at = p_now, summary = p_summary,
            metadata = p_metadata, input_tokens = COALESCE(p_in, task_runs.input_tokens),
            output_tokens = COALESCE(p_out, task_runs.output_tokens), cost_usd = COALESCE(p_cost, task_runs.cost_usd),
            exit_code = COALESCE(p_exit, task_runs.exit_code)
        FROM t WHERE task_runs.id = p_run AND task_runs.status = 'open'
        RETURNING task_runs.board, task_runs.synthetic
    ), e AS (
        INSERT INTO task_events (board, task_id, run_id, kind, payload, actor, created_at)
        SELECT t.board, t.id, p_run, t.last_outcome, p_payload, p_actor, p_now FROM t
    )
    SELECT t AS task, r.board AS run_board, r.synthetic AS run_synthetic INTO x FROM t LEFT JOIN r ON TRUE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    task := x.task;

    -- the checks again, under the task's lock: this statement's snapshot sees what committed
    -- while the swap waited for it
    SELECT {_BUDGET.format(id="task.id", goal="task.goal_id", board="task.board")}, {_UNASSIGNED_CHILD},
        EXISTS (SELECT 1 FROM task_links l JOIN tasks c ON c.id = l.child_id WHERE l.parent_id = p_id AND c.status = 'todo')
        INTO v_budget, v_unassigned, v_children;
    IF x.run_board IS NULL OR x.run_synthetic <> 0 OR v_budget OR v_unassigned THEN
        RAISE EXCEPTION 'agentboard: this completion takes the kernel''s general path' USING ERRCODE = 'ABC01';
    END IF;

    -- the run, pending for the insight rollups (kernel.insights.run_closed_in)
    INSERT INTO run_rollups_pending (run_id, done) VALUES (p_run, CASE WHEN task.status = 'done' THEN 1 ELSE 0 END);

    promoted := ARRAY[]::varchar[];
    IF task.status = 'done' THEN
        -- the children it unblocks (kernel.flow.promote_children): two parents of one child
        -- completing at once, the second waits here for the first's commit
        IF v_children THEN
            PERFORM 1 FROM tasks c WHERE c.id IN (SELECT child_id FROM task_links WHERE parent_id = p_id)
                AND c.status = 'todo' ORDER BY c.id FOR UPDATE;
            WITH ready AS (
                SELECT c.id, c.assignee FROM task_links l JOIN tasks c ON c.id = l.child_id
                WHERE l.parent_id = p_id AND c.status = 'todo' AND (c.not_before IS NULL OR c.not_before <= p_now)
                AND NOT EXISTS (SELECT 1 FROM task_links l2 JOIN tasks p ON p.id = l2.parent_id
                                WHERE l2.child_id = c.id AND p.status NOT IN ('done', 'archived'))
            ), up AS (
                UPDATE tasks SET status = 'ready', updated_at = p_now,
                    block_reason = CASE WHEN block_kind = 'dependency' THEN NULL ELSE block_reason END,
                    block_on = NULL,
                    block_kind = CASE WHEN block_kind = 'dependency' THEN NULL ELSE block_kind END
                FROM ready WHERE tasks.id = ready.id AND COALESCE(ready.assignee, '') <> ''
                    AND tasks.status = 'todo'
                RETURNING tasks.id
            ), e AS (
                INSERT INTO task_events (board, task_id, run_id, kind, payload, actor, created_at)
                SELECT p_board, up.id, NULL, 'promoted', p_by, p_actor, p_now FROM up
            )
            SELECT COALESCE(array_agg(up.id ORDER BY up.id), ARRAY[]::varchar[]) INTO promoted FROM up;
        END IF;
        -- its goal (kernel.flow.settle_goal): the goal's last open task settles it in Python
        IF task.goal_id IS NOT NULL THEN
            PERFORM 1 FROM goals WHERE id = task.goal_id FOR UPDATE;
            SELECT COALESCE(SUM(CASE WHEN status = 'done' THEN 1 ELSE 0 END), 0) > 0
                   AND COALESCE(SUM(CASE WHEN status NOT IN ('done', 'archived') THEN 1 ELSE 0 END), 0) = 0
                INTO v_settles FROM tasks WHERE goal_id = task.goal_id;
            IF v_settles THEN
                RAISE EXCEPTION 'agentboard: this completion takes the kernel''s general path' USING ERRCODE = 'ABC01';
            END IF;
        END IF;
    END IF;
END
$fn$
"""

_DROP = (
    "DROP FUNCTION IF EXISTS agentboard_complete_running_row(varchar, varchar, bigint, double precision, integer, "
    "text, integer, integer, integer, text, text, bigint, bigint, double precision, integer, text, text, text)"
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_DROP)
