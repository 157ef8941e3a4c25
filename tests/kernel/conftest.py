"""Kernel-suite fixtures: the project's ``home``, started from the suite's migrated template
(``tests/conftest.py``) so each test does not pay for running the migrations.
``test_migrations.py`` covers new databases.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from testenv import copy_template, point_home_at


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_template: Path) -> Path:
    h = tmp_path / "home"
    point_home_at(h, monkeypatch)
    return copy_template(sqlite_template, h)
