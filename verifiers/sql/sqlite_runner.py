"""Runs *inside* the sandbox (standard library only): builds each evaluation instance as
a private SQLite file and executes queries or data changes on it under guards.

Guards, in depth, on top of the sandbox itself (no network, scratch-only filesystem,
rlimits): the statement was already classified by a real parser on the trusted side;
here a query runs on a connection opened read-only (`mode=ro`) with `query_only`, an
authorizer that allows only reads, no attachable databases, a heap cap, a value-length
cap, and a progress-handler deadline that interrupts the SQLite VM itself (so a runaway
recursive CTE stops burning CPU at the deadline, not when the sandbox is killed). Rows
are fetched in chunks against row and size caps. Each evaluation file is hashed before
and after every statement: a change is reported, never silently used.

A data change (mutation task) runs on a throwaway copy of the instance, with an
authorizer that allows only INSERT/UPDATE/DELETE on ordinary tables, and is reported as
the row-level difference it made to every table.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import sqlite3
import time
from collections import Counter
from typing import Any

SCRATCH = "/tmp/work"
FETCH_CHUNK = 256
PROGRESS_STEPS = 1000

_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}
_WRITE_ACTIONS = {sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE}
# SQL functions that reach outside the database even when the extension loader is off.
_DENIED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds
        self.hit = False

    def __call__(self) -> int:
        # A non-zero return makes SQLite abort the statement with SQLITE_INTERRUPT.
        if time.monotonic() > self.at:
            self.hit = True
            return 1
        return 0


def _authorizer(allow_writes: bool):
    def authorize(action: int, arg1: str | None, arg2: str | None, db: str | None, source: str | None) -> int:
        if action in _READ_ACTIONS:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_FUNCTION:
            return sqlite3.SQLITE_DENY if (arg2 or "").lower() in _DENIED_FUNCTIONS else sqlite3.SQLITE_OK
        if allow_writes and action in _WRITE_ACTIONS and db == "main":
            table = (arg1 or "").lower()
            if not table.startswith("sqlite_") or table == "sqlite_sequence":
                return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY

    return authorize


def _sha(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"b64": base64.b64encode(value).decode()}
    return value


def _size(value: Any) -> int:
    if isinstance(value, str | bytes):
        return len(value) + 4
    return 12


def _classify_error(exc: Exception, deadline: _Deadline) -> dict[str, Any]:
    text = str(exc)
    if deadline.hit or "interrupted" in text:
        return {"ok": False, "kind": "timeout", "error": text}
    lowered = text.lower()
    if "not authorized" in lowered or "readonly" in lowered or "prohibited" in lowered:
        return {"ok": False, "kind": "denied", "error": text}
    if isinstance(exc, MemoryError) or "out of memory" in lowered:
        return {"ok": False, "kind": "resource", "error": text or "out of memory"}
    if "too big" in lowered:
        return {"ok": False, "kind": "resource", "error": text}
    if isinstance(exc, sqlite3.ProgrammingError) and "one statement" in lowered:
        return {"ok": False, "kind": "denied", "error": text}
    return {"ok": False, "kind": "error", "error": text}


def _guard(conn: sqlite3.Connection, cfg: dict[str, Any], allow_writes: bool) -> _Deadline:
    """Tighten a connection before untrusted SQL touches it (order matters: pragmas
    first, then the authorizer that would refuse them)."""
    if not allow_writes:
        conn.execute("PRAGMA query_only = ON")
    conn.execute("PRAGMA trusted_schema = OFF")
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute(f"PRAGMA hard_heap_limit = {int(cfg['heap_mb']) * 1024 * 1024}")
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, int(cfg["max_value_bytes"]))
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, int(cfg["max_sql_bytes"]))
    conn.set_authorizer(_authorizer(allow_writes))
    deadline = _Deadline(float(cfg["timeout_s"]))
    conn.set_progress_handler(deadline, PROGRESS_STEPS)
    return deadline


def build(path: str, schema: str, script: str, cfg: dict[str, Any]) -> str | None:
    """Create one instance file from the schema and the instance's data script."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    deadline = _Deadline(float(cfg["build_timeout_s"]))
    conn.set_progress_handler(deadline, PROGRESS_STEPS)
    try:
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.executescript(schema)
        conn.executescript(script)
        data = conn.serialize()
    except (sqlite3.Error, MemoryError) as exc:
        return f"{'timed out: ' if deadline.hit else ''}{exc}"
    finally:
        conn.close()
    with open(path, "wb") as f:
        f.write(data)
    return None


def run_query(path: str, sql: str, cfg: dict[str, Any]) -> dict[str, Any]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    deadline = _Deadline(float(cfg["timeout_s"]))
    started = time.monotonic()
    try:
        deadline = _guard(conn, cfg, allow_writes=False)
        cursor = conn.execute(sql)
        columns = [d[0] for d in cursor.description or ()]
        rows: list[list[Any]] = []
        size = 0
        max_rows, max_bytes = int(cfg["max_rows"]), int(cfg["max_result_bytes"])
        while True:
            chunk = cursor.fetchmany(FETCH_CHUNK)
            if not chunk:
                break
            for row in chunk:
                size += sum(_size(v) for v in row)
                rows.append([_encode(v) for v in row])
            if len(rows) > max_rows or size > max_bytes:
                return {
                    "ok": False,
                    "kind": "too_large",
                    "error": f"result exceeds the caps ({max_rows} rows, {max_bytes} bytes)",
                    "rows_seen": len(rows),
                }
        return {"ok": True, "columns": columns, "rows": rows, "seconds": time.monotonic() - started}
    except (sqlite3.Error, MemoryError, OverflowError) as exc:
        return _classify_error(exc, deadline)
    finally:
        conn.close()


def _snapshot(path: str) -> dict[str, Any]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        out: dict[str, Any] = {"__schema__": conn.execute("SELECT type, name, sql FROM sqlite_schema").fetchall()}
        for table in tables:
            quoted = '"' + table.replace('"', '""') + '"'
            cursor = conn.execute(f"SELECT * FROM {quoted}")
            out[table] = ([d[0] for d in cursor.description], cursor.fetchall())
        return out
    finally:
        conn.close()


def _hashable(row: tuple[Any, ...]) -> tuple[Any, ...]:
    # NaN != NaN would make an untouched row look changed.
    return tuple("\0nan" if isinstance(v, float) and v != v else v for v in row)


def run_mutation(path: str, sql: str, cfg: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    work = path + ".attempt"
    shutil.copyfile(path, work)
    conn = sqlite3.connect(work, isolation_level=None)
    deadline = _Deadline(float(cfg["timeout_s"]))
    try:
        deadline = _guard(conn, cfg, allow_writes=True)
        conn.execute("BEGIN")
        conn.execute(sql)
        conn.execute("COMMIT")
    except (sqlite3.Error, MemoryError, OverflowError) as exc:
        return _classify_error(exc, deadline)
    finally:
        conn.close()
    after = _snapshot(work)
    os.unlink(work)
    if after["__schema__"] != before["__schema__"]:
        return {"ok": False, "kind": "denied", "error": "the statement changed the schema"}
    diff: dict[str, Any] = {}
    size, max_bytes = 0, int(cfg["max_result_bytes"])
    for table, (columns, rows) in before.items():
        if table == "__schema__":
            continue
        old = Counter(_hashable(r) for r in rows)
        new_rows = after[table][1]
        new = Counter(_hashable(r) for r in new_rows)
        if old == new:
            continue
        removed = _pick(rows, old - new)
        added = _pick(new_rows, new - old)
        size += sum(_size(v) for r in removed + added for v in r)
        if size > max_bytes or len(removed) + len(added) > int(cfg["max_rows"]):
            return {"ok": False, "kind": "too_large", "error": "the change exceeds the result caps"}
        diff[table] = {
            "columns": columns,
            "removed": [[_encode(v) for v in r] for r in removed],
            "added": [[_encode(v) for v in r] for r in added],
        }
    return {"ok": True, "diff": diff}


def _pick(rows: list[tuple[Any, ...]], wanted: Counter) -> list[tuple[Any, ...]]:
    left = Counter(wanted)
    out = []
    for row in rows:
        key = _hashable(row)
        if left[key] > 0:
            left[key] -= 1
            out.append(row)
    return out


def run(payload: dict[str, Any], channel: object) -> dict[str, Any]:
    """Sandbox entry point: every instance, every statement, each on pristine data.

    payload: {"mode": "query"|"mutation", "schema": str, "instances": [str],
              "statements": [str], "limits": {...}}
    """
    cfg = payload["limits"]
    mutation = payload["mode"] == "mutation"
    instances = []
    for index, script in enumerate(payload["instances"]):
        path = f"{SCRATCH}/instance{index}.db"
        problem = build(path, payload["schema"], script, cfg)
        if problem is not None:
            instances.append({"build_error": problem})
            continue
        digest = _sha(path)
        before = _snapshot(path) if mutation else None
        results = []
        tampered = False
        for sql in payload["statements"]:
            result = run_mutation(path, sql, cfg, before) if mutation else run_query(path, sql, cfg)
            if _sha(path) != digest:
                # Defence in depth says this cannot happen; if it does, the statement is
                # a violation and the instance is rebuilt so later statements see clean data.
                tampered = True
                result = {"ok": False, "kind": "denied", "error": "the evaluation database changed"}
                os.unlink(path)
                build(path, payload["schema"], script, cfg)
            results.append(result)
        instances.append({"results": results, "digest": digest, "tampered": tampered})
    return {"instances": instances}
