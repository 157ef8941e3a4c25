"""Task verbs: create, release, edit, assign, block, unblock, archive, restore, reopen, set_status.

Three modules: ``creation`` (create), ``moves`` (the status verbs) and ``edits`` (assign, edit,
update, bulk); ``kernel.tasks.X`` names them all.
"""

from __future__ import annotations

from .creation import NewTask, create, create_in, create_task
from .edits import assign, bulk, edit, update
from .moves import (
    archive,
    archive_in,
    block,
    block_in,
    block_reason,
    expect_status,
    refuse_integration,
    release,
    release_in,
    reopen,
    restore,
    set_status,
    unblock,
    unblock_in,
)

__all__ = [
    "NewTask", "archive_in", "block_in", "block_reason", "release_in", "unblock_in", "archive", "assign", "block", "bulk", "create", "create_in", "create_task", "edit",
    "expect_status",
    "refuse_integration", "release", "reopen", "restore", "set_status", "unblock", "update",
]
