"""Wiki pages: a board's shared knowledge, injected into worker workspaces.

Pages are ``published`` (handed to workers) or ``draft`` (proposed by a worker's result, waiting
for a person to publish or discard). Every change appends a ``wiki_changed`` board event.
Relevance is full-text ranking: SQLite FTS5 (``wiki_fts``, kept in sync by triggers from
migration 0002) or PostgreSQL ``to_tsvector``/``ts_rank``.
"""

from __future__ import annotations

import re
import time
import unicodedata
from typing import Any, cast

from ..domain import model
from ..domain.errors import Conflict, InvalidInput, NotFound
from ..store.engine import Database, Row, Tx
from .common import require_board
from .rows import WikiPage

STATUSES = ("published", "draft")
SLUG_RE = model.WIKI_SLUG_RE
WIKI_BODY_MAX = model.BODY_MAX
MAX_TERMS = 40
_WORD_RE = re.compile(r"[^\W_]{3,}", re.UNICODE)
_STOP = frozenset(
    "the and for with that this from into your you are was were will would should could have has had not "
    "but all any can its our their them then than there these those what when where which who why how "
    "about after before also each make made more most must need only other over some such use used using "
    "very via what task tasks please".split()
)
PG_TSV = "to_tsvector('english', coalesce(title, '') || ' ' || coalesce(body, ''))"
PAGE_COLUMNS = "id, board, slug, title, body, status, source_task_id, author, created_at, updated_at"


def slug(value: str) -> str:
    text = (value or "").strip().lower()
    if not SLUG_RE.match(text):
        raise InvalidInput(
            f"invalid wiki slug {value!r}: use 1-128 lowercase letters, digits, '-' or '_', "
            "starting with a letter or digit"
        )
    return text


def slugify(text: str, fallback: str = "page") -> str:
    out = re.sub(r"[^a-z0-9]+", "-", (text or "").lower()).strip("-")[:80].strip("-")
    return out or fallback


def _escaped(ch: str) -> str:
    o = ord(ch)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def title_of(markdown: str, fallback: str = "Untitled") -> str:
    """The first heading (or first non-empty line) of a markdown text, as a title: each
    character the title rule refuses (``model.visible``: controls such as ESC, bidirectional
    overrides, zero-width ones) written as a visible escape (``\\x1b``, ``\\u202e``), so a
    worker's proposal holds the same kind of title ``wiki add`` accepts."""
    for line in (markdown or "").splitlines():
        line = line.strip()
        if line:
            text = "".join(_escaped(ch) if unicodedata.category(ch) in model.INVISIBLE_CATEGORIES else ch
                           for ch in line.lstrip("#").strip())
            return model.visible(text[: model.TITLE_MAX].strip() or fallback, "wiki proposal title")
    return fallback


def _get(tx: Tx, board: str, page_slug: str) -> Row:
    row = tx.one(f"SELECT {PAGE_COLUMNS} FROM wiki_pages WHERE board = :b AND slug = :s",
                 {"b": board, "s": page_slug})
    if row is None:
        raise NotFound(f"no wiki page {page_slug!r} on board {board!r}; see `agentboard wiki list`")
    return row


def get(db: Database, board: str, page_slug: str) -> WikiPage:
    return cast(WikiPage, db.read(_get, board, slug(page_slug)))


def list_pages(db: Database, board: str, *, status: str | None = None) -> list[WikiPage]:
    if status is not None and status not in STATUSES:
        raise InvalidInput(f"unknown wiki status {status!r}: use published or draft")
    sql = (f"SELECT {PAGE_COLUMNS} FROM wiki_pages WHERE board = :b"
           + (" AND status = :st" if status else "") + " ORDER BY slug")
    return cast("list[WikiPage]", db.read(lambda tx: tx.all(sql, {"b": board, "st": status})))


def _event(tx: Tx, board: str, action: str, page: Row, actor: str | None, **extra: Any) -> None:
    payload = {"action": action, "slug": page["slug"], "title": page["title"], "status": page["status"]}
    payload.update(extra)
    tx.event(board, page.get("source_task_id"), "wiki_changed", payload, actor=actor)


def _insert(tx: Tx, board: str, page_slug: str, title: str, body: str, status: str,
            source_task_id: str | None, author: str | None, replace: bool, actor: str | None) -> Row:
    require_board(tx, board)
    now = time.time()
    existing = tx.one("SELECT id, status FROM wiki_pages WHERE board = :b AND slug = :s",
                      {"b": board, "s": page_slug})
    if existing is not None:
        if not replace:
            raise Conflict(f"wiki page {page_slug!r} already exists on board {board!r}; "
                           "pass --replace to overwrite it")
        tx.execute(
            "UPDATE wiki_pages SET title = :t, body = :body, status = :st, author = :a, updated_at = :now "
            "WHERE id = :id",
            {"t": title, "body": body, "st": status, "a": author, "now": now, "id": existing["id"]},
        )
        action = "updated"
    else:
        tx.execute(
            "INSERT INTO wiki_pages (board, slug, title, body, status, source_task_id, author, created_at, updated_at) "
            "VALUES (:b, :s, :t, :body, :st, :src, :a, :now, :now2)",
            {"b": board, "s": page_slug, "t": title, "body": body, "st": status, "src": source_task_id,
             "a": author, "now": now, "now2": now},
        )
        action = "added"
    page = _get(tx, board, page_slug)
    _event(tx, board, action, page, actor)
    return page


def add(
    db: Database, board: str, page_slug: str, *, title: str, body: str, publish: bool = False,
    source_task_id: str | None = None, author: str | None = None, replace: bool = False,
    actor: str | None = None,
) -> Row:
    """Add a page (``draft`` unless ``publish``); an existing slug is refused unless ``replace``."""
    page_slug = slug(page_slug)
    title = model.title(title)
    body = model.body(body, WIKI_BODY_MAX, "wiki page")
    if not body.strip():
        raise InvalidInput("wiki page body is empty")
    status = "published" if publish else "draft"
    return db.write(_insert, board, page_slug, title, body, status, source_task_id,
                    author or actor, replace, actor)


def _propose(tx: Tx, board: str, content: str, note: str | None, task_id: str | None,
             author: str | None) -> Row:
    title = title_of(content)
    base = slugify(title)[:100]
    if task_id:
        base = f"{base}-{task_id.replace('_', '-')}"[:120]
    candidate, n = base, 1
    while tx.one("SELECT 1 FROM wiki_pages WHERE board = :b AND slug = :s", {"b": board, "s": candidate}):
        n += 1
        candidate = f"{base}-{n}"
    page = _insert(tx, board, candidate, title, content, "draft", task_id, author, False, author)
    if note:
        tx.event(board, task_id, "wiki_changed",
                 {"action": "proposal_note", "slug": candidate, "note": note[:2000]}, actor=author)
    return page


def propose(db: Database, board: str, content_md: str, *, note: str | None = None,
            task_id: str | None = None, author: str | None = None) -> Row:
    """A worker's ``wikiProposals`` item becomes a draft page for a person to publish or discard.
    Its title is its first heading with what ``wiki add`` refuses in a title escaped
    (:func:`title_of`): not refused, so the run's other results still count."""
    content = model.body(content_md, WIKI_BODY_MAX, "wiki proposal")
    if not content.strip():
        raise InvalidInput("wiki proposal contentMd is empty")
    return db.write(_propose, board, content, note, task_id, author)


def _publish(tx: Tx, board: str, page_slug: str, actor: str | None) -> Row:
    page = _get(tx, board, page_slug)
    if page["status"] == "published":
        raise Conflict(f"wiki page {page_slug!r} is already published")
    tx.execute("UPDATE wiki_pages SET status = 'published', updated_at = :now WHERE id = :id",
               {"now": time.time(), "id": page["id"]})
    page["status"] = "published"
    _event(tx, board, "published", page, actor)
    return page


def publish(db: Database, board: str, page_slug: str, *, actor: str | None = None) -> Row:
    return db.write(_publish, board, slug(page_slug), actor)


def _discard(tx: Tx, board: str, page_slug: str, actor: str | None) -> Row:
    page = _get(tx, board, page_slug)
    tx.execute("DELETE FROM wiki_pages WHERE id = :id", {"id": page["id"]})
    _event(tx, board, "discarded", page, actor)
    return page


def discard(db: Database, board: str, page_slug: str, *, actor: str | None = None) -> Row:
    """Remove a page (a rejected draft, or a published page nobody should read any more)."""
    return db.write(_discard, board, slug(page_slug), actor)


# -- relevance ----------------------------------------------------------------------------------


def terms(text: str, limit: int = MAX_TERMS) -> list[str]:
    """Distinct search words of a text (letters/digits, 3+ characters, common words dropped)."""
    out: dict[str, None] = {}
    for word in _WORD_RE.findall((text or "").lower()):
        if word not in _STOP and not word.isdigit():
            out.setdefault(word, None)
        if len(out) >= limit:
            break
    return list(out)


def _relevant(tx: Tx, board: str, words: list[str], limit: int, timeout_ms: int | None) -> list[Row]:
    if tx.db.dialect == "postgresql":
        if timeout_ms:
            tx.execute(f"SET LOCAL statement_timeout = {int(timeout_ms)}")
        query = " | ".join(words)
        return tx.all(
            f"SELECT {PAGE_COLUMNS}, ts_rank({PG_TSV}, q) AS rank "
            "FROM wiki_pages, to_tsquery('english', :q) AS q "
            f"WHERE board = :b AND status = 'published' AND {PG_TSV} @@ q "
            "ORDER BY rank DESC, slug LIMIT :n",
            {"q": query, "b": board, "n": limit},
        )
    query = " OR ".join(f'"{w}"' for w in words)
    return tx.all(
        "SELECT p.id, p.board, p.slug, p.title, p.body, p.status, p.source_task_id, p.author, "
        "p.created_at, p.updated_at, bm25(wiki_fts) AS rank "
        "FROM wiki_fts JOIN wiki_pages p ON p.id = wiki_fts.rowid "
        "WHERE wiki_fts MATCH :q AND p.board = :b AND p.status = 'published' "
        "ORDER BY rank, p.slug LIMIT :n",
        {"q": query, "b": board, "n": limit},
    )


def relevant(db: Database, board: str, text: str, *, limit: int = 5,
             timeout_seconds: float | None = None) -> list[Row]:
    """Up to ``limit`` published pages ranked by full-text relevance to ``text``."""
    words = terms(text)
    if not words or limit <= 0:
        return []
    timeout_ms = int(timeout_seconds * 1000) if timeout_seconds else None
    return db.read(_relevant, board, words, limit, timeout_ms)


__all__ = ["add", "discard", "get", "list_pages", "propose", "publish", "relevant", "slug", "terms"]
