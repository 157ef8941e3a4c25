"""LLM access: one question, one answer, from an OpenAI-compatible endpoint or an agent CLI.

Two backends, chosen per use (:data:`USES`) from the settings:

- **endpoint** — any OpenAI-compatible chat-completions server (``llm_base_url`` +
  ``llm_model``, ``llm_api_key``), through the official ``openai`` SDK: its timeouts, its
  retries with backoff on 429 / 5xx / lost connections (``llm_max_retries``), its typed
  responses. Usage comes from the response (``usage.prompt_tokens`` / ``completion_tokens``;
  cost only when the server reports one, as OpenRouter's ``usage.cost``).
- **command** — ``llm_command``, e.g. ``claude -p --output-format json`` or
  ``codex exec --json -``: split like a shell would (no shell runs it), the prompt on stdin, the
  answer on stdout, the board's ``AGENTBOARD_*`` variables left out of its environment. Claude Code's JSON result envelope and Codex's JSONL events are read by
  :func:`agentboard.agentcli.outcome_of` (the same reading as a worker's log); any other
  output is the answer as plain text. The command runs in its own session; at the timeout its
  whole process group is killed.

A ``[llm.<use>]`` table in ``config.toml`` overrides ``model``, ``command``, ``base_url`` or
``timeout`` for one use; a ``command`` there makes that use run the command, a ``model`` or
``base_url`` there makes it use the endpoint.

Nothing configured, or a backend that cannot answer, is :class:`Unavailable` with the reason:
no feature ever invents an answer.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import LLM_USES, Settings, redact
from ..domain import worker_env
from ..domain.errors import InvalidInput, Unavailable

if TYPE_CHECKING:
    from ..store.engine import Database

#: what the board asks an LLM for (each may have its own ``[llm.<use>]`` table)
USES: tuple[str, ...] = LLM_USES

_PLACEHOLDER_KEY = "not-needed"  # local servers (Ollama, vLLM, llama.cpp) accept any key
_TAIL = 300


@dataclass(frozen=True)
class Answer:
    """What the LLM said and what it cost."""

    text: str
    backend: str  # "endpoint" or "command"
    model: str | None
    usage: dict[str, float] | None  # input_tokens, output_tokens, cost_usd (each when reported)
    latency_s: float


@dataclass(frozen=True)
class Backend:
    """The resolved configuration of one use: which backend, and with what."""

    kind: str  # "endpoint", "command" or "none"
    base_url: str | None = None
    api_key: str | None = None
    model: str | None = None
    command: str | None = None
    timeout: float = 120.0
    #: why nothing usable is configured (kind "none" or an incomplete endpoint)
    missing: str | None = None


def _check_use(use: str) -> None:
    if use not in USES:
        raise InvalidInput(f"unknown LLM use {use!r}: use one of {', '.join(USES)}")


def resolve(settings: Settings, use: str) -> Backend:
    """The backend ``use`` runs on: its ``[llm.<use>]`` overrides over the global settings.

    A ``command`` in the use's table picks the command backend; a ``model`` or ``base_url``
    there picks the endpoint; otherwise the endpoint when ``llm_base_url`` is set, else the
    command when ``llm_command`` is set."""
    _check_use(use)
    over = settings.llm_uses.get(use, {})
    timeout = float(over.get("timeout") or settings.llm_timeout)
    base_url = over.get("base_url") or settings.llm_base_url
    model = over.get("model") or settings.llm_model
    command = over.get("command") or settings.llm_command
    if over.get("command"):
        kind = "command"
    elif over.get("model") or over.get("base_url") or settings.llm_base_url:
        kind = "endpoint"
    elif settings.llm_command:
        kind = "command"
    else:
        return Backend("none", timeout=timeout, missing=(
            "no LLM is configured: set AGENTBOARD_LLM_BASE_URL and AGENTBOARD_LLM_MODEL (an "
            "OpenAI-compatible endpoint) or AGENTBOARD_LLM_COMMAND (an agent CLI such as "
            "`claude -p --output-format json`)"))
    if kind == "command":
        return Backend("command", command=command, timeout=timeout)
    missing = None
    if not base_url:
        missing = (f"the {use} has a model ({model}) but no endpoint: set AGENTBOARD_LLM_BASE_URL "
                   "(e.g. https://api.openai.com/v1)")
    elif not model:
        missing = f"AGENTBOARD_LLM_BASE_URL is set ({redact(base_url)}) but no model: set AGENTBOARD_LLM_MODEL"
    return Backend("endpoint", base_url=base_url, api_key=settings.llm_api_key, model=model,
                   timeout=timeout, missing=missing)


def availability(settings: Settings, use: str) -> tuple[bool, str]:
    """Whether ``use`` can ask an LLM, without any request: ``(True, "endpoint <url> model
    <m>")`` / ``(True, "command <cmd>")``, or ``(False, "<why it is unavailable>")``."""
    backend = resolve(settings, use)
    if backend.missing:
        return False, backend.missing
    if backend.kind == "command":
        try:
            _argv(backend.command or "")
        except Unavailable as exc:
            return False, _reason(exc)
        return True, f"command {redact(backend.command)}"
    return True, f"endpoint {redact(backend.base_url)} model {backend.model}"


def ask(settings: Settings, use: str, prompt: str, *, system: str | None = None,
        timeout: float | None = None) -> Answer:
    """Ask the LLM configured for ``use``; :class:`Unavailable` ("unavailable: <reason>") when
    nothing is configured (no request is made), when the backend cannot be reached after its
    retries, times out, or answers something that is not an answer."""
    backend = resolve(settings, use)
    if backend.missing:
        raise Unavailable("unavailable: " + backend.missing)
    limit = float(timeout) if timeout is not None else backend.timeout
    if backend.kind == "command":
        return _ask_command(backend, prompt, system, limit)
    return _ask_endpoint(settings, backend, prompt, system, limit)


def _reason(exc: Unavailable) -> str:
    text = exc.message
    return text[len("unavailable: "):] if text.startswith("unavailable: ") else text


# -- the endpoint --------------------------------------------------------------------------------


def _ask_endpoint(settings: Settings, backend: Backend, prompt: str, system: str | None,
                  timeout: float) -> Answer:
    import openai

    where = redact(backend.base_url) or ""
    client = _client(backend.base_url or "", backend.api_key or _PLACEHOLDER_KEY, settings.llm_max_retries)
    messages: list[Any] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": prompt})
    attempts = settings.llm_max_retries + 1
    started = time.monotonic()
    try:
        resp = client.chat.completions.create(model=backend.model or "", messages=messages,
                                              timeout=timeout)
    except openai.APITimeoutError:
        raise Unavailable(f"unavailable: the LLM at {where} timed out after {timeout:g}s "
                          f"({attempts} attempt(s))") from None
    except openai.APIConnectionError as exc:
        raise Unavailable(f"unavailable: cannot reach the LLM at {where} after {attempts} "
                          f"attempt(s): {exc.__cause__ or exc}") from None
    except openai.APIStatusError as exc:
        detail = _clip(_error_text(exc))
        if exc.status_code == 429 or exc.status_code >= 500:
            raise Unavailable(f"unavailable: the LLM at {where} answered {exc.status_code} after "
                              f"{attempts} attempt(s): {detail}") from None
        raise Unavailable(f"unavailable: the LLM at {where} refused the request "
                          f"({exc.status_code}): {detail}") from None
    except openai.APIResponseValidationError as exc:
        raise Unavailable(f"unavailable: the LLM at {where} answered something that is not a chat "
                          f"completion: {_clip(str(exc))}") from None
    except openai.OpenAIError as exc:
        raise Unavailable(f"unavailable: the LLM at {where} failed: {_clip(str(exc))}") from None
    except ValueError as exc:  # a 200 whose body is not JSON
        raise Unavailable(f"unavailable: the LLM at {where} answered something that is not a chat "
                          f"completion (not JSON: {exc})") from None
    latency = time.monotonic() - started
    choices = getattr(resp, "choices", None)
    if not isinstance(choices, list):  # a body that is not JSON comes back as text
        raise Unavailable(f"unavailable: the LLM at {where} answered something that is not a chat "
                          f"completion: {_clip(str(resp))!r}")
    if not choices or not choices[0].message or not choices[0].message.content:
        reason = choices[0].finish_reason if choices else "no choices"
        raise Unavailable(f"unavailable: the LLM at {where} returned an empty answer ({reason})")
    return Answer(text=choices[0].message.content, backend="endpoint",
                  model=getattr(resp, "model", None) or backend.model,
                  usage=_endpoint_usage(getattr(resp, "usage", None)), latency_s=latency)


_clients: dict[tuple[str, str, int], Any] = {}
_clients_lock = threading.Lock()


def _client(base_url: str, api_key: str, max_retries: int) -> Any:
    """The SDK client of an endpoint, kept for the process: its connection pool is reused (a new
    client costs a TLS context and a connection, tens of milliseconds)."""
    import openai

    key = (base_url, api_key, max_retries)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            if len(_clients) >= 16:  # settings changed many times over: start afresh
                for old in _clients.values():
                    old.close()
                _clients.clear()
            client = _clients[key] = openai.OpenAI(base_url=base_url, api_key=api_key,
                                                   max_retries=max_retries)
        return client


def _error_text(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        return json.dumps(body)
    return str(getattr(exc, "message", None) or exc)


def _endpoint_usage(usage: Any) -> dict[str, float] | None:
    if usage is None:
        return None
    out: dict[str, float] = {}
    for key, attr in (("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens")):
        value = getattr(usage, attr, None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = value
    extra = getattr(usage, "model_extra", None) or {}
    for name in ("cost", "cost_usd", "total_cost"):
        value = extra.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out["cost_usd"] = float(value)
            break
    return out or None


# -- the command ---------------------------------------------------------------------------------


def _argv(command: str) -> list[str]:
    from ..agentcli import AdapterError, resolve_executable

    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise Unavailable(f"unavailable: cannot parse the LLM command {command!r}: {exc}") from None
    if not argv:
        raise Unavailable("unavailable: the LLM command is empty")
    try:
        argv[0] = resolve_executable(argv[0], os.environ.get("PATH"), Path.cwd())
    except AdapterError as exc:
        raise Unavailable(f"unavailable: the LLM {exc}") from None
    return argv


def _ask_command(backend: Backend, prompt: str, system: str | None, timeout: float) -> Answer:
    command = backend.command or ""
    argv = _argv(command)
    name = Path(argv[0]).name
    text = f"{system}\n\n{prompt}" if system else prompt
    started = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, env=command_env())
    except OSError as exc:
        raise Unavailable(f"unavailable: cannot start the LLM command {name}: {exc.strerror or exc}") from None
    try:
        out, err = proc.communicate(text.encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise Unavailable(f"unavailable: the LLM command {name} timed out after {timeout:g}s "
                          "(its process group was killed)") from None
    except BaseException:
        kill_group(proc)
        raise
    latency = time.monotonic() - started
    stdout = out.decode("utf-8", "replace")
    stderr = err.decode("utf-8", "replace").strip()
    answer = read_command_output(stdout)
    if answer.error or proc.returncode != 0:
        why = answer.error or stderr or answer.text.strip() or "no output"
        raise Unavailable(f"unavailable: the LLM command {name} exited with {proc.returncode}: "
                          f"{_clip(why, tail=True)}")
    if not answer.text.strip():
        raise Unavailable(f"unavailable: the LLM command {name} printed no answer"
                          + (f" ({_clip(stderr, tail=True)})" if stderr else ""))
    return Answer(text=answer.text, backend="command", model=answer.model, usage=answer.usage,
                  latency_s=latency)


def command_env() -> dict[str, str]:
    """The environment of the LLM command: the board's, without its own ``AGENTBOARD_*``
    variables (the database URL, tokens, the home), which an agent CLI never needs; its
    credentials (``ANTHROPIC_API_KEY``, ``HOME`` and its login files, ...) stay."""
    return {k: v for k, v in os.environ.items() if not worker_env.is_ours(k)}


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the process group of ``proc`` (started in its own session) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=5)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        proc.kill()


@dataclass(frozen=True)
class CommandOutput:
    """What an agent CLI printed: the answer, usage, the model, or the error it reported."""

    text: str
    usage: dict[str, float] | None = None
    model: str | None = None
    error: str | None = None


_CODEX_EVENTS = {"thread.started", "turn.started", "turn.completed", "turn.failed", "item.completed"}


def read_command_output(stdout: str) -> CommandOutput:
    """Claude Code's ``--output-format json`` result (or its stream / array of messages),
    Codex's ``exec --json`` events, or else the plain text of ``stdout``."""
    from ..agentcli import json_events, outcome_of

    events = json_events(stdout)
    whole = stdout.strip()
    if whole.startswith(("{", "[")) and not events:
        try:
            value = json.loads(whole)
        except ValueError:
            value = None
        if isinstance(value, dict):
            events = [value]
        elif isinstance(value, list):
            events = [v for v in value if isinstance(v, dict)]
    kinds = {str(ev.get("type")) for ev in events}
    if "result" in kinds:
        outcome = outcome_of("claude", events)
        result = next(ev for ev in reversed(events) if ev.get("type") == "result")
        model_usage = result.get("modelUsage")
        model = next(iter(model_usage), None) if isinstance(model_usage, dict) and model_usage else None
        if model is None:
            model = next((ev.get("model") for ev in events if ev.get("type") == "system"
                          and isinstance(ev.get("model"), str)), None)
        error = (outcome.final_text or "the agent reported an error") if outcome.is_error else None
        return CommandOutput(outcome.final_text or "", _usage(outcome), model, error)
    if kinds & _CODEX_EVENTS:
        outcome = outcome_of("codex", events)
        error = None
        if outcome.is_error:
            failed: dict[str, Any] = next((ev for ev in reversed(events) if ev.get("type") in ("turn.failed", "error")), {})
            inner = failed.get("error")
            error = str(inner.get("message") if isinstance(inner, dict) else failed.get("message") or failed)
        return CommandOutput(outcome.final_text or "", _usage(outcome), None, error)
    return CommandOutput(stdout.strip())


def _usage(outcome: Any) -> dict[str, float] | None:
    out: dict[str, float] = {}
    for key in ("input_tokens", "output_tokens", "cost_usd"):
        value = getattr(outcome, key, None)
        if value is not None:
            out[key] = value
    return out or None


def _clip(text: str, limit: int = _TAIL, *, tail: bool = False) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return "…" + text[-limit:] if tail else text[:limit] + "…"


# -- reading JSON out of a reply -----------------------------------------------------------------

_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.S)


def parse_json(text: str) -> Any:
    """The JSON value in an LLM's reply, tolerating prose and ``` fences around it; raises
    :class:`InvalidInput` ("the LLM answered no JSON: <first 200 chars>") otherwise."""
    stripped = text.strip()
    candidates = [stripped] + [m.group(1).strip() for m in _FENCE.finditer(text)]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(text, i)
            except ValueError:
                continue
            return value
    raise InvalidInput(f"the LLM answered no JSON: {stripped[:200]}")


# -- recording what it cost ----------------------------------------------------------------------


def record_usage(db: Database, board: str, task_id: str, use: str, answer: Answer, *, on_run: bool = False) -> None:
    """An ``llm_used`` event on the task (the use, backend, model, usage and latency), its usage
    counted against the task's budgets in the same transaction — unless ``on_run``: the call is a
    run's (an LLM review run), whose usage is counted when the run closes."""
    from ..kernel import budgets, runs

    payload: dict[str, Any] = {"use": use, "backend": answer.backend, "model": answer.model,
                               "latency_s": round(answer.latency_s, 3)}
    payload.update(answer.usage or {})
    if on_run:
        runs.record_telemetry(db, board, task_id, "llm_used", payload, actor=f"llm:{use}")
    else:
        budgets.record_llm_usage(db, board, task_id, payload, actor=f"llm:{use}")


__all__ = ["USES", "Answer", "Backend", "CommandOutput", "ask", "availability", "command_env", "kill_group",
           "parse_json", "read_command_output", "record_usage", "resolve"]
