"""Value rules shared by every surface: ids, slugs, titles, durations, limits."""

from __future__ import annotations

import math
import os
import re
import secrets
import time
import unicodedata
from typing import Any

from .errors import InvalidInput

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
PROFILE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: ids as this version makes them (``t_`` / ``g_`` and 8 hex digits; longer hex is accepted)
TASK_ID_RE = re.compile(r"^t_[0-9a-f]{8,32}$")
GOAL_ID_RE = re.compile(r"^g_[0-9a-f]{8,32}$")
WIKI_SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,127}$")
#: a task-graph template's name (its file is ``NAME.toml``)
TEMPLATE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
#: Unicode categories refused in names and one-line texts (titles, attachment names): control
#: characters (newlines and tabs included), format characters (the bidirectional embeddings,
#: overrides, isolates and marks U+202A-U+202E, U+2066-U+2069, U+200E/U+200F, zero-width
#: characters, U+FEFF), surrogates, line and paragraph separators
INVISIBLE_CATEGORIES = ("Cc", "Cf", "Cs", "Zl", "Zp")
TITLE_MAX = 500
BODY_MAX = 256 * 1024
COMMENT_MAX = 64 * 1024
SUMMARY_MAX = 64 * 1024
METADATA_MAX = 256 * 1024


#: the longest a task's block reason is (one line; the full text stays in the run and its log)
REASON_LINE_MAX = 300
_DECORATION_RE = re.compile(r"^[\W_]*$")


def reason_line(text: str | None, limit: int = REASON_LINE_MAX) -> str:
    """A block reason as one line: the first meaningful line of ``text`` (not blank, not a
    decoration such as ``----``, not a log header; for a Python traceback, the exception line),
    whitespace collapsed, cut at ``limit`` characters with ``…``."""
    lines = [ln.strip() for ln in (text or "").splitlines()]
    lines = [ln for ln in lines if ln and not _DECORATION_RE.match(ln) and not ln.startswith("=== run ")]
    if not lines:
        return ""
    first = lines[0]
    for i, ln in enumerate(lines):
        if ln.endswith("Traceback (most recent call last):"):
            after = [x for x in lines[i + 1:] if not x.startswith(("File ", "^", "~"))]
            exc = next((x for x in reversed(after) if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b", x)),
                       None)
            if exc:
                head = ln[: -len("Traceback (most recent call last):")].rstrip(" :;")
                first = f"{head}: {exc}" if head else exc
            break
    first = " ".join(first.split())
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def error_line(error: str | None) -> str:
    """A run's error as one line for a block reason: its own first line and, of the program
    output it quotes (``...; last output: ...``), the line that says the most (a traceback's
    exception, else the last meaningful line)."""
    head, sep, output = (error or "").partition("; last output: ")
    if not sep:
        return reason_line(head)
    if "Traceback (most recent call last):" in output:
        said = reason_line(output[output.index("Traceback"):])
    else:
        lines = [ln for ln in output.splitlines() if ln.strip() and not _DECORATION_RE.match(ln.strip())]
        said = reason_line(lines[-1] if lines else "")
    return reason_line(head) + (f"; last output: {said}" if said else "")


def elapsed(ts: float | None, now: float | None = None) -> str | None:
    """How long ago ``ts`` was, in its largest whole unit: ``12s``, ``5m``, ``3h``, ``2d``
    (None without a time)."""
    if not ts:
        return None
    secs = max(0, int((time.time() if now is None else now) - float(ts)))
    if secs < 60:
        return f"{secs}s"
    if secs < 3600:
        return f"{secs // 60}m"
    if secs < 86400:
        return f"{secs // 3600}h"
    return f"{secs // 86400}d"


def new_task_id() -> str:
    return "t_" + secrets.token_hex(4)


def new_goal_id() -> str:
    return "g_" + secrets.token_hex(4)


def board_slug(value: str) -> str:
    slug = (value or "").strip().lower()
    if not SLUG_RE.match(slug):
        raise InvalidInput(
            f"invalid board slug {value!r}: use 1-64 lowercase letters, digits, '-' or '_', "
            "starting with a letter or digit"
        )
    return slug


def profile_name(value: str) -> str:
    name = (value or "").strip()
    if not PROFILE_RE.match(name):
        raise InvalidInput(
            f"invalid profile name {value!r}: use 1-64 letters, digits, '.', '-' or '_'"
        )
    return name


def visible(value: str, what: str) -> str:
    """``value`` when it holds no character of :data:`INVISIBLE_CATEGORIES`: a name or title
    that reaches a notification, a pull request or a terminal cannot display as another text
    (``U+202E`` reversing it, a zero-width space hiding in it) or break a line. Refused, not
    rewritten, naming the code point."""
    for ch in value:
        if unicodedata.category(ch) in INVISIBLE_CATEGORIES:
            raise InvalidInput(
                f"invalid {what} {value[:80]!r}: control and bidirectional-override characters, zero-width ones "
                f"(here U+{ord(ch):04X}) are refused")
    return value


def title(value: str | None) -> str:
    """A one-line title: not empty, at most :data:`TITLE_MAX` characters, nothing invisible."""
    text = (value or "").strip()
    if not text:
        raise InvalidInput("title is empty: give the task a short title")
    if len(text) > TITLE_MAX:
        raise InvalidInput(f"title is {len(text)} characters; the limit is {TITLE_MAX}")
    return visible(text, "title")


def task_id(value: Any) -> str:
    """A task id as stored (``t_`` and hex digits): what an import or a restore accepts."""
    if not isinstance(value, str) or not TASK_ID_RE.match(value):
        raise InvalidInput(f"invalid task id {str(value)[:40]!r}: task ids look like t_1a2b3c4d")
    return value


def goal_id(value: Any) -> str:
    if not isinstance(value, str) or not GOAL_ID_RE.match(value):
        raise InvalidInput(f"invalid goal id {str(value)[:40]!r}: goal ids look like g_1a2b3c4d")
    return value


#: the bidirectional embedding, override and isolate characters (U+202A-U+202E, U+2066-U+2069):
#: they make a terminal show a text in another order than it is written
BIDI_OVERRIDES = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: the texts that :func:`body` checks with :func:`plain` (a heartbeat note, a profile's
#: description): shown on one line or in a list, so no terminal control may reach them. (A block
#: reason is checked where a person or a worker gives one, the CLI, the API and the MCP tool: the
#: dispatcher's own reasons quote an agent's output, escapes and all, and are escaped when shown.)
PLAIN_TEXTS = frozenset({"note", "description"})


def no_nul(value: str, what: str) -> str:
    """``value`` when it holds no NUL character (PostgreSQL cannot store one, and a C program
    reading the text stops there): refused naming ``what``."""
    if "\x00" in value:
        raise InvalidInput(f"{what} contains a NUL character (U+0000); remove it")
    return value


def terminal_control(ch: str) -> bool:
    """Whether ``ch`` would act on a terminal instead of being shown: a C0 or C1 control
    character other than a line break or a tab (ESC starting an escape sequence, BEL, a carriage
    return), DEL, or a bidirectional override (:data:`BIDI_OVERRIDES`)."""
    o = ord(ch)
    return (o < 0x20 and ch not in "\n\t") or 0x7F <= o <= 0x9F or ch in BIDI_OVERRIDES


def plain(value: str, what: str) -> str:
    """``value`` when it holds no :func:`terminal_control` character (line breaks and tabs are
    kept): a text printed on an operator's terminal cannot clear lines, set the window title or
    reverse itself. Refused, not rewritten, naming the code point."""
    for ch in value:
        if terminal_control(ch):
            raise InvalidInput(
                f"invalid {what} {value[:80]!r}: control characters other than line breaks and tabs, and "
                f"bidirectional overrides (here U+{ord(ch):04X}) are refused")
    return value


def body(value: str | None, limit: int = BODY_MAX, what: str = "body") -> str:
    """A long text (a body, a comment, a summary): at most ``limit`` bytes of UTF-8, no NUL
    character; one of :data:`PLAIN_TEXTS` also holds no terminal control (:func:`plain`). Other
    control characters are kept and escaped where a terminal shows them (``cli.output.printable``)."""
    text = value or ""
    size = len(text.encode("utf-8"))
    if size > limit:
        raise InvalidInput(f"{what} is {size} bytes; the limit is {limit} bytes")
    no_nul(text, what)
    if what in PLAIN_TEXTS:
        plain(text, what)
    return text


def strings(value: Any, what: str) -> Any:
    """``value`` (decoded JSON: metadata, usage) when none of its texts, keys included, holds a
    NUL character (:func:`no_nul`, naming ``what``)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            no_nul(item, what)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return value


def duration(value: str | int | float | None) -> int | None:
    """Parse ``30s``, ``30m``, ``2h``, ``1d`` or plain seconds."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)):
        seconds = int(value)
    else:
        m = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", str(value))
        if not m:
            raise InvalidInput(f"invalid duration {value!r}: use 30s, 30m, 2h, 1d or seconds")
        seconds = int(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    if seconds <= 0:
        raise InvalidInput(f"invalid duration {value!r}: must be positive")
    return seconds


def workspace(value: str | None) -> tuple[str, str | None]:
    """Parse ``scratch``, ``worktree``, ``worktree:<path>``, ``dir:<absolute path>`` or
    ``path:<name>`` (a named path configured on the board: ``("path", name)``)."""
    if not value or value == "scratch":
        return "scratch", None
    if value == "worktree":
        return "worktree", None
    kind, _, path = value.partition(":")
    if kind == "path" and PROFILE_RE.match(path):
        return "path", path
    if kind not in ("dir", "worktree") or not path:
        raise InvalidInput(
            f"invalid workspace {value!r}: use scratch, worktree, worktree:<path>, dir:<absolute path> "
            "or path:<name> (a named path of the board)"
        )
    if not os.path.isabs(path):
        raise InvalidInput(
            f"workspace path {path!r} is relative: give an absolute path (relative paths would "
            "resolve against the dispatcher's directory)"
        )
    norm = os.path.normpath(path)
    if ".." in path.split(os.sep):
        raise InvalidInput(f"workspace path {path!r} contains '..': give a plain absolute path")
    return kind, norm


_BAD_REF_CHARS = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")
BRANCH_MAX = 200


def branch_problem(name: str) -> str | None:
    """Why ``name`` cannot be a task branch (None when it can): git's rules for a branch name
    (``git check-ref-format --branch``) plus agentboard's own: no leading ``-`` (an option) or
    ``+`` (a forced push), not ``HEAD`` nor a full ref, no part starting with ``.``, no control,
    format or bidirectional characters, at most :data:`BRANCH_MAX` characters."""
    if not name:
        return "a branch name cannot be empty"
    if len(name) > BRANCH_MAX:
        return f"a branch name has at most {BRANCH_MAX} characters"
    if name[0] in "-+":
        return f"a branch name cannot start with {name[0]!r}"
    if name in ("HEAD", "@") or name.startswith("refs/"):
        return f"{name!r} is not a branch name"
    if _BAD_REF_CHARS.search(name) or any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Zs") for c in name):
        return "a branch name cannot hold spaces, control or format characters, or any of ~ ^ : ? * [ \\"
    if ".." in name or "@{" in name or "//" in name:
        return "a branch name cannot hold '..', '@{' or '//'"
    if name.startswith("/") or name.endswith(("/", ".", ".lock")):
        return "a branch name cannot start with '/' nor end with '/', '.' or '.lock'"
    if any(part.startswith(".") or part.endswith(".lock") for part in name.split("/")):
        return "no part of a branch name may start with '.' or end with '.lock'"
    return None


def branch_name(value: str) -> str:
    """A task branch, checked (:func:`branch_problem`; raises ``InvalidInput`` saying why)."""
    value = str(value).strip()
    why = branch_problem(value)
    if why:
        raise InvalidInput(f"invalid branch {value!r}: {why} (e.g. feature/login-form)")
    return value


def priority(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"invalid priority {value!r}: give an integer") from None


def attachment_name(value: str) -> str:
    """A plain, printable file name: no folders, no ``..``, not hidden, nothing invisible
    (:func:`visible`). Anything else is refused, not rewritten."""
    if not isinstance(value, str):
        raise InvalidInput(f"invalid attachment name {value!r}: give a plain file name")
    visible(value, "attachment name")
    name = (value or "").strip()
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\x00" in name:
        raise InvalidInput(f"invalid attachment name {value!r}: give a plain file name without folders")
    if name.startswith("."):
        raise InvalidInput(f"invalid attachment name {value!r}: hidden file names are refused")
    if len(name.encode("utf-8")) > 255:
        raise InvalidInput(f"invalid attachment name {value!r}: longer than 255 bytes")
    return name


#: the longest model name a task or profile names
MODEL_NAME_MAX = 200


def model_name(value: str | None) -> str | None:
    """A model name for an agent CLI's ``--model`` (None or empty: none). One word of at most
    200 printable characters."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if len(value) > MODEL_NAME_MAX or any(c.isspace() or not c.isprintable() for c in value):
        raise InvalidInput(f"invalid model {value[:60]!r}: a model name is one word of at most "
                           f"{MODEL_NAME_MAX} printable characters (e.g. claude-sonnet-4-5, openai/gpt-5)")
    return value


#: the keys a run's usage report may hold: tokens in and out, dollars
USAGE_KEYS = ("input_tokens", "output_tokens", "cost_usd")
#: the largest number a usage report may hold (tokens, dollars): exact as a JSON number
USAGE_MAX = 2**53


def usage(value: dict[str, Any] | None) -> dict[str, int | float | None]:
    """A run's usage report checked, the one check of every surface (the worker verbs, REST, MCP,
    ``.board/result.json``): each of :data:`USAGE_KEYS` a finite number >= 0 (a negative cost
    would give a budget back, an infinite one spend it for good) or absent, and no other key (an
    unknown one, ``total_cost_usd`` say, would be dropped and the run count $0 against every
    budget). ``InvalidInput`` with one line naming the key; else ``{key: number or None}``."""
    value = value or {}
    if not isinstance(value, dict):
        raise InvalidInput(f"usage must be a JSON object with {', '.join(USAGE_KEYS)}, got {type(value).__name__}")
    unknown = [str(k) for k in value if k not in USAGE_KEYS]
    if unknown:
        raise InvalidInput(f"usage has an unknown key {unknown[0][:60]!r}: the accepted keys are "
                           f"{', '.join(USAGE_KEYS)}")
    out: dict[str, int | float | None] = {}
    for key in USAGE_KEYS:
        v = value.get(key)
        if v is None:
            out[key] = None
            continue
        try:
            if isinstance(v, bool):
                raise TypeError
            num = int(v) if key != "cost_usd" else float(v)
        except (TypeError, ValueError, OverflowError):
            raise InvalidInput(f"usage.{key} must be a finite number >= 0, got {v!r}") from None
        if (isinstance(num, float) and not math.isfinite(num)) or num < 0:
            raise InvalidInput(f"usage.{key} must be a finite number >= 0, got {v!r}")
        if num > USAGE_MAX:
            raise InvalidInput(f"usage.{key} is {v!r}; the largest is {USAGE_MAX}")
        out[key] = num
    return out
