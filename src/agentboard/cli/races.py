"""`attempts ID` and `pick ID N`: a race's attempts side by side, and choosing its winner."""

from __future__ import annotations

from typing import Any

import click

from . import common
from .common import handle_errors, json_option, task_board_option


def _cost(a: dict[str, Any]) -> str:
    """An attempt's cost; ``-`` when its agent reported none (Gemini CLI reports no cost)."""
    return f"${float(a.get('cost_usd') or 0):.4f}" if a.get("cost_known", True) else "-"


@click.command("attempts")
@click.argument("task_id", metavar="ID")
@task_board_option
@json_option
@handle_errors
def attempts(task_id: str, board: str | None, as_json: bool) -> None:
    """A race's attempts: profile, model, outcome, verification, diff stat, duration, tokens, cost, summary."""
    from agentboard.dispatch import races

    slug = common.task_board(task_id, board)
    race = races.view(common.db(), slug, task_id)
    if not race.get("race_until"):
        from agentboard.domain.errors import InvalidInput

        raise InvalidInput(f"task {task_id} is not a race (create one with `agentboard create TITLE --race P1,P2`)")
    if as_json:
        common.emit_json(race)
        return
    from .output import clip, duration, table

    click.echo(f"{race['id']}  {race['status']}  {race['title']}  ({race['badge']}, until {race['race_until']})")
    rows = []
    for a in race["attempts"]:
        g = a.get("git") or {}
        diff = f"{g.get('files', 0)} file(s) +{g.get('insertions', 0)} -{g.get('deletions', 0)}" if g.get("exists") \
            else "-"
        rows.append((f"{a['n']}{' *' if a.get('picked') else ''}", a["profile"], a.get("model") or "-",
                     a.get("outcome") or (f"paused ({a['paused']})" if a.get("paused") else a["state"]),
                     a.get("verification") or "-", diff,
                     duration(a["duration"]) if a.get("duration") is not None else "-", a["tokens"], _cost(a),
                     clip((a.get("error") if a.get("paused") else None) or a.get("summary") or a.get("error"), 50)))
    table(["n", "profile", "model", "outcome", "verification", "diff", "took", "tokens", "cost", "summary"], rows)
    if race["can_pick"]:
        click.echo(f"pick the winner: agentboard pick {race['id']} N  (N in {', '.join(map(str, race['can_pick']))})")


@click.command("pick")
@click.argument("task_id", metavar="ID")
@click.argument("n", type=int, metavar="N")
@task_board_option
@json_option
@handle_errors
def pick(task_id: str, n: int, board: str | None, as_json: bool) -> None:
    """Pick attempt N as the winner of a race: its branch becomes the task's and is integrated."""
    from agentboard.dispatch import finish

    slug = common.task_board(task_id, board)
    out = finish.pick(common.db(), slug, task_id, n, actor=common.actor())
    if as_json:
        common.emit_json(out)
        return
    how = f" ({out['integration']})" if out.get("integration") else ""
    click.echo(f"{task_id}  picked attempt {n} -> {out['status']}{how}")
