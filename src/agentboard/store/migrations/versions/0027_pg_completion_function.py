"""a worker's completion as one server-side function on PostgreSQL

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-03

``agentboard_complete_running(...)`` (PostgreSQL only) does in one statement what a worker's
report of its finished run writes: the task's compare-and-swap (running this run → done, or
review when it requires review), its run closed with the report, the ``completed`` (or
``review_requested``) event, the run's insight rollup, the promotion of the children it
unblocks with their ``promoted`` events, and the check of its goal. The kernel calls it as a
transaction of its own (``kernel.runs.completion``): one round trip, as a queue's completion
costs, where the statements one by one took two and six.

It declines, writing nothing, where the kernel's own code has more to do, and the kernel then
takes its general path:

- ``NULL``, with nothing written: a budget may count the run, or a child waiting in todo has no
  assignee (the board's fallback assignee is a setting the server does not know), or the
  swap does not apply (the task is not running this run, verify commands or a branch's
  integration wait, the spawn is not recorded yet);
- SQLSTATE ``ABC01`` after the swap, which rolls the whole statement back: what was checked
  first changed while the task's row lock was awaited, the run was not open, or the task was
  its goal's last open task (the goal's settling wakes the supervisor, in Python).

The answer is ``{"task": <the task's row>, "promoted": [<child ids>]}``. Each statement of the
function takes a new snapshot, so the checks after the swap see a child whose creation
committed while the swap waited for the task's lock (a child's creation reads its parents
``FOR SHARE``). The statements are the same as the kernel's general path on PostgreSQL
(``kernel.runs.completion``, ``kernel.flow``, ``store.rollups``); a test completes the same
tasks both ways and compares every row written.
"""

from __future__ import annotations

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

#: the rollups' histogram buckets (``store.rollups``: below 1 s, then powers of two, then 2^22 s on)
_BUCKETS = 24
_BOUNDS = "ARRAY[" + ", ".join(str(float(2 ** i)) for i in range(_BUCKETS - 1)) + "]::double precision[]"
_FIXED = ("runs", "firsts", "first_ok", "verified_total", "verified_pass", "done", "started", "input_tokens",
          "output_tokens", "cost_usd", "duration_s")
_HIST = tuple(f"d{i}" for i in range(_BUCKETS)) + tuple(f"c{i}" for i in range(_BUCKETS))
_VALUES = {
    "runs": "1", "firsts": "v_first", "first_ok": "v_first", "verified_total": "v_checked",
    "verified_pass": "v_checked", "done": "v_done", "started": "v_started",
    "input_tokens": "COALESCE(x.run__input_tokens, 0)", "output_tokens": "COALESCE(x.run__output_tokens, 0)",
    "cost_usd": "COALESCE(x.run__cost_usd, 0)", "duration_s": "v_dur",
    **{f"d{i}": f"CASE WHEN v_db = {i} THEN 1 ELSE 0 END" for i in range(_BUCKETS)},
    **{f"c{i}": f"CASE WHEN v_cb = {i} THEN v_done ELSE 0 END" for i in range(_BUCKETS)},
}
_KEYS = ("board", "day", "profile", "model", "shard")
#: the model a run is counted for: its task's, else its profile's
_MODEL = "COALESCE(x.model, (SELECT p.model FROM profiles p WHERE p.name = COALESCE(x.run__profile, x.assignee)), '')"
_KEY_VALUES = ("x.run__board", "v_day", "v_profile", _MODEL, "v_shard")
_ROLLUP_UPDATE = (
    "UPDATE run_rollups SET " + ", ".join(f"{c} = run_rollups.{c} + {_VALUES[c]}" for c in (*_FIXED, *_HIST))
    + " WHERE " + " AND ".join(f"run_rollups.{k} = {v}" for k, v in zip(_KEYS, _KEY_VALUES, strict=True))
)
_ROLLUP_INSERT = (
    f"INSERT INTO run_rollups ({', '.join((*_KEYS, *_FIXED, *_HIST))}) "
    f"VALUES ({', '.join((*_KEY_VALUES, *(_VALUES[c] for c in (*_FIXED, *_HIST))))}) "
    f"ON CONFLICT ({', '.join(_KEYS)}) DO UPDATE SET "
    + ", ".join(f"{c} = run_rollups.{c} + excluded.{c}" for c in (*_FIXED, *_HIST))
)

#: a budget that may count a run of task ``id`` (of goal ``goal``, on board ``board``): a
#: profile budget counts as one
_BUDGET = (
    "EXISTS (SELECT 1 FROM budgets b WHERE (b.scope = 'task' AND b.ref = {id}) OR (b.scope = 'goal' AND b.ref = {goal}) "
    "OR (b.scope IN ('board', 'supervision') AND b.ref = {board}) OR b.scope = 'profile')"
)
#: a child of the task waiting in todo with no assignee
_UNASSIGNED_CHILD = (
    "EXISTS (SELECT 1 FROM task_links l JOIN tasks c ON c.id = l.child_id WHERE l.parent_id = p_id "
    "AND c.status = 'todo' AND COALESCE(c.assignee, '') = '')"
)

_FUNCTION = f"""
CREATE OR REPLACE FUNCTION agentboard_complete_running(
    p_id varchar, p_board varchar, p_run bigint, p_now double precision, p_force integer, p_result text,
    p_noverify integer, p_integrated integer, p_await_spawn integer, p_summary text, p_metadata text,
    p_in bigint, p_out bigint, p_cost double precision, p_exit integer, p_actor text, p_payload text,
    p_by text
) RETURNS json LANGUAGE plpgsql AS $fn$
DECLARE
    x record;
    v_budget boolean;
    v_unassigned boolean;
    v_children boolean;
    v_promoted varchar[];
    v_dur double precision;
    v_db integer;
    v_cb integer := -1;
    v_first integer;
    v_checked integer;
    v_own integer;
    v_done integer := 0;
    v_started integer;
    v_day integer;
    v_profile text;
    v_shard smallint;
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
        RETURNING task_runs.board, task_runs.profile, task_runs.attempt, task_runs.started_at, task_runs.ended_at,
            task_runs.input_tokens, task_runs.output_tokens, task_runs.cost_usd, task_runs.synthetic
    ), e AS (
        INSERT INTO task_events (board, task_id, run_id, kind, payload, actor, created_at)
        SELECT t.board, t.id, p_run, t.last_outcome, p_payload, p_actor, p_now FROM t
    )
    SELECT t.*, r.board AS run__board, r.profile AS run__profile, r.attempt AS run__attempt, r.started_at AS run__started_at,
        r.ended_at AS run__ended_at, r.input_tokens AS run__input_tokens, r.output_tokens AS run__output_tokens,
        r.cost_usd AS run__cost_usd, r.synthetic AS run__synthetic
    INTO x FROM t LEFT JOIN r ON TRUE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;

    -- the checks again, under the task's lock: this statement's snapshot sees what committed
    -- while the swap waited for it
    SELECT {_BUDGET.format(id="x.id", goal="x.goal_id", board="x.board")}, {_UNASSIGNED_CHILD},
        EXISTS (SELECT 1 FROM task_links l JOIN tasks c ON c.id = l.child_id WHERE l.parent_id = p_id AND c.status = 'todo')
        INTO v_budget, v_unassigned, v_children;
    IF x.run__board IS NULL OR x.run__synthetic <> 0 OR v_budget OR v_unassigned THEN
        RAISE EXCEPTION 'agentboard: this completion takes the kernel''s general path' USING ERRCODE = 'ABC01';
    END IF;

    -- the run's insight rollup (store.rollups: a closed run, and its task done with it)
    v_dur := CASE WHEN x.run__ended_at > x.run__started_at THEN x.run__ended_at - x.run__started_at ELSE 0 END;
    v_db := width_bucket(v_dur, {_BOUNDS});
    v_own := CASE WHEN x.purpose IS NULL OR x.purpose != 'attempt' THEN 1 ELSE 0 END;
    IF x.status = 'done' THEN
        v_done := v_own;
        v_cb := width_bucket(CASE WHEN x.completed_at > x.created_at THEN x.completed_at - x.created_at ELSE 0 END,
                             {_BOUNDS});
    END IF;
    v_first := CASE WHEN x.run__attempt = 1 THEN 1 ELSE 0 END;
    v_started := v_first * v_own;
    v_checked := CASE WHEN COALESCE(x.verify, '[]') NOT IN ('[]', '') THEN 1 ELSE 0 END;
    v_day := CAST(FLOOR(COALESCE(x.run__ended_at, x.run__started_at) / 86400) AS INTEGER);
    v_profile := COALESCE(x.run__profile, x.assignee, '');
    v_shard := CAST(mod(pg_backend_pid(), 8) AS SMALLINT);
    {_ROLLUP_UPDATE};
    IF NOT FOUND THEN
        {_ROLLUP_INSERT};
    END IF;

    IF x.status = 'done' THEN
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
            SELECT array_agg(up.id ORDER BY up.id) INTO v_promoted FROM up;
        END IF;
        -- its goal (kernel.flow.settle_goal): the goal's last open task settles it in Python
        IF x.goal_id IS NOT NULL THEN
            PERFORM 1 FROM goals WHERE id = x.goal_id FOR UPDATE;
            SELECT COALESCE(SUM(CASE WHEN status = 'done' THEN 1 ELSE 0 END), 0) > 0
                   AND COALESCE(SUM(CASE WHEN status NOT IN ('done', 'archived') THEN 1 ELSE 0 END), 0) = 0
                INTO v_settles FROM tasks WHERE goal_id = x.goal_id;
            IF v_settles THEN
                RAISE EXCEPTION 'agentboard: this completion takes the kernel''s general path' USING ERRCODE = 'ABC01';
            END IF;
        END IF;
    END IF;

    RETURN json_build_object('task', row_to_json(x), 'promoted', COALESCE(v_promoted, ARRAY[]::varchar[]));
END
$fn$
"""

_DROP = (
    "DROP FUNCTION IF EXISTS agentboard_complete_running(varchar, varchar, bigint, double precision, integer, "
    "text, integer, integer, integer, text, text, bigint, bigint, double precision, integer, text, text, text)"
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_DROP)
