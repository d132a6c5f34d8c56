"""API keys read by the thread that asks, from a SQLite file, with no wait (issue 27).

The event loop checks a key on every request; a read through the connection pool means a
hop to a worker thread and back. Where the store is a SQLite file, each thread that asks
(in practice the event loop) reads the key row through a read-only sqlite3 connection of its
own: WAL readers never wait for the record writer, and a file that is busy anyway answers
SQLITE_BUSY at once (busy timeout 0), after which the caller reads on a worker thread. Nothing
is cached: a key revoked by any process (CLI, another replica) stops the next request."""

from __future__ import annotations

import contextlib
import sqlite3
import threading

from sqlalchemy import bindparam, exists, select
from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect
from sqlalchemy.engine import URL

from service.tables import ApiKeyRow, KeyRevocationRow

# Built once: constructing a statement costs more than running it (run on every request).
KEY_QUERY = (select(ApiKeyRow.__table__,
                    exists().where(KeyRevocationRow.key_id == ApiKeyRow.key_id).label("revocation"))
             .where(ApiKeyRow.key_id == bindparam("key_id")))
# The same query, compiled once for the threads' own sqlite3 connections.
_KEY_SQL = str(KEY_QUERY.compile(dialect=sqlite_dialect()))


class LoopKeyReader:
    """The key's row by a sqlite3 connection of the calling thread's own, read-only, no wait."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened: list[sqlite3.Connection] = []
        self._closed = False

    @classmethod
    def for_url(cls, url: URL) -> LoopKeyReader | None:
        """A reader for a SQLite file; None for other databases, memory and URI databases."""
        file = url.database if url.get_backend_name() == "sqlite" and not url.query.get("uri") else None
        return cls(file) if file and file != ":memory:" else None

    def _connection(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA query_only=1")
            with self._lock:
                if self._closed:
                    conn.close()
                    raise sqlite3.ProgrammingError("the store is closed")
                self._opened.append(conn)
            self._local.conn = conn
        return conn

    def read(self, key_id: str) -> dict | None:
        """The key's columns and `revocation`; sqlite3.Error where it cannot be read here (busy, closed)."""
        cursor = self._connection().execute(_KEY_SQL, (key_id,))
        rows = cursor.fetchall()  # all: no read left open
        return dict(zip([c[0] for c in cursor.description], rows[0], strict=True)) if rows else None

    def close(self) -> None:
        """Close every connection (the store is closing: SQLite folds the WAL into the file when
        its last connection closes); later reads raise, and callers read on a worker thread."""
        with self._lock:
            self._closed, opened, self._opened = True, self._opened, []
        for conn in opened:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
