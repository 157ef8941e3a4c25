"""Budgets: `budget set|show|clear` on a task, a goal, a board, a board's supervision or a profile."""

from __future__ import annotations

from typing import Any

import click

from . import common
from .common import handle_errors, json_option


def _scope(task: str | None, goal: str | None, board: str | None, profile: str | None, supervision: str | None,
           *, default_board: bool) -> tuple[str, str] | None:
    from agentboard.domain.errors import InvalidInput

    given = [(s, v) for s, v in (("task", task), ("goal", goal), ("board", board), ("profile", profile),
                                 ("supervision", supervision)) if v]
    if len(given) > 1:
        raise InvalidInput("give one scope: --task ID, --goal ID, --board SLUG, --supervision SLUG or --profile NAME")
    if given:
        scope, ref = given[0]
        if scope in ("board", "supervision"):
            ref = common.existing_board(ref)
        return scope, ref
    if default_board:
        return None
    raise InvalidInput("say whose budget: --task ID, --goal ID, --board SLUG, --supervision SLUG or --profile NAME")


def _scope_options(fn: Any) -> Any:
    for opt in reversed([
        click.option("--task", "task", default=None, metavar="ID", help="a task's budget"),
        click.option("--goal", "goal", default=None, metavar="ID", help="a goal's budget (its tasks' runs)"),
        click.option("--board", "board", default=None, metavar="SLUG", help="a board's budget"),
        click.option("--profile", "profile", default=None, metavar="NAME", help="a profile's budget (its runs on every board)"),
        click.option("--supervision", "supervision", default=None, metavar="SLUG",
                     help="a board's supervision budget (its supervision tasks' runs)"),
    ]):
        fn = opt(fn)
    return fn


def _line(b: dict[str, Any]) -> str:
    parts = [f"{m} {b['lines'][m]['text']}" for m in ("runs", "runtime", "tokens", "cost")
             if b["lines"][m]["limit"] is not None]
    per = f" per {b['per']} ({b['window']})" if b.get("per") else ""
    state = " — SPENT" if b["exhausted"] else (" — over 80%" if b["warning"] else "")
    exp = f"; expected cost of one run ${b['expected_cost']:.2f}" if b.get("expected_cost") is not None else ""
    counts = f" (counts {b['counts']})" if b.get("counts") else ""
    return f"{b['scope']} {b['ref']}{per}{counts}: " + (", ".join(parts) or "no limits") + exp + state


@common.group("budget")
def budget() -> None:
    """Limits on runs, runtime, tokens and cost per task, goal, board or profile."""


@budget.command("set")
@_scope_options
@click.option("--max-runs", default=None, type=int, metavar="N", help="at most N runs")
@click.option("--max-runtime", default=None, metavar="DUR", help="total runtime of its runs (30m, 2h, 1d or seconds)")
@click.option("--max-tokens", default=None, type=int, metavar="N", help="input + output tokens")
@click.option("--max-cost", default=None, type=float, metavar="USD", help="cost in US dollars")
@click.option("--per", "per", default=None, type=click.Choice(["day", "month", "none"]),
              help="a window (UTC calendar day or month; boards and profiles); none removes it")
@click.option("--expected-cost", default=None, type=float, metavar="USD",
              help="what one run of the profile is expected to cost (default: the median of its recent runs)")
@json_option
@handle_errors
def set_(task: str | None, goal: str | None, board: str | None, profile: str | None, supervision: str | None,
         max_runs: int | None,
         max_runtime: str | None, max_tokens: int | None, max_cost: float | None, per: str | None,
         expected_cost: float | None, as_json: bool) -> None:
    """Set or change a budget (limits not given keep their value); tasks it blocked and now lets
    through are released."""
    from agentboard.kernel import budgets

    scope = _scope(task, goal, board, profile, supervision, default_board=False)
    assert scope is not None
    limits = budgets.Limits.build(max_runs=max_runs, max_runtime=max_runtime, max_tokens=max_tokens,
                                  max_cost=max_cost, per=per, expected_cost=expected_cost)
    out = budgets.set_budget(common.db(), scope[0], scope[1], limits, actor=common.actor())
    released = out.get("released") or []
    common.emit(out, as_json, _line(out) + (f"\nreleased: {', '.join(released)}" if released else ""))



@budget.command("show")
@_scope_options
@json_option
@handle_errors
def show(task: str | None, goal: str | None, board: str | None, profile: str | None, supervision: str | None,
         as_json: bool) -> None:
    """Budgets with what they spent (the current board's and every profile's by default), and
    what spent it on the board: its work and its supervision."""
    from agentboard.kernel import budgets

    db = common.db()
    scope = _scope(task, goal, board, profile, supervision, default_board=True)
    slug = None
    if scope is None:
        slug = common.existing_board(None)
        rows = budgets.show(db, board=slug)
    elif scope[0] == "task":
        rows = budgets.for_task(db, scope[1])
    else:
        rows = budgets.show(db, scope=scope[0], ref=scope[1])
        slug = scope[1] if scope[0] in ("board", "supervision") else None
    if as_json:
        common.emit_json(rows)
        return
    if not rows:
        click.echo("no budgets" + (f" on {scope[0]} {scope[1]}" if scope else "")
                   + "; set one with `agentboard budget set --board SLUG --max-cost USD`")
    for b in rows:
        click.echo(_line(b))
        if b.get("by"):
            click.echo("  " + _by(b["by"]))
    if slug is not None:
        _spent_on(budgets.spending(db, slug))


def _by(by: dict[str, Any]) -> str:
    return f"in this window: work {by['work']['text']}; supervision {by['supervision']['text']}"


def _spent_on(s: dict[str, Any]) -> None:
    """What spent what on the board, ever, and which budget the supervision counts against."""
    where = ("its own supervision budget (`budget set --supervision " + s["board"] + " ...`)"
             if s["supervision_budget"] else "the board's budget (supervision_budget is off)")
    click.echo(f"spent on board {s['board']} (all time): work {s['work']['text']}; "
               f"supervision {s['supervision']['text']}, counted against {where}")


@budget.command("clear")
@_scope_options
@json_option
@handle_errors
def clear(task: str | None, goal: str | None, board: str | None, profile: str | None, supervision: str | None,
          as_json: bool) -> None:
    """Remove a budget; the tasks it blocked are released."""
    from agentboard.kernel import budgets

    scope = _scope(task, goal, board, profile, supervision, default_board=False)
    assert scope is not None
    out = budgets.clear_budget(common.db(), scope[0], scope[1], actor=common.actor())
    released = out.get("released") or []
    common.emit(out, as_json, f"budget on {scope[0]} {scope[1]} cleared"
                + (f"; released: {', '.join(released)}" if released else ""))
