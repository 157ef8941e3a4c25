"""The repair loop's texts: the short repair prompt and the summary extracted for a soft degrade."""

from __future__ import annotations

import re
from pathlib import Path

from . import safefs

MAX_ATTEMPTS = 2
LOG_TAIL_BYTES = 64 * 1024
SUMMARY_CAP = 2000
#: the line the dispatcher writes into the log before each run (``spawning``)
_HEADER = re.compile(r"(?m)^=== run \d+ of \S+ .*===[ \t]*$")
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


def extract_summary(log_path: Path | None, raw_result: str | None = None) -> str:
    """A summary for a result that never validated: a ``Summary:`` line of the worker's output,
    else the ``summary`` the invalid file carried, else the output's last paragraph."""
    text = _HEADER.sub("", _log_tail(log_path))  # the dispatcher's own lines are not the worker's
    labelled: list[str] = _LABELLED.findall(text)
    if labelled:
        return labelled[-1].strip()[:SUMMARY_CAP]
    from_raw = _summary_from_raw(raw_result)
    if from_raw:
        return from_raw[:SUMMARY_CAP]
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    if paragraphs:
        last = paragraphs[-1]
        return (last if len(last) <= SUMMARY_CAP else "…" + last[-SUMMARY_CAP:])
    return "(the worker left no result and no output to summarize)"


__all__ = ["MAX_ATTEMPTS", "extract_summary", "repair_prompt"]
