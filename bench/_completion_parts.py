"""A worker's completion on PostgreSQL with parts of it taken away, to measure what each costs
(``pg_peers.py --systems agentboard-without-<part>``). Applied to a benchmark's own fresh
database after the schema; never to a board anyone uses: without a part the completion no
longer does all of its job (the part says what it leaves undone).

The completion is ``agentboard_complete_running_json`` (migrations 0030, 0032, 0034, 0035, 0037, 0038): the
swap of the task's row, the run's close, its event and its pending rollup, one statement each, then
the checks.
A part is taken out of the function's text as the server holds it; a text that no longer has
the part's markers fails loudly rather than measuring something else.
"""

from __future__ import annotations

from typing import Any

#: part -> what the completion no longer does without it
PARTS = {
    "count-trigger": "no count delta per status change (the board's counts drift)",
    "checks": "no budget or waiting-child check after the swap (and no promotion of children)",
    "rollup": "the closed run is not queued for the insight rollups",
    "run-update": "the run stays open (no outcome, end time or usage)",
    "timer-indexes": "the six partial indexes of timed, blocked and waiting tasks are gone "
                     "(the dispatcher's pass scans instead)",
}
#: every part at once: the task's update and its event, the floor of a completion on this schema
ALL = "all"
TIMER_INDEXES = ("ix_tasks_cooldown", "ix_tasks_timed_block", "ix_tasks_ready_race", "ix_tasks_not_before",
                 "ix_tasks_budget_blocked", "ix_tasks_waiting")


def _cut(text: str, start: str, end: str, replacement: str) -> str:
    """``text`` with the span from ``start`` up to (not including) ``end`` replaced."""
    i = text.find(start)
    j = text.find(end, i + 1)
    if i < 0 or j < 0:
        raise SystemExit(f"the completion function no longer has {start.strip()!r} … {end.strip()!r}: "
                         "update bench/_completion_parts.py")
    return text[:i] + replacement + text[j:]


def function_without(fn: str, parts: set[str]) -> str:
    """The function's definition (``pg_get_functiondef``) without ``parts``."""
    if "checks" in parts:
        fn = _cut(fn, "    SELECT EXISTS (SELECT 1 FROM budgets", "    IF v_budget THEN\n        RAISE",
                  "    v_budget := false; v_unassigned := false; v_children := false;\n")
    if "rollup" in parts:
        fn = _cut(fn, "    INSERT INTO run_rollups_pending", "\n    -- the checks", "")
    if "run-update" in parts:
        fn = _cut(fn, "    UPDATE task_runs SET", "    INSERT INTO task_events",
                  "    v_run_board := p_board;\n    v_synthetic := 0;\n")
    return fn


def strip(conn: Any, parts: set[str]) -> None:
    """Take ``parts`` (names of :data:`PARTS`, or :data:`ALL`) out of the completion in the
    database of ``conn`` (autocommit)."""
    if ALL in parts:
        parts = set(PARTS)
    unknown = parts - set(PARTS)
    if unknown:
        raise SystemExit(f"unknown part {', '.join(sorted(unknown))}; choose among {', '.join(PARTS)} or {ALL}")
    fn = conn.execute("SELECT pg_get_functiondef('agentboard_complete_running_json'::regproc)").fetchone()[0]
    changed = function_without(fn, parts)
    if changed != fn:
        conn.execute(changed)
    if "count-trigger" in parts:
        conn.execute("DROP TRIGGER tasks_count_update ON tasks")
    if "timer-indexes" in parts:
        for name in TIMER_INDEXES:
            conn.execute(f"DROP INDEX {name}")
