"""fewer bytes written per closed run on PostgreSQL: the rollup columns a close adds to, side by side

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-02

- ``run_rollups`` (PostgreSQL only): the table is rebuilt with its columns in a new physical
  order; what it holds, its key and its ``fillfactor`` (50) stay. An update whose new row stays
  on its page (the rollups' upserts, HOT since 0021) writes to the WAL only the bytes from the
  first to the last that changed; the columns a closed run adds to (runs, first attempts,
  done, started, its duration) now come last but the histograms, and the two histograms are
  interleaved (``d0, c0, d1, c1, ...``), so a close changes one short stretch of the row, not
  most of its 75 columns. Readers name the columns; SQLite keeps its order (it writes whole
  pages either way).
"""

from __future__ import annotations

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

_KEYS = "board VARCHAR(64) NOT NULL, day INTEGER NOT NULL, profile TEXT NOT NULL, model TEXT NOT NULL"
_FAILURES = ("verify_failed", "crashed", "timed_out", "stale", "spawn_failed", "protocol_violation",
             "rate_limited", "reclaimed", "gave_up", "blocked", "other")
_BUCKETS = 24
#: the order of migration 0018 (then ``shard``, added at the end by 0021)
_OLD = ("runs", "firsts", "first_ok", "verified_total", "verified_pass", "reviewed", "approved", "done",
        "started", "input_tokens", "output_tokens", "cost_usd", "duration_s",
        *(f"f_{c}" for c in _FAILURES), *(f"d{i}" for i in range(_BUCKETS)), *(f"c{i}" for i in range(_BUCKETS)))
#: rarely changed first (reviews, failures, verification, usage), then what every close adds to,
#: then the two histograms interleaved, lowest buckets first
_NEW = ("reviewed", "approved", *(f"f_{c}" for c in _FAILURES), "verified_total", "verified_pass",
        "input_tokens", "output_tokens", "cost_usd", "firsts", "first_ok", "started", "runs", "done",
        "duration_s", *(x for i in range(_BUCKETS) for x in (f"d{i}", f"c{i}")))
assert sorted(_OLD) == sorted(_NEW)


def _rebuild(counts: tuple[str, ...], shard_first: bool) -> None:
    cols = ", ".join(f"{c} {'DOUBLE PRECISION' if c in ('cost_usd', 'duration_s') else 'BIGINT'} NOT NULL DEFAULT 0"
                     for c in counts)
    shard = "shard SMALLINT NOT NULL DEFAULT 0"
    body = f"{_KEYS}, {shard}, {cols}" if shard_first else f"{_KEYS}, {cols}, {shard}"
    names = ", ".join(("board", "day", "profile", "model", "shard", *counts))
    op.execute(f"CREATE TABLE run_rollups_0023 ({body}) WITH (fillfactor = 50)")
    op.execute(f"INSERT INTO run_rollups_0023 ({names}) SELECT {names} FROM run_rollups")
    op.execute("DROP TABLE run_rollups")
    op.execute("ALTER TABLE run_rollups_0023 RENAME TO run_rollups")
    op.execute("ALTER TABLE run_rollups ADD CONSTRAINT run_rollups_pkey PRIMARY KEY (board, day, profile, model, shard)")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _rebuild(_NEW, shard_first=True)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _rebuild(_OLD, shard_first=False)
