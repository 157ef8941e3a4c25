"""Configuration: the one module that reads ``config.toml`` and ``AGENTBOARD_*`` variables.

Resolution, highest first: an explicit argument, the ``AGENTBOARD_<KEY>`` environment variable,
``<home>/config.toml``, the default below. Over 600 lines on purpose: every setting with its
default and bounds, and the one reading of both sources that checks them, kept together.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
import socket
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .domain.errors import InvalidInput

log = logging.getLogger(__name__)

#: environment variables of the dispatcher that never reach a worker (shell-style patterns, matched
#: case-insensitively); ``AGENTBOARD_*`` is always removed as well
WORKER_ENV_DENY: tuple[str, ...] = (
    "*SECRET*", "*PASSWORD*", "*PASSWD*", "*TOKEN*", "*_KEY", "*API_KEY*", "*ACCESS_KEY*",
    "*PRIVATE_KEY*", "*CREDENTIAL*", "*DATABASE_URL*", "PGPASSFILE", "PGSERVICEFILE",
    "*PASS*", "*_PWD", "*_AUTH", "*_AUTH_*", "AUTH_*", "*COOKIE*", "*_SK", "*DSN*",
)
#: the credentials the known agent adapters need (Claude Code, Codex, Gemini CLI, opencode):
#: passed although they match a deny pattern
WORKER_ENV_ALLOW: tuple[str, ...] = (
    "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY",
    "CODEX_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS",
    "OPENROUTER_API_KEY", "OPENCODE_API_KEY",
)


#: what the board asks an LLM for; each may have its own ``[llm.<use>]`` table in config.toml
#: what the board asks an LLM for (the supervisor is an agent profile the dispatcher starts, not an LLM call)
LLM_USES: tuple[str, ...] = ("specifier", "decomposer", "reviewer", "describer")
#: the keys an ``[llm.<use>]`` table may set
LLM_USE_KEYS: tuple[str, ...] = ("model", "command", "base_url", "timeout")


@dataclass
class Settings:
    home: Path
    database_url: str | None = None
    default_assignee: str | None = None
    failure_limit: int = 2
    #: a task sent back by review this many times is blocked ``gave_up`` instead of going back again
    rework_limit: int = 5
    max_parallel: int = 8
    dispatch_interval: float = 60.0
    claim_ttl: int = 900
    stale_timeout: int = 4 * 3600
    stale_heartbeat: int = 3600
    spawn_grace: float = 2.0
    rate_limit_cooldown: int = 300
    #: an agent CLI that lost its service's network is retried after this many seconds, doubled
    #: per failure in a row up to ``network_retry_max``; past ``network_retry_limit`` failures in
    #: a row they count towards the task's failure limit
    network_retry_base: float = 30.0
    network_retry_max: float = 1800.0
    network_retry_limit: int = 6
    min_free_memory_mb: int = 256
    attachment_max_bytes: int = 25 * 1024 * 1024
    #: what one worker run may post: comments on its task, tasks proposed into triage (``kernel.run_limits``)
    run_comment_limit: int = 200
    run_proposal_limit: int = 25
    #: what an orchestrator's run may create: tasks per run, and how deep delegation goes (a task
    #: created by a run of a task created by a run of …; ``kernel.run_limits.delegate``)
    run_create_limit: int = 100
    delegation_depth_limit: int = 3
    log_max_bytes: int = 10 * 1024 * 1024
    event_retention_days: int = 30
    log_retention_days: int = 30
    host_id: str = field(default_factory=socket.gethostname)
    wiki_context: bool = True
    board_repair: bool = True
    #: the dispatcher decomposes triage tasks with the LLM by itself (a board's setting wins)
    auto_decompose: bool = False
    #: the most triage tasks auto mode hands the LLM per pass
    auto_decompose_per_pass: int = 3
    verify: bool = True
    #: each worker, and its checks, in a cgroup of its own where the host has them, so what it
    #: takes out of its process group ends with its run (``agentboard.cgroups``)
    worker_cgroups: bool = True
    #: who reviews a task entering review when its board does not say: auto, off, llm (or on),
    #: heuristic, profile:NAME (see ``protocol.review.choose_reviewer``)
    reviewer_agent: str = "auto"
    review_diff_max: int = 60_000
    repair_deadline: int = 300
    verify_timeout: int = 600
    #: seconds a task waits before the next attempt after each failed verification in a row
    #: (the task gives up after one more failure than there are delays, or at its failure limit
    #: when that is higher)
    verify_backoff: tuple[float, ...] = (10.0, 30.0, 90.0)
    #: each back-off delay is stretched or shrunk at random by up to this fraction
    verify_backoff_jitter: float = 0.2
    wiki_deadline: float = 8.0
    #: a schedule's occurrence found due later than this many seconds counts as missed (its
    #: schedule's ``missed`` policy decides: skip, or fire once)
    schedule_grace: int = 600
    #: a worker that exits without completing or blocking is started once more with a reminder
    #: before its exit counts as a crash or a protocol violation
    stop_nudge: bool = True
    #: an OpenAI-compatible chat-completions endpoint (``https://api.openai.com/v1``, a local
    #: Ollama / vLLM server, ...) and the model to ask there
    llm_base_url: str | None = None
    llm_api_key: str | None = None
    llm_model: str | None = None
    #: or an agent CLI that reads a prompt on stdin and answers on stdout
    #: (``claude -p --output-format json``, ``codex exec --json -``)
    llm_command: str | None = None
    #: seconds one LLM request (or one run of the command) may take
    llm_timeout: float = 120.0
    #: retries (with backoff) of an endpoint request that failed with 429, 5xx or no connection
    llm_max_retries: int = 2
    #: per-use overrides from ``config.toml`` tables ``[llm.<use>]`` (``model``, ``command``,
    #: ``base_url``, ``timeout``), keyed by use (:data:`LLM_USES`)
    llm_uses: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the supervisor: how often the sweep looks for what the wake hooks missed (seconds)
    supervisor_sweep: float = 1800.0
    #: a task blocked longer than this (seconds) is stuck: the sweep wakes the supervisor
    stuck_after: int = 4 * 3600
    #: a task sent back by review or verification more than this many times gets a replan proposal
    replan_after: int = 3
    #: a task blocked more than this many times within ``block_loop_window`` goes to triage
    block_loop_limit: int = 3
    block_loop_window: int = 24 * 3600
    #: a wake the supervisor took but did not mark handled expires after this many seconds
    supervisor_wake_ttl: int = 3600
    api_host: str = "127.0.0.1"
    api_port: int = 8420
    max_request_bytes: int = 1024 * 1024
    #: an OpenTelemetry collector's OTLP/HTTP address (``http://collector:4318``): spans of API
    #: requests, kernel verbs, dispatcher passes and worker runs go there (``agentboard[otel]``);
    #: unset, the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` is used when given
    otel_endpoint: str | None = None
    #: ``GET /metrics`` also accepts this bearer token (for a scraper; an admin token always works)
    metrics_token: str | None = None
    #: observe the per-process metrics (off: only the board-wide ones, read at scrape time)
    metrics: bool = True
    #: the log of ``serve`` and ``dispatcher``: text, json (one object per line), or auto (json
    #: when stderr is not a terminal)
    log_format: str = "text"
    #: the OS user that workers of ``isolation = user`` profiles run as (``agentboard init --worker-user``)
    worker_user: str | None = None
    worker_env_deny: tuple[str, ...] = WORKER_ENV_DENY
    worker_env_allow: tuple[str, ...] = WORKER_ENV_ALLOW
    #: Apprise URLs subscribed to every task a person creates (not the tasks agents create)
    notify_default: tuple[str, ...] = ()
    #: hosts (names, IP addresses or networks such as 10.0.0.0/8) that notification targets
    #: subscribed by members may reach besides public addresses
    notify_allow_hosts: tuple[str, ...] = ()
    #: the dashboard's address as people reach it; messages link to the task there
    public_url: str | None = None
    #: run the notifier inside ``serve`` and ``dispatcher``
    notify: bool = True
    #: seconds between the notifier's looks at the event log (it also wakes on local commits)
    notify_poll_interval: float = 2.0
    #: a failed delivery is retried after base * 2^(failures-1) seconds, at most ``retry_max``
    notify_retry_base: float = 5.0
    notify_retry_max: float = 900.0
    #: consecutive failures after which a target is parked (kept, not retried, shown with its error)
    notify_park_after: int = 8
    #: seconds an event waits so a burst goes out as one message
    notify_batch_delay: float = 2.0
    #: after a message, further events wait this long and go out together as one digest
    notify_digest_window: float = 60.0
    #: more pending events than this go out as one digest instead of one message each
    notify_digest_after: int = 3
    #: seconds a notifier holds a subscription while it delivers (another host takes over after)
    notify_lease: float = 120.0
    #: seconds one delivery may take
    notify_timeout: float = 15.0
    #: the board from chat (``docs/chat.md``), one ``[chat.<platform>]`` table each in config.toml
    #: (or ``AGENTBOARD_CHAT_<PLATFORM>_<KEY>``): a platform is on when its verifying secret is set
    #: Slack: the app's signing secret, its bot token (``xoxb-…``) and its Web API address
    chat_slack_signing_secret: str | None = None
    chat_slack_bot_token: str | None = None
    chat_slack_api_base: str = "https://slack.com/api"
    #: Discord: the application's public key (hex), id, bot token and its API address
    chat_discord_public_key: str | None = None
    chat_discord_application_id: str | None = None
    chat_discord_bot_token: str | None = None
    chat_discord_api_base: str = "https://discord.com/api/v10"
    #: Telegram: the web hook's secret token (``setWebhook``'s ``secret_token``), the bot token
    #: and the Bot API's address
    chat_telegram_secret_token: str | None = None
    chat_telegram_bot_token: str | None = None
    chat_telegram_api_base: str = "https://api.telegram.org"
    #: PostgreSQL connections of one process: kept open (``pg_pool_size``), opened on top when
    #: busy (``pg_max_overflow``), and how long a verb waits for one before it fails with a
    #: clear error (docs/deploy.md gives the sizes per process kind)
    pg_pool_size: int = 12
    pg_max_overflow: int = 52
    pg_pool_timeout: float = 10.0
    #: seconds to reach the server before a verb fails saying it is unreachable
    pg_connect_timeout: float = 5.0
    #: per kernel session: the longest one statement may run, the longest it waits for a row
    #: lock, and the longest it may sit idle inside a transaction (seconds)
    pg_statement_timeout: float = 30.0
    pg_lock_timeout: float = 10.0
    pg_idle_timeout: float = 60.0
    #: the server is reached through a pooler in transaction mode (PgBouncer ``pool_mode =
    #: transaction``): no prepared statements, no ``options`` startup parameter (the session
    #: limits above are then the server's or the pooler's to set); docs/deploy.md
    pg_transaction_pooler: bool = False
    #: where the dispatcher's wake-up listener connects (``LISTEN`` needs a session of its own:
    #: the server itself, or a pooler in session mode); default the database URL
    pg_listen_url: str | None = None
    #: seconds a worker whose budget is spent may go on after its heartbeat was told to stop
    budget_stop_grace: float = 30.0
    #: diagnostics: a task blocked longer than this many hours is reported
    blocked_alert_hours: float = 24.0
    #: diagnostics: ready tasks waiting this many minutes on a profile at its concurrency cap
    cap_wait_minutes: float = 30.0
    #: diagnostics: a SQLite write-ahead log larger than this many MB is reported
    wal_alert_mb: int = 256
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def db_path(self) -> Path:
        return self.home / "agentboard.db"

    @property
    def url(self) -> str:
        return self.database_url or f"sqlite:///{self.db_path}"

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")


_BOOL_TRUE = {"1", "true", "yes", "on"}
_BOOL_FALSE = {"0", "false", "no", "off", ""}


def expected(name: str, kind: Any) -> str:
    """What setting ``name`` (of type ``kind``) must be, as the one-line message of a refused
    value says it: its range or its choices where it has them, else its type."""
    from .domain.notify_targets import SETTINGS_EXPECTED
    from .domain.settings_schema import GLOBAL_EXPECTED

    if name in GLOBAL_EXPECTED:
        return GLOBAL_EXPECTED[name]
    if name in URL_SETTINGS:
        return URL_SETTINGS[name][1]
    if name == "host_id":
        return "this host's name, not empty and with no spaces around it (default: the host name)"
    if name in SETTINGS_EXPECTED:
        return SETTINGS_EXPECTED[name]
    text_kind = str(kind)
    if name in RANGES:
        low, high = (_number(v) for v in RANGES[name])
        if text_kind.startswith("tuple"):
            return f"a list of numbers, each from {low} to {high} (a TOML array, or comma-separated)"
        return f"a {'whole number' if kind is int or text_kind == 'int' else 'number'} from {low} to {high}"
    if name in CHOICES:
        return " or ".join(", ".join(CHOICES[name]).rsplit(", ", 1))
    if kind is bool or text_kind == "bool":
        return "true or false (also 1/0, yes/no, on/off)"
    if kind is int or text_kind == "int":
        return "a whole number"
    if kind is float or text_kind == "float":
        return "a number"
    if text_kind.startswith("tuple[float"):
        return "a list of numbers (a TOML array, or comma-separated)"
    return "text"


_DAY = 86_400
_LONG = 100_000_000  # seconds: about three years, the kernel's longest time-to-live
#: the range of every number setting (both ends included; a list's items each); what a verb
#: checks again (the notifier's, ``max_parallel``, ``failure_limit``) is not repeated here
RANGES: dict[str, tuple[float, float]] = {
    "api_port": (1, 65535),
    "dispatch_interval": (0.1, _DAY), "claim_ttl": (1, _LONG), "stale_timeout": (1, _LONG),
    "stale_heartbeat": (1, _LONG), "spawn_grace": (0, _DAY), "rate_limit_cooldown": (0, _LONG),
    "network_retry_base": (0, _LONG), "network_retry_max": (0, _LONG), "network_retry_limit": (1, 1_000_000),
    "min_free_memory_mb": (0, 1 << 30), "attachment_max_bytes": (1, 1 << 40),
    "run_comment_limit": (0, 1_000_000_000), "run_proposal_limit": (0, 1_000_000_000),
    "run_create_limit": (0, 1_000_000_000), "delegation_depth_limit": (0, 1_000_000),
    "log_max_bytes": (0, 1 << 50), "event_retention_days": (0, 1_000_000), "log_retention_days": (0, 1_000_000),
    "auto_decompose_per_pass": (1, 10_000), "review_diff_max": (1, 1 << 30), "repair_deadline": (1, _LONG),
    "verify_timeout": (1, _LONG), "verify_backoff": (0, _LONG), "verify_backoff_jitter": (0, 1),
    "wiki_deadline": (0.1, _DAY), "schedule_grace": (0, _LONG), "llm_timeout": (0.1, _DAY),
    "llm_max_retries": (0, 100), "supervisor_sweep": (1, _LONG), "stuck_after": (1, _LONG),
    "replan_after": (1, 1_000_000), "rework_limit": (1, 1_000_000), "block_loop_limit": (1, 1_000_000), "block_loop_window": (1, _LONG),
    "supervisor_wake_ttl": (1, _LONG), "max_request_bytes": (1024, 1 << 40),
    "pg_pool_size": (1, 10_000), "pg_max_overflow": (0, 10_000), "pg_pool_timeout": (0.1, _DAY),
    "pg_connect_timeout": (0.1, _DAY), "pg_statement_timeout": (0, _LONG), "pg_lock_timeout": (0, _LONG),
    "pg_idle_timeout": (0, _LONG), "budget_stop_grace": (0, _LONG), "blocked_alert_hours": (0, 1_000_000),
    "cap_wait_minutes": (0, 1_000_000), "wal_alert_mb": (0, 1 << 30),
}
#: text settings with a fixed set of values
CHOICES: dict[str, tuple[str, ...]] = {"log_format": ("text", "json", "auto")}

#: the URL schemes of a PostgreSQL database agentboard opens (psycopg 3 is its driver)
PG_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
PG_URL_EXPECTED = "postgresql://USER@HOST[:PORT]/NAME (or postgresql+psycopg://…; PORT a number from 1 to 65535)"
DATABASE_URL_EXPECTED = PG_URL_EXPECTED + " or sqlite:///PATH"
#: the database URL settings: whether a SQLite URL is one, and what the URL must be
URL_SETTINGS: dict[str, tuple[bool, str]] = {
    "database_url": (True, DATABASE_URL_EXPECTED),
    "pg_listen_url": (False, PG_URL_EXPECTED),
}


def database_url_ok(url: str, *, sqlite: bool = True, sqlite_path: bool = True) -> bool:
    """Whether ``url`` is a database URL agentboard opens: PostgreSQL (:data:`PG_SCHEMES`; a
    port, when given, a number from 1 to 65535) or, with ``sqlite``, ``sqlite:///PATH``
    (``sqlite_path=False``: any ``sqlite://`` URL, an in-memory one too). Read without SQLAlchemy:
    every command checks its settings."""
    from urllib.parse import urlsplit

    scheme, sep, rest = url.partition("://")
    if not sep:
        return False
    if scheme == "sqlite":
        path = rest.split("?", 1)[0]
        return sqlite and (not sqlite_path or (path.startswith("/") and path[1:] not in ("", ":memory:")))
    if scheme not in PG_SCHEMES:
        return False
    try:
        port = urlsplit(url).port
    except ValueError:  # not a number, or out of range
        return False
    return port is None or port >= 1


#: user:password@ of a URL whose password holds what ends the host part (``/``, ``?``, ``#``)
_URL_USERINFO = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*):.*@")


def shown_url(url: str) -> str:
    """``url`` as a message may show it: :func:`redact`, and the password of a URL too malformed
    for it (a ``/`` in the password) masked all the same."""
    return _URL_USERINFO.sub(lambda m: m.group("head") + ":" + _MASK + "@", redact(url) or url)


def _number(value: float) -> str:
    return f"{int(value):,}".replace(",", "") if float(value).is_integer() else str(value)


def _coerce(name: str, kind: Any, raw: Any, source: str | None = None) -> Any:
    if raw is None:
        return None
    text_kind = str(kind)
    where = f" (from {source})" if source else ""
    try:
        if kind is bool or text_kind == "bool":
            if isinstance(raw, bool):
                return raw
            value = str(raw).strip().lower()
            if value in _BOOL_TRUE:
                return True
            if value in _BOOL_FALSE:
                return False
            raise ValueError(raw)
        if kind is int or text_kind == "int":
            # what ``int()`` takes but the environment's form of it is refused: true/false (a
            # bool is an int in Python), a number with a fraction (3.5 would be cut to 3; 3.0
            # too, as AGENTBOARD_<NAME>=3.0 is), a table or an array
            if isinstance(raw, bool | float | dict | list | tuple):
                raise ValueError(raw)
            return _in_range(name, int(raw))
        if kind is float or text_kind == "float":
            if isinstance(raw, bool | dict | list | tuple):
                raise ValueError(raw)
            return _in_range(name, float(raw))
        if text_kind.startswith("tuple"):  # a list: a TOML array, or comma-separated text
            if isinstance(raw, dict):
                raise ValueError(raw)
            items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
            if any(isinstance(i, bool | dict | list | tuple) for i in items):
                raise ValueError(raw)
            if text_kind.startswith("tuple[float"):
                return tuple(_in_range(name, float(str(i).strip())) for i in items if str(i).strip())
            return tuple(str(i).strip() for i in items if str(i).strip())
        if isinstance(raw, dict | list | tuple):  # a table or an array where text is expected
            raise ValueError(raw)
        if name in CHOICES:
            if str(raw).strip().lower() not in CHOICES[name]:
                raise ValueError(raw)
            return str(raw).strip().lower()
        if name in URL_SETTINGS and raw != "" and not database_url_ok(str(raw), sqlite=URL_SETTINGS[name][0]):
            raise ValueError(raw)
        if name == "host_id" and (not str(raw).strip() or str(raw) != str(raw).strip()):
            raise ValueError(raw)  # runs and pass marks would name no host
    except (ValueError, OverflowError, TypeError):
        shown_raw = shown_url(raw) if name in URL_SETTINGS and isinstance(raw, str) else raw
        raise InvalidInput(f"invalid setting {name}={shown_raw!r}: must be {expected(name, kind)}{where}") from None
    return raw


def setting_value(name: str, raw: Any, source: str) -> Any:
    """``raw`` given for setting ``name`` elsewhere than in config.toml or the environment (a
    command-line option, ``source``), checked as they are: its type, its range, the same message
    (``InvalidInput``)."""
    kind = next(f.type for f in fields(Settings) if f.name == name)
    return _coerce(name, kind, raw, source)


def _in_range(name: str, number: float) -> Any:
    """``number`` if it is within setting ``name``'s range (:data:`RANGES`); a float must be finite."""
    if number != number or number in (float("inf"), float("-inf")):
        raise ValueError(number)
    if name in RANGES and not RANGES[name][0] <= number <= RANGES[name][1]:
        raise ValueError(number)
    return number


def _check_home(root: Path, *, given: bool) -> None:
    """``InvalidInput`` when the home ``root`` cannot be one: a file, or under a file."""
    named = "AGENTBOARD_HOME" if not given and os.environ.get("AGENTBOARD_HOME") else "the home"
    for p in (root, *root.parents):
        if p.exists():
            if not p.is_dir():
                where = "is a file" if p == root else f"is under {p}, which is a file"
                raise InvalidInput(f"{named} {root} {where}, not a folder; point AGENTBOARD_HOME at a folder "
                                   "(or at a path where one can be made)")
            return


def default_home() -> Path:
    env = os.environ.get("AGENTBOARD_HOME")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".agentboard"


#: ``agentboard dispatcher``'s pool when ``pg_pool_size`` / ``pg_max_overflow`` are not set: with
#: its wake-up listener and its notifier's connection, 8 per host, so 8 hosts fit in 64
DISPATCHER_POOL = (5, 1)


def is_set(settings: Settings, name: str) -> bool:
    """Whether setting ``name`` was given (``AGENTBOARD_<NAME>`` or the home's ``config.toml``)."""
    if os.environ.get("AGENTBOARD_" + name.upper()) is not None:
        return True
    cfg = Path(settings.home) / "config.toml"
    try:
        data = tomllib.loads(cfg.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return False
    return name in dict(data.get("agentboard", data))


#: the tables ``config.toml`` holds besides its settings (``[llm.<use>]``, ``[chat.<platform>]``;
#: and ``[agentboard]``, which holds the settings when the file has it)
SECTIONS: tuple[str, ...] = ("llm", "chat")


def _unknown_table(cfg: Path, name: str, table: dict[str, Any], *, in_agentboard: bool) -> None:
    """Warn that table ``[name]`` of ``cfg`` is no section, so nothing reads it; where its keys
    are settings (``[dispatcher] max_parallel = 2``), say where they go: at the top level, or in
    the file's ``[agentboard]`` table (``in_agentboard``)."""
    known = {f.name for f in fields(Settings)} - {"home", "extra", "llm_uses"}
    settings = [key for key in table if key in known]
    if settings:
        one = len(settings) == 1
        subject = f"{settings[0]} is a" if one else f"{', '.join(settings)} are"
        noun, it = ("setting", "it") if one else ("settings", "them")
        which = (f"{subject} {noun} of [agentboard]: put {it} there" if in_agentboard
                 else f"{subject} top-level {noun}: put {it} above any [section]")
    else:
        near = difflib.get_close_matches(name.rsplit(".", 1)[-1], SECTIONS, n=1)
        which = ((f"did you mean [{near[0]}.…]? " if near else "") + "its sections are "
                 + ("[agentboard], " if in_agentboard else "")
                 + "[llm.<use>] and [chat.<platform>]; docs/settings.md lists the settings")
    log.warning("%s: [%s] is not a section of config.toml and is ignored; %s", cfg, name, which)


def load(home: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Read settings for ``home`` (default ``AGENTBOARD_HOME`` or ``~/.agentboard``)."""
    root = Path(home).expanduser() if home else default_home()
    root = root.absolute()
    _check_home(root, given=bool(home))
    file_values: dict[str, Any] = {}
    in_agentboard = False  # the file holds its settings in an [agentboard] table
    cfg = root / "config.toml"
    if cfg.exists():
        try:
            data = tomllib.loads(cfg.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise InvalidInput(f"{cfg}: {exc}") from None
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{cfg} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
        except OSError as exc:
            raise InvalidInput(f"cannot read {cfg}: {exc.strerror or exc}") from None
        in_agentboard = "agentboard" in data
        if in_agentboard and not isinstance(data["agentboard"], dict):
            raise InvalidInput(f"{cfg}: agentboard must be a table ([agentboard] with the settings under it)")
        file_values = dict(data.get("agentboard", data))
        for table in SECTIONS:
            if in_agentboard and isinstance(data.get(table), dict):
                file_values.setdefault(table, data[table])
        if in_agentboard:  # what is outside that table is read by no setting
            for key, value in data.items():
                if isinstance(value, dict) and key not in ("agentboard", *SECTIONS):
                    _unknown_table(cfg, key, value, in_agentboard=True)
                elif not isinstance(value, dict):
                    log.warning("%s: %r is outside the [agentboard] table and is ignored; put it in [agentboard]",
                                cfg, key)
        file_values.update(chat_tables(file_values.pop("chat", None), cfg))
    settings = Settings(home=root)
    sources: dict[str, str] = {}
    extra: dict[str, Any] = {}
    known = {f.name for f in fields(Settings)}
    for key, value in file_values.items():
        if isinstance(value, dict):
            extra[key] = value
            if key not in known and key not in SECTIONS:  # [dispatcher] max_parallel = 2 would set nothing
                _unknown_table(cfg, "agentboard." * in_agentboard + key, value, in_agentboard=in_agentboard)
        elif key not in known:  # a typo would otherwise leave the setting meant at its default
            near = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            log.warning("%s: unknown setting %r%s is ignored; docs/settings.md lists the settings", cfg, key, hint)
    for f in fields(Settings):
        if f.name in ("home", "extra", "llm_uses"):
            continue
        raw: Any = None
        source: str | None = None
        env = os.environ.get("AGENTBOARD_" + f.name.upper())
        if f.name in overrides and overrides[f.name] is not None:
            raw = overrides[f.name]
        elif env is not None:
            raw, source = env, "AGENTBOARD_" + f.name.upper()
        elif f.name in file_values:
            raw, source = file_values[f.name], str(cfg)
        elif f.name == "llm_api_key":
            raw = os.environ.get("OPENAI_API_KEY")
        if raw is not None:
            setattr(settings, f.name, _coerce(f.name, f.type, raw, source))
            if source:
                sources[f.name] = source
    settings.llm_uses = llm_uses(extra.pop("llm", {}), cfg)
    settings.extra = extra
    from .domain.notify_targets import SETTINGS_EXPECTED, check_settings
    from .domain.settings_schema import global_settings  # pydantic loads only when settings do

    try:
        check_settings({k: getattr(settings, k) for k in SETTINGS_EXPECTED})
        global_settings({"max_parallel": settings.max_parallel, "failure_limit": settings.failure_limit,
                         "default_assignee": settings.default_assignee or None,
                         "reviewer_agent": settings.reviewer_agent})
    except InvalidInput as exc:  # say where the refused value came from
        key = str(exc).removeprefix("invalid setting ").split("=", 1)[0]
        if key in sources:
            raise InvalidInput(f"{exc} (from {sources[key]})") from None
        raise
    return settings


#: the chat platforms and the keys each ``[chat.<platform>]`` table may set
CHAT_KEYS: dict[str, tuple[str, ...]] = {
    "slack": ("signing_secret", "bot_token", "api_base"),
    "discord": ("public_key", "application_id", "bot_token", "api_base"),
    "telegram": ("secret_token", "bot_token", "api_base"),
}


def chat_tables(table: Any, source: Path) -> dict[str, Any]:
    """The ``[chat.<platform>]`` tables of ``config.toml`` as the flat settings they set
    (``[chat.slack] signing_secret`` is ``chat_slack_signing_secret``): known platforms and keys
    only."""
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise InvalidInput(f"{source}: chat must be tables ([chat.slack], [chat.discord], [chat.telegram])")
    out: dict[str, Any] = {}
    for platform, values in table.items():
        if platform not in CHAT_KEYS:
            raise InvalidInput(f"{source}: unknown chat platform [chat.{platform}]; use one of {', '.join(CHAT_KEYS)}")
        if not isinstance(values, dict):
            raise InvalidInput(f"{source}: [chat.{platform}] must be a table (bot_token = ..., ...)")
        bad = sorted(set(values) - set(CHAT_KEYS[platform]))
        if bad:
            raise InvalidInput(f"{source}: [chat.{platform}] has unknown keys {bad}; "
                               f"use {', '.join(CHAT_KEYS[platform])}")
        for key, value in values.items():
            out[f"chat_{platform}_{key}"] = str(value)
    return out


def llm_uses(table: dict[str, Any], source: Path) -> dict[str, dict[str, Any]]:
    """The ``[llm.<use>]`` tables of ``config.toml``, checked: known uses and keys only, text
    values (``timeout`` a positive number)."""
    out: dict[str, dict[str, Any]] = {}
    for use, values in table.items():
        if use == "supervisor":
            raise InvalidInput(f"{source}: [llm.supervisor]: the supervisor is an agent profile, not an LLM call: "
                               "give it its model on that profile and enable it with `agentboard supervisor enable "
                               "PROFILE` (docs/supervisor.md); remove the table")
        if use not in LLM_USES:
            raise InvalidInput(f"{source}: unknown LLM use [llm.{use}]; use one of {', '.join(LLM_USES)}")
        if not isinstance(values, dict):
            raise InvalidInput(f"{source}: [llm.{use}] must be a table (model = ..., command = ...)")
        bad = sorted(set(values) - set(LLM_USE_KEYS))
        if bad:
            raise InvalidInput(f"{source}: [llm.{use}] has unknown keys {bad}; use {', '.join(LLM_USE_KEYS)}")
        checked: dict[str, Any] = {}
        for key, value in values.items():
            if key == "timeout":
                checked[key] = _coerce(f"llm.{use}.timeout", float, value)
                if checked[key] <= 0:
                    raise InvalidInput(f"{source}: [llm.{use}] timeout must be positive")
            elif not isinstance(value, str) or not value.strip():
                raise InvalidInput(f"{source}: [llm.{use}] {key} must be non-empty text")
            else:
                checked[key] = value.strip()
        out[use] = checked
    return out


#: settings whose value is a secret: shown as ``***`` when set
SECRET_SETTINGS = ("llm_api_key", "notify_default", "metrics_token", "chat_slack_signing_secret",
                   "chat_slack_bot_token", "chat_discord_bot_token", "chat_telegram_secret_token",
                   "chat_telegram_bot_token")
_MASK = "***"
# user:password@ in a URL (the user stays, the password goes)
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*):[^/?#\s]*@")
# password=, token=, key=, secret= (and names containing them: api_key, sslpassword, ...) as a
# query parameter or a libpq keyword
_SECRET_VALUE = re.compile(
    r"(?P<head>(?:^|[?&;\s])[A-Za-z0-9_.-]*(?:pass(?:word|wd)?|pwd|token|key|secret)[A-Za-z0-9_.-]*=)"
    r"(?P<value>'[^']*'|[^&;#\s]*)", re.IGNORECASE)


def redact(text: str | None) -> str | None:
    """``text`` (a database URL, an LLM base URL, any configuration value) with the credentials
    it embeds masked: ``postgresql://user:***@host/db``, ``?password=***``, ``token=***``.

    The one redaction used wherever configuration is shown (``GET /api/config``, ``init``, the
    dispatcher's start line)."""
    if not text:
        return text
    out = _URL_PASSWORD.sub(lambda m: m.group("head") + ":" + _MASK + "@", text)
    return _SECRET_VALUE.sub(lambda m: m.group("head") + (_MASK if m.group("value") else ""), out)


#: settings that say where the home and the database are: not shown to a worker (``docs/security.md``)
PLACES = frozenset({"home", "database_url"})


def shown(settings: Settings, *, places: bool = True) -> dict[str, Any]:
    """The settings as they may be shown to any caller: secrets masked, credentials in URLs
    and query strings redacted (:func:`redact`), ``extra`` left out; ``places=False`` (a
    worker's run token) leaves out where the home and the database are (:data:`PLACES`)."""
    out: dict[str, Any] = {}
    for f in fields(settings):
        if f.name == "extra" or (not places and f.name in PLACES):
            continue
        value = getattr(settings, f.name)
        if f.name in SECRET_SETTINGS:
            value = _MASK if value else None
        elif isinstance(value, str):
            value = redact(value)
        elif isinstance(value, Path):
            value = str(value)
        elif f.name == "llm_uses":
            value = {use: {k: redact(v) if isinstance(v, str) else v for k, v in table.items()}
                     for use, table in value.items()}
        out[f.name] = value
    return out


