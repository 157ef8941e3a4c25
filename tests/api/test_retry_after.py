"""The API tells a caller to send a request again (``Retry-After``) only when doing so is safe:
the request failed before reaching the database, and nothing was committed meanwhile."""

from __future__ import annotations

from pathlib import Path

import agentboard
from agentboard.api.errors import WRITES_AT, retry_after
from agentboard.domain.errors import Unavailable
from agentboard.kernel import tasks


def test_a_request_that_never_reached_the_database_may_be_sent_again(tmp_path: Path) -> None:
    ab = agentboard.connect(str(tmp_path / "home"))
    db = ab.db
    scope = {"state": {WRITES_AT: db.writes}}
    assert retry_after(Unavailable("cannot open the database", retry_after=1.0), db, scope) == "1"
    assert retry_after(Unavailable("cannot open the database", retry_after=2.5), db, scope) == "3"
    # a failure that may have been applied, or one with no request scope: not sent again
    assert retry_after(Unavailable("lost the connection to the database server"), db, scope) is None
    assert retry_after(Unavailable("x", retry_after=1.0), db, {}) is None
    ab.close()


def test_once_a_write_was_committed_during_the_request_it_is_not_sent_again(tmp_path: Path) -> None:
    ab = agentboard.connect(str(tmp_path / "home"))
    db = ab.db
    scope = {"state": {WRITES_AT: db.writes}}
    tasks.create(db, "default", "committed before the failure")
    assert retry_after(Unavailable("cannot open the database", retry_after=1.0), db, scope) is None
    ab.close()
