"""Diagnostics tests use the dispatcher fixtures and the CLI runner of the other suites."""

from cli.conftest import cli, cli_home  # noqa: F401
from dispatch.conftest import dispatcher  # noqa: F401
