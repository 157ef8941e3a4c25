"""The repair loop's texts: the short repair prompt and the summary extracted for a soft degrade;
and a report the board refused (``kernel.runs.completion.report_refused``), which an exit without
a report must name."""

from __future__ import annotations

import re
from pathlib import Path

from .. import agentcli
from ..config import Settings
from ..kernel import budgets, runs
from ..kernel.common import run_metadata
from ..kernel.runs.completion import REFUSED_KEY
from ..store.engine import Database, Row
from . import safefs

MAX_ATTEMPTS = 2
LOG_TAIL_BYTES = 64 * 1024
SUMMARY_CAP = 2000
#: the line the dispatcher writes into the log before each run (``spawning``)
_HEADER = re.compile(r"(?m)^=== run \d+ of \S+ .*===[ \t]*$")
#: the header of a run's first process, naming its profile and adapter (``by NAME (ADAPTER) at``)
_RUN_START = re.compile(r"(?m)^=== run \d+ of \S+ by .* \(([\w-]+)\) at \S+ ===[ \t]*$")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_LABELLED = re.compile(r"(?im)^\s*(?:#+\s*)?(?:\*\*)?(?:summary|result|done)(?:\*\*)?\s*[:\-–]\s*(\S.*)$")


def repair_prompt(task_id: str, attempt: int, errors: list[str], deadline_seconds: float) -> str:
    lines = [
        f"# Repair your result for task {task_id} (attempt {attempt} of {MAX_ATTEMPTS})",
        "",
        "Your work is recorded, but `.board/result.json` is not valid, so the board cannot accept it.",
        "Do NOT redo the task. Only rewrite `.board/result.json` so it matches the schema in",
        "`.board/task.json` (key `result_schema`; `result_example` shows a valid file). The errors:",
        "",
        *[f"- {e}" for e in errors],
        "",
        "Rules: a JSON object; `success` (true/false) and a non-empty `summary` are required;",
        "allowed keys are schema_version (1), success, summary, filesChanged, notes,",
        "followUpSuggestions, wikiProposals (each with a non-empty contentMd), usage. Unknown keys are refused.",
        "",
        f"You have {int(deadline_seconds)} seconds. The same errors are listed in `.board/history.md`.",
    ]
    return "\n".join(lines) + "\n"


def _log_tail(log_path: Path | None) -> str:
    if log_path is None or not Path(log_path).exists():
        return ""
    with open(log_path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - LOG_TAIL_BYTES))
        data = fh.read()
    return _ANSI.sub("", data.decode("utf-8", "replace")).replace("\r\n", "\n")


def _summary_from_raw(raw: str | None) -> str:
    if not raw:
        return ""
    try:
        data = safefs.loads(raw)
    except ValueError:
        m = re.search(r'"summary"\s*:\s*"((?:[^"\\]|\\.)*)"', raw)
        return m.group(1).strip() if m else ""
    value: object = data.get("summary") if isinstance(data, dict) else None
    return value.strip() if isinstance(value, str) else ""


def _this_run(text: str) -> tuple[str, str | None]:
    """The output of the run the log ends with (from its first process's header: a task's log
    holds every run of the task; a nudge's or a repair attempt's output is part of the run), and
    the adapter that header names (None when the header is not in ``text``)."""
    starts = list(_RUN_START.finditer(text))
    if not starts:
        return text, None
    last = starts[-1]
    return text[last.end():], last.group(1)


def _final_message(text: str, adapter: str | None) -> tuple[str | None, bool]:
    """What an agent CLI said last (its adapter's parsed final message), and whether ``text`` is
    such a CLI's JSON output at all. ``adapter`` None: the CLI whose reader finds a final
    message in it, if any."""
    events = agentcli.json_events(text)
    if not events:
        return None, False
    names = [adapter] if adapter else list(agentcli.CLI_ADAPTERS)
    for name in names:
        if name not in agentcli.CLI_ADAPTERS:
            continue
        said = agentcli.outcome_of(name, events, text).final_text
        if said and said.strip():
            return said.strip(), True
    return None, adapter in agentcli.CLI_ADAPTERS


def _plain(text: str) -> str:
    """An agent CLI's output without its JSON event lines (what is left: its stderr)."""
    return "\n".join(line for line in text.splitlines()
                     if not (line.strip().startswith("{") and line.strip().endswith("}")))


def extract_summary(log_path: Path | None, raw_result: str | None = None, adapter: str | None = None) -> str:
    """A summary for a result that never validated: a ``Summary:`` line of the worker's output,
    else the ``summary`` the invalid file carried, else the output's last paragraph.

    For an agent CLI (``adapter``, else the one the run's header in the log names, else the one
    whose output it is) the worker's output is the final message its adapter reads from the
    CLI's JSON events (``agentcli.outcome_of``), not those raw events: its ``Summary:`` line, else
    the ``summary`` of the file, else the whole message."""
    text, named = _this_run(_log_tail(log_path))
    text = _HEADER.sub("", text)  # the dispatcher's own lines are not the worker's
    said, cli = _final_message(text, adapter or named)
    if said is not None:
        text = said
    elif cli:
        text = _plain(text)
    labelled: list[str] = _LABELLED.findall(text)
    if labelled:
        return labelled[-1].strip()[:SUMMARY_CAP]
    from_raw = _summary_from_raw(raw_result)
    if from_raw:
        return from_raw[:SUMMARY_CAP]
    if said is not None:
        return said if len(said) <= SUMMARY_CAP else said[: SUMMARY_CAP - 1] + "…"
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    if paragraphs:
        last = paragraphs[-1]
        return (last if len(last) <= SUMMARY_CAP else "…" + last[-SUMMARY_CAP:])
    return "(the worker left no result and no output to summarize)"


__all__ = ["MAX_ATTEMPTS", "extract_summary", "repair_prompt"]


def refused_report(run: Row | None) -> Row | None:
    """The last report of ``run``'s worker refused as bad input (``{verb, error, at}``, kept by
    ``kernel.runs.completion.report_refused``), or None."""
    got = run_metadata(run or {}).get(REFUSED_KEY)
    return got if isinstance(got, dict) else None


def close_refused(db: Database, settings: Settings, board: str, task_id: str, run: Row,
                  exit_code: int | None) -> str | None:
    """Close as a protocol violation the run of a worker that exited 0 with no report but one the
    board refused (a usage out of range, an unknown usage key...), once it is not nudged (it was,
    or nudging is off): its error says which report was refused and why, never that the worker
    did not report. The error, or None when this exit is not that one (the dispatcher judges it;
    a spent budget closes the run as the budget's)."""
    refused = refused_report(run)
    if refused is None or exit_code != 0 or (settings.stop_nudge and not run.get("nudged")):
        return None
    if db.read(lambda tx: budgets.stop_reason_in(tx, task_id)) is not None:
        return None
    verb = refused.get("verb") or "complete"
    error = (f"the worker exited 0 without a report the board accepted: its {verb} report (`agentboard {verb}`, "
             f"its kanban tool or REST route) was refused: {refused.get('error')} (a refused report is not "
             "recorded and exits 2: correct it and report again)")
    runs.fail(db, board, task_id, "protocol_violation", run_id=int(run["id"]), error=error, exit_code=0,
              payload={"report_refused": refused})
    return error
