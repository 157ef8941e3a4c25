"""`serve`: the REST API, the event WebSocket, the dashboard and the dispatcher in one process."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import click

from . import common
from .common import handle_errors

if TYPE_CHECKING:
    from agentboard.api.serve import BackgroundServer
    from agentboard.config import Settings
    from agentboard.store.engine import Database

TOKEN_FILE = "serve-token"


def _saved_token(path: os.PathLike[str]) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def _save_token(path: os.PathLike[str], token: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token + "\n")
    os.chmod(path, 0o600)


@click.command("serve", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default=None, help="address to bind (default 127.0.0.1; anything else must be given here)")
@click.option("--port", type=click.IntRange(0, 65535), default=None,
              help="port (default 8420; 0 picks a free one)")
@click.option("--no-dispatch", is_flag=True, help="do not run the dispatcher in this process")
@click.option("--log-level", type=click.Choice(["critical", "error", "warning", "info", "debug"]),
              default="warning", show_default=True)
@click.option("--log-format", type=click.Choice(["text", "json", "auto"]), default=None,
              help="text, json (one object per line) or auto (json when stderr is not a terminal); "
                   "default: the log_format setting, text")
@click.option("--metrics-bind", default=None, metavar="HOST:PORT",
              help="also serve /metrics, /healthz and /readyz without a token on this address (a scrape network)")
@handle_errors
def serve(host: str | None, port: int | None, no_dispatch: bool, log_level: str, log_format: str | None,
          metrics_bind: str | None) -> None:
    """Serve the dashboard and API; prints a URL that logs the browser in."""
    from agentboard.api import create_app
    from agentboard.api.serve import (
        bind,
        forget,
        is_loopback,
        record,
        run_tokens,
        serve_forever,
        url_for,
    )
    from agentboard.domain.errors import InvalidInput, Unavailable
    from agentboard.kernel import tokens

    settings = common.settings()
    db = common.db()
    observed = observe_setup(settings, log_format, log_level.upper())
    chosen = {"format": observed.pop("format")}
    explicit = host is not None
    address = host if host is not None else settings.api_host
    if not is_loopback(address) and not explicit:
        raise InvalidInput(
            f"the configured address {address} is not loopback; binding to it needs `--host {address}` explicitly")
    port = settings.api_port if port is None else port
    try:
        sock = bind(address, port)
    except OSError as exc:
        raise Unavailable(_cannot_listen(settings.home, address, port, exc)) from None
    url = url_for(address, int(sock.getsockname()[1]))

    token_path = settings.home / TOKEN_FILE
    token, created = tokens.ensure_local_admin(db, f"local-admin@{settings.host_id}"[:64],
                                               _saved_token(token_path))
    if created:
        _save_token(token_path, token)

    dispatcher = None
    if not no_dispatch:
        from agentboard.dispatch.dispatcher import Dispatcher

        dispatcher = Dispatcher(db, settings, api_url=url, token_factory=run_tokens(db))
        dispatcher.claim_host()  # another live dispatcher with this host id: one line, nothing touched

    app = create_app(settings, db, dispatcher=dispatcher)
    metrics_server = start_metrics(metrics_bind, settings, db, dispatcher, log_level) if metrics_bind else None
    if not is_loopback(address):
        announce(f"warning: listening on {address}, reachable from other machines; every route still "
                 "needs a token, but traffic is plain HTTP (put TLS in front of it)", chosen)
    click.echo(f"agentboard {url} (dispatcher {'off' if no_dispatch else 'on'}, database {db.dialect})")
    click.echo(f"open this URL to log in: {url}/login?token={token}")
    sys.stdout.flush()
    # one-shot passes on this home hand this API to their workers (unless another live process's is
    # recorded: it stays, and its process removes it when it stops)
    record(settings.home, url)
    from agentboard.notify.notifier import start_notifier

    notifier = start_notifier(db, settings)
    try:
        serve_forever(app, sock, log_level=log_level, on_shutdown=lambda: forget(settings.home), **observed)
    finally:
        forget(settings.home)
        if metrics_server is not None:
            metrics_server.stop()
        if notifier is not None:
            notifier.stop()


def _cannot_listen(home: os.PathLike[str], address: str, port: int, exc: OSError) -> str:
    """Why ``serve`` cannot take ``address:port``, and what to do: this home's server already
    running there (its login link, from the home's saved token), or another program on the port."""
    import errno
    from pathlib import Path

    from agentboard.api.serve import running_api

    what = f"cannot listen on {address}:{port}: {exc.strerror or exc}"
    if exc.errno != errno.EADDRINUSE:
        return what
    url = running_api(Path(home))
    if url is not None:
        token = _saved_token(Path(home) / TOKEN_FILE)
        link = f"{url}/login?token={token}" if token else url
        return f"agentboard serve is already running for this home; open {link} (or stop it first)"
    return f"{what}; another program has that port: choose another with --port PORT (0 picks a free one)"


def observe_setup(settings: Settings, log_format: str | None, level: str) -> dict[str, Any]:
    """The log format and the metrics switch of ``serve`` and ``dispatcher``; returns the
    uvicorn options that keep that logging (and ``format``: the log format chosen)."""
    import logging

    from agentboard.observe import logs, metrics

    metrics.set_enabled(settings.metrics)
    chosen = logs.setup(log_format or settings.log_format, getattr(logging, level), settings.host_id)
    return {"log_config": None, "format": chosen}


def announce(text: str, setup: dict[str, Any]) -> None:
    """A line a process prints on stderr as it starts or stops: a log record when its log is
    JSON (one object per line, as a log shipper reads it), else plain text."""
    import logging

    if setup.get("format") == "json":
        logging.getLogger("agentboard").info(text)
    else:
        click.echo(text, err=True)


def parse_bind(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9100`` for IPv6; ``:9100`` is 127.0.0.1)."""
    from agentboard.domain.errors import InvalidInput

    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise InvalidInput(f"--metrics-bind {text!r}: give HOST:PORT, e.g. 0.0.0.0:9100")
    return host.strip("[]") or "127.0.0.1", int(port)


def start_metrics(bind_to: str, settings: Settings, db: Database, dispatcher: object | None,
                  log_level: str) -> BackgroundServer:
    """Serve ``/metrics``, ``/healthz`` and ``/readyz`` without a token on ``bind_to``."""
    from agentboard.api.routes.health import open_app
    from agentboard.api.serve import BackgroundServer, is_loopback
    from agentboard.domain.errors import Unavailable

    host, port = parse_bind(bind_to)
    try:
        server = BackgroundServer(open_app(settings, db, dispatcher), host, port, log_level=log_level,
                                  log_config=None).start()
    except OSError as exc:
        raise Unavailable(f"cannot listen on {host}:{port} for metrics: {exc.strerror or exc}") from None
    note = "" if is_loopback(host) else " (no token: keep this address on a scrape network)"
    click.echo(f"metrics and health checks at {server.url}/metrics{note}", err=True)
    return server
