"""fewer bytes written per claim, heartbeat and completion on PostgreSQL: the columns they change, side by side

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-04

An update whose new row stays on its page writes to the WAL only the bytes of the row from the
first that changed to the last that changed (PostgreSQL compares the old and the new row's
common prefix and suffix). A task's claim changed its ``status`` (the sixth column) and its
claim (the 32nd to 37th), so it wrote everything between: the task's dates, workspace, skills,
checks and counters, about 200 bytes of the row. A closed run's row did the same from its
``status`` to its cost, its log and workspace paths in between.

This revision rebuilds both tables on PostgreSQL with their columns in a new physical order:
what rarely changes first; then what a claim, a heartbeat and a completion change, side by side
(``status``, the current run, the claim, ``updated_at``); then what only a worker's first start
sets (its workspace and branch). A run: its fixed facts, then what its start records (pid, log,
workspace), its heartbeat (``last_heartbeat_at``, ``claim_expires``), then what its close sets.
What the tables hold, their keys, indexes, triggers, ``fillfactor``, owner, privileges, comments
and the run ids' sequence stay; the completion function, whose answer has the task's row type, is
dropped and created again as it was. A view, row security policy, publication, extended
statistics, rule, further constraint or column privilege that someone added on either table stops
the migration before anything is changed, with what to drop first. Readers name the columns;
SQLite keeps its order (it writes whole pages either way).

The rebuild copies every task and run: on a board of a million tasks it takes the time of that
copy and its indexes, with the tables locked.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

from agentboard.domain.errors import Conflict

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None

#: the tasks' columns as migrations 0001-0032 left them
TASKS_OLD = (
    "id", "board", "title", "body", "assignee", "status", "priority", "tenant", "goal_id", "created_by",
    "created_at", "updated_at", "started_at", "completed_at", "workspace_kind", "workspace_path", "branch_name",
    "idempotency_key", "skills", "max_runtime_seconds", "max_retries", "review_required", "verify",
    "consecutive_failures", "protocol_violations", "rework_count", "last_failure_error", "last_outcome",
    "cooldown_until", "block_kind", "block_reason", "current_run_id", "claim_lock", "claim_expires", "worker_pid",
    "worker_host", "last_heartbeat_at", "result", "workflow_template_id", "current_step_key", "not_before",
    "purpose", "block_on", "block_to", "base_branch", "integration", "pr_url", "model", "parents_override",
    "race_until", "race_of",
)
#: what a task is given when made and rarely changes, then its failures and blocks, then what a
#: claim, a heartbeat, a worker's start and a completion change (in that block: a claim changes
#: ``status`` to ``updated_at``, a heartbeat ``last_heartbeat_at`` and ``claim_expires``, a
#: completion ``completed_at`` to ``updated_at``), then what a worker's first start sets
TASKS_NEW = (
    "id", "board", "title", "body", "assignee", "priority", "tenant", "goal_id", "created_by", "created_at",
    "skills", "max_runtime_seconds", "max_retries", "review_required", "verify", "idempotency_key",
    "workflow_template_id", "current_step_key", "purpose", "block_on", "block_to", "integration", "pr_url",
    "model", "parents_override", "race_until", "race_of", "not_before", "rework_count", "cooldown_until",
    "last_failure_error", "block_kind", "block_reason", "consecutive_failures", "protocol_violations",
    "started_at", "completed_at", "result", "last_outcome", "status", "current_run_id", "claim_lock",
    "worker_host", "worker_pid", "last_heartbeat_at", "claim_expires", "updated_at",
    "workspace_kind", "workspace_path", "branch_name", "base_branch",
)
RUNS_OLD = (
    "id", "task_id", "board", "profile", "attempt", "status", "outcome", "claim_lock", "claim_expires",
    "worker_pid", "worker_host", "started_at", "ended_at", "last_heartbeat_at", "summary", "metadata", "error",
    "exit_code", "log_path", "workspace_path", "input_tokens", "output_tokens", "cost_usd", "review", "synthetic",
    "pending_report", "inbox_seen", "nudged", "race_attempt",
)
#: a run's fixed facts, then what its worker's start records, its heartbeat, then its close
RUNS_NEW = (
    "id", "task_id", "board", "profile", "attempt", "synthetic", "race_attempt", "claim_lock", "worker_host",
    "started_at", "review", "pending_report", "inbox_seen", "nudged", "worker_pid", "log_path", "workspace_path",
    "last_heartbeat_at", "claim_expires", "status", "outcome", "ended_at", "exit_code", "input_tokens",
    "output_tokens", "cost_usd", "error", "summary", "metadata",
)
assert sorted(TASKS_OLD) == sorted(TASKS_NEW) and len(set(TASKS_NEW)) == len(TASKS_NEW)
assert sorted(RUNS_OLD) == sorted(RUNS_NEW) and len(set(RUNS_NEW)) == len(RUNS_NEW)


def _rows(sql: str, **params: Any) -> list[Any]:
    return list(op.get_bind().execute(sa.text(sql), params).fetchall())


#: what may depend on a table that a rebuild cannot carry over: the objects named, by kind
_DEPENDENTS_SQL = (
    "SELECT 'view ' || v.oid::regclass::text FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid "
    "JOIN pg_class v ON v.oid = r.ev_class WHERE d.classid = 'pg_rewrite'::regclass "
    "AND d.refobjid = CAST(:t AS regclass) AND v.oid <> CAST(:t AS regclass) "
    "UNION SELECT 'constraint ' || conname FROM pg_constraint "
    "WHERE (conrelid = CAST(:t AS regclass) AND contype <> 'p') OR confrelid = CAST(:t AS regclass) "
    "UNION SELECT 'policy ' || polname FROM pg_policy WHERE polrelid = CAST(:t AS regclass) "
    "UNION SELECT 'publication ' || p.pubname FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid "
    "WHERE r.prrelid = CAST(:t AS regclass) "
    "UNION SELECT 'statistics ' || stxname FROM pg_statistic_ext WHERE stxrelid = CAST(:t AS regclass) "
    "UNION SELECT 'rule ' || rulename FROM pg_rewrite WHERE ev_class = CAST(:t AS regclass) AND rulename <> '_RETURN' "
    "UNION SELECT 'the privileges on column ' || attname FROM pg_attribute "
    "WHERE attrelid = CAST(:t AS regclass) AND attnum > 0 AND attacl IS NOT NULL "
    "ORDER BY 1"
)


def _grants(table: str) -> list[str]:
    """The ``GRANT`` statements that give ``table``'s privileges back to whom they were given
    (its owner's own come with the ownership)."""
    rows = _rows(
        "SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END, "
        "a.privilege_type, a.is_grantable FROM pg_class c, aclexplode(c.relacl) a "
        "WHERE c.oid = CAST(:t AS regclass) AND a.grantee <> c.relowner ORDER BY 1, 2", t=table)
    return [f"GRANT {priv} ON {table} TO {who}" + (" WITH GRANT OPTION" if grantable else "")
            for who, priv, grantable in rows]


def _check(table: str) -> None:
    """Stop, before anything is changed, where something on ``table`` could not be carried over."""
    blocking = [r[0] for r in _rows(_DEPENDENTS_SQL, t=table)]
    if blocking:
        them = "it" if len(blocking) == 1 else "them"
        raise Conflict(
            f"migration 0033 rebuilds the table {table} with its columns in a new order and cannot carry "
            f"{', '.join(blocking)} over: drop {them}, run the upgrade again, then create {them} anew "
            "(nothing was changed)")


def rebuild(table: str, order: tuple[str, ...]) -> None:
    """Rebuild ``table`` with its columns in ``order``: the same types, defaults, NOT NULLs,
    storage options (``fillfactor``), rows, key, indexes, triggers, owner, privileges and
    comments; the functions whose signature uses its row type dropped and created again; a
    sequence it owns kept and owned again. What :func:`_check` finds stops the migration first."""
    _check(table)
    cols = _rows(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid) "
        "FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
        "WHERE a.attrelid = CAST(:t AS regclass) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum", t=table)
    by_name = {c[0]: c for c in cols}
    assert sorted(by_name) == sorted(order), f"0033: {table} has columns {sorted(set(by_name) ^ set(order))} not expected"
    options = _rows("SELECT reloptions FROM pg_class WHERE oid = CAST(:t AS regclass)", t=table)[0][0] or []
    key = _rows("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = CAST(:t AS regclass) AND contype = 'p'", t=table)
    indexes = [r[0] for r in _rows(
        "SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i WHERE i.indrelid = CAST(:t AS regclass) "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid) ORDER BY i.indexrelid", t=table)]
    triggers = [r[0] for r in _rows(
        "SELECT pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = CAST(:t AS regclass) AND NOT tgisinternal "
        "ORDER BY oid", t=table)]
    functions = _rows(
        "SELECT DISTINCT p.oid::regprocedure::text, pg_get_functiondef(p.oid) FROM pg_depend d "
        "JOIN pg_proc p ON p.oid = d.objid WHERE d.classid = 'pg_proc'::regclass "
        "AND d.refclassid = 'pg_type'::regclass AND d.refobjid = (SELECT reltype FROM pg_class "
        "WHERE oid = CAST(:t AS regclass))", t=table)
    sequences = [r[0] for r in _rows(
        "SELECT s.oid::regclass::text FROM pg_depend d JOIN pg_class s ON s.oid = d.objid "
        "WHERE d.classid = 'pg_class'::regclass AND s.relkind = 'S' AND d.refobjid = CAST(:t AS regclass) "
        "AND d.deptype = 'a'", t=table)]
    owner = _rows("SELECT a.attname FROM pg_depend d JOIN pg_attribute a ON a.attrelid = d.refobjid "
                  "AND a.attnum = d.refobjsubid WHERE d.objid = CAST(:s AS regclass) AND d.deptype = 'a'",
                  s=sequences[0]) if sequences else []

    owned_by = _rows("SELECT quote_ident(pg_get_userbyid(relowner)), pg_get_userbyid(relowner) = current_user "
                     "FROM pg_class WHERE oid = CAST(:t AS regclass)", t=table)[0]
    grants = _grants(table)
    comments = [f"COMMENT ON TABLE {table} IS " + r[0] for r in _rows(
        "SELECT quote_literal(obj_description(CAST(:t AS regclass), 'pg_class')) "
        "WHERE obj_description(CAST(:t AS regclass), 'pg_class') IS NOT NULL", t=table)]
    comments += [f'COMMENT ON COLUMN {table}."{n}" IS ' + text for n, text in _rows(
        "SELECT attname, quote_literal(col_description(attrelid, attnum)) FROM pg_attribute "
        "WHERE attrelid = CAST(:t AS regclass) AND attnum > 0 AND col_description(attrelid, attnum) IS NOT NULL",
        t=table)]

    new = f"{table}_0033"
    defs = ", ".join(
        f'"{n}" {by_name[n][1]}' + (" NOT NULL" if by_name[n][2] else "")
        + (f" DEFAULT {by_name[n][3]}" if by_name[n][3] is not None else "") for n in order)
    with_options = f" WITH ({', '.join(options)})" if options else ""
    names = ", ".join(f'"{n}"' for n in order)
    op.execute(f"CREATE TABLE {new} ({defs}){with_options}")
    op.execute(f"INSERT INTO {new} ({names}) SELECT {names} FROM {table}")
    for sequence in sequences:
        op.execute(f"ALTER SEQUENCE {sequence} OWNED BY NONE")
    for signature, _ in functions:
        op.execute(f"DROP FUNCTION {signature}")
    op.execute(f"DROP TABLE {table}")
    op.execute(f"ALTER TABLE {new} RENAME TO {table}")
    for name, definition in key:
        op.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
    for statement in (*indexes, *triggers):
        op.execute(statement)
    for sequence in sequences:
        op.execute(f"ALTER SEQUENCE {sequence} OWNED BY {table}.{owner[0][0]}")
    for _, definition in functions:
        op.execute(definition)
    if not owned_by[1]:
        op.execute(f"ALTER TABLE {table} OWNER TO {owned_by[0]}")
    for statement in (*grants, *comments):
        op.execute(statement)
    op.execute(f"ANALYZE {table}")


def _lock() -> None:
    """Both tables checked, then locked at once before either is copied: taken one after the
    other, a writer holding the second while it waits for the first would deadlock with the
    rebuild."""
    _check("tasks")
    _check("task_runs")
    op.execute("LOCK TABLE tasks, task_runs IN ACCESS EXCLUSIVE MODE")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _lock()
    rebuild("tasks", TASKS_NEW)
    rebuild("task_runs", RUNS_NEW)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _lock()
    rebuild("tasks", TASKS_OLD)
    rebuild("task_runs", RUNS_OLD)
