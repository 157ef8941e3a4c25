"""``.board/result.json``: its JSON Schema and a validator that names every error exactly.

The validator is hand-written (no extra dependency) and mirrors :data:`RESULT_SCHEMA`, which is
also written into ``.board/task.json`` so an agent can check its own output.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import safefs

SCHEMA_VERSION = 1
MAX_BYTES = 1024 * 1024

RESULT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "agentboard worker result (.board/result.json)",
    "type": "object",
    "additionalProperties": False,
    "required": ["success", "summary"],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION, "description": "always 1"},
        "success": {"type": "boolean", "description": "true: the task is done; false: you need input"},
        "summary": {"type": "string", "minLength": 1, "pattern": "\\S",
                    "description": "short description of what was done (or, with success false, what you need)"},
        "result": {"type": "string", "minLength": 1, "pattern": "\\S",
                   "description": "the task's one-line result (its first line, up to 500 characters, is kept)"},
        "filesChanged": {"type": "array", "items": {"type": "string"}},
        "notes": {"type": "string"},
        "followUpSuggestions": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "wikiProposals": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["contentMd"],
                "properties": {
                    "contentMd": {"type": "string", "minLength": 1, "pattern": "\\S"},
                    "note": {"type": "string"},
                },
            },
        },
        "usage": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "input_tokens": {"type": "integer", "minimum": 0},
                "output_tokens": {"type": "integer", "minimum": 0},
                "cost_usd": {"type": "number", "minimum": 0},
            },
        },
    },
}

RESULT_EXAMPLE: dict[str, Any] = {
    "schema_version": 1,
    "success": True,
    "summary": "short description of what was done",
    "result": "the one-line answer, if the task asks for one",
    "filesChanged": ["src/a.py", "tests/test_a.py"],
    "notes": "anything else",
    "followUpSuggestions": ["add rate limiting"],
    "wikiProposals": [{"contentMd": "# ADR-014 …", "note": "why"}],
    "usage": {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0},
}


@dataclass
class Parsed:
    """The outcome of reading ``result.json``: ``data`` when valid, else ``errors``."""

    exists: bool
    data: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)
    raw: str | None = None

    @property
    def valid(self) -> bool:
        return self.exists and self.data is not None and not self.errors


def _type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def _unknown(obj: dict[str, Any], allowed: dict[str, Any], where: str) -> list[str]:
    extra = sorted(k for k in obj if k not in allowed)
    return [f"{where}.{k}: unknown key (allowed: {', '.join(allowed)})" for k in extra]


def _nonempty_str(value: Any, where: str) -> list[str]:
    if not isinstance(value, str):
        return [f"{where}: must be a non-empty string, got {_type(value)}"]
    if not value.strip():
        return [f"{where}: must be a non-empty string, got an empty string"]
    return []


def _str_list(value: Any, where: str, *, nonempty: bool) -> list[str]:
    if not isinstance(value, list):
        return [f"{where}: must be an array of strings, got {_type(value)}"]
    errs = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            errs.append(f"{where}[{i}]: must be a string, got {_type(item)}")
        elif nonempty and not item.strip():
            errs.append(f"{where}[{i}]: must not be empty")
    return errs


def validate(data: Any) -> list[str]:
    """Every way ``data`` breaks the result schema, as ``$.path: problem`` lines (empty: valid)."""
    if not isinstance(data, dict):
        return [f"$: must be a JSON object, got {_type(data)}"]
    props = RESULT_SCHEMA["properties"]
    errs = _unknown(data, props, "$")
    if "schema_version" in data and (
        isinstance(data["schema_version"], bool) or data["schema_version"] != SCHEMA_VERSION
    ):
        errs.append(f"$.schema_version: must be {SCHEMA_VERSION}, got {json.dumps(data['schema_version'])}")
    if "success" not in data:
        errs.append("$.success: required (true or false)")
    elif not isinstance(data["success"], bool):
        errs.append(f"$.success: must be true or false, got {_type(data['success'])}")
    if "summary" not in data:
        errs.append("$.summary: required (a non-empty string)")
    else:
        errs += _nonempty_str(data["summary"], "$.summary")
    if "result" in data:
        errs += _nonempty_str(data["result"], "$.result")
    if "filesChanged" in data:
        errs += _str_list(data["filesChanged"], "$.filesChanged", nonempty=False)
    if "notes" in data and not isinstance(data["notes"], str):
        errs.append(f"$.notes: must be a string, got {_type(data['notes'])}")
    if "followUpSuggestions" in data:
        errs += _str_list(data["followUpSuggestions"], "$.followUpSuggestions", nonempty=True)
    if "wikiProposals" in data:
        wp = data["wikiProposals"]
        if not isinstance(wp, list):
            errs.append(f"$.wikiProposals: must be an array of objects, got {_type(wp)}")
        else:
            item_props = props["wikiProposals"]["items"]["properties"]
            for i, item in enumerate(wp):
                where = f"$.wikiProposals[{i}]"
                if not isinstance(item, dict):
                    errs.append(f"{where}: must be an object with contentMd, got {_type(item)}")
                    continue
                errs += _unknown(item, item_props, where)
                if "contentMd" not in item:
                    errs.append(f"{where}.contentMd: required (a non-empty string)")
                else:
                    errs += _nonempty_str(item["contentMd"], f"{where}.contentMd")
                if "note" in item and not isinstance(item["note"], str):
                    errs.append(f"{where}.note: must be a string, got {_type(item['note'])}")
    if "usage" in data:
        usage = data["usage"]
        if not isinstance(usage, dict):
            errs.append(f"$.usage: must be an object, got {_type(usage)}")
        else:
            errs += _unknown(usage, props["usage"]["properties"], "$.usage")
            for key in ("input_tokens", "output_tokens"):
                v = usage.get(key)
                if key in usage and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                    errs.append(f"$.usage.{key}: must be an integer >= 0, got {json.dumps(v)}")
            if "cost_usd" in usage:
                v = usage["cost_usd"]
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                    errs.append(f"$.usage.cost_usd: must be a number >= 0, got {json.dumps(v)}")
    return errs


def parse_text(text: str) -> Parsed:
    if len(text.encode("utf-8", "replace")) > MAX_BYTES:
        return Parsed(True, None, [f"$: result.json is larger than {MAX_BYTES} bytes"], text[:2000])
    try:
        data = safefs.loads(text)
    except json.JSONDecodeError as exc:
        return Parsed(True, None, [f"$: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"], text)
    except ValueError as exc:
        return Parsed(True, None, [f"$: not valid JSON: {exc}"], text[:2000])
    errors = validate(data)
    return Parsed(True, data if isinstance(data, dict) else None, errors, text)


#: the largest result file read; a larger one is refused (it is the worker's, and could be anything)
READ_LIMIT = 1024 * 1024


def read(path: Path) -> Parsed:
    """Read and validate a result file in a workspace (``<workspace>/.board/result.json``); a
    missing file is ``exists=False``.

    It is read without following any link beneath the workspace, and only when it is a regular
    file with one name and at most :data:`READ_LIMIT` bytes: a link, a hard link (another name of
    a file the worker may not read), a FIFO or a huge file is an invalid result whose error says
    so (and is recorded on the run like any other). A ``.board`` that is not a real folder holds
    no result (``exists=False``); the next preparation replaces it."""
    try:
        raw = safefs.read_file(path, limit=READ_LIMIT)
    except safefs.NotAFolder:  # .board/ is a link (or a file): there is no result of ours to read
        return Parsed(False)
    except safefs.Unsafe as exc:
        return Parsed(True, None, [f"$: {path.name} refused: {exc.strerror}"])
    except OSError as exc:
        return Parsed(True, None, [f"$: cannot read {path.name}: {exc.strerror}"])
    if raw is None:
        return Parsed(False)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Parsed(True, None, [f"$: not UTF-8 text (byte {exc.start})"], raw[:2000].decode("utf-8", "replace"))
    return parse_text(text)


__all__ = ["Parsed", "RESULT_EXAMPLE", "RESULT_SCHEMA", "SCHEMA_VERSION", "parse_text", "read", "validate"]
