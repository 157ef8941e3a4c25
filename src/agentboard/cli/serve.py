"""`serve`: the REST API, the event WebSocket, the dashboard and the dispatcher in one process."""

from __future__ import annotations

import os
import sys

import click

from . import common
from .common import handle_errors

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
@handle_errors
def serve(host: str | None, port: int | None, no_dispatch: bool, log_level: str) -> None:
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
    explicit = host is not None
    address = host if host is not None else settings.api_host
    if not is_loopback(address) and not explicit:
        raise InvalidInput(
            f"the configured address {address} is not loopback; binding to it needs `--host {address}` explicitly")
    port = settings.api_port if port is None else port
    try:
        sock = bind(address, port)
    except OSError as exc:
        raise Unavailable(f"cannot listen on {address}:{port}: {exc.strerror or exc}") from None
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

    app = create_app(settings, db, dispatcher=dispatcher)
    if not is_loopback(address):
        click.echo(f"warning: listening on {address}, reachable from other machines; every route still "
                   "needs a token, but traffic is plain HTTP (put TLS in front of it)", err=True)
    click.echo(f"agentboard {url} (dispatcher {'off' if no_dispatch else 'on'}, database {db.dialect})")
    click.echo(f"open this URL to log in: {url}/login?token={token}")
    sys.stdout.flush()
    record(settings.home, url)  # dispatchers on this home hand this API to their workers
    from agentboard.notify.notifier import start_notifier

    notifier = start_notifier(db, settings)
    try:
        serve_forever(app, sock, log_level=log_level, on_shutdown=lambda: forget(settings.home))
    finally:
        forget(settings.home)
        if notifier is not None:
            notifier.stop()
