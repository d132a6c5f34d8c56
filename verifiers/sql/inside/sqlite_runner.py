"""Runs *inside* the sandbox (standard library and `sandboxes.inside.watchdog` only): builds each
evaluation instance as a private SQLite file and executes queries or data changes on it
under guards, each statement under a watchdog that kills it at its own limit.

Guards, in depth, on top of the sandbox itself (no network, scratch-only filesystem,
rlimits): the statement was already classified by a real parser on the trusted side;
here a query runs on a connection opened read-only (`mode=ro`) with `query_only`, an
authorizer that allows only reads, no attachable databases, a heap cap, a value-length
cap, and a progress-handler deadline that interrupts the SQLite VM itself (so a runaway
recursive CTE stops burning CPU at the deadline, not when the sandbox is killed). Rows
are fetched in chunks against row and size caps. Each evaluation file is hashed before
and after its statements; if it ever changed, the statements are re-run on a rebuilt
file with a hash after each one, so the change is pinned on its statement (a violation)
and never silently used.

A data change (mutation task) runs on a throwaway copy of the instance, with an
authorizer that allows only INSERT/UPDATE/DELETE on ordinary tables, and is reported as
the row-level difference it made to every table.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import signal
import sqlite3
import time
from collections import Counter
from typing import Any

from sandboxes.inside.watchdog import run_watched
from verifiers.sql.inside.rowdiff import hashable, pick

SCRATCH = "/tmp/work"
FETCH_CHUNK = 256
PROGRESS_STEPS = 1000
# The watchdog's grace beyond a statement's own deadline (seconds, or this share of it).
WATCHDOG_GRACE_S = 0.25
WATCHDOG_GRACE_SHARE = 0.1

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
    if any(word in lowered for word in ("not authorized", "authorization denied", "readonly", "prohibited")):
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


class ReadOnlySession:
    """One guarded read-only connection to an instance, reused for many statements.

    Reuse is sound because nothing a statement can do here outlives it: the authorizer
    refuses PRAGMA, ATTACH, temp objects and transactions, so the connection's state is
    the same before every statement. Each statement gets its own deadline."""

    def __init__(self, path: str, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        _guard(self.conn, cfg, allow_writes=False)

    def close(self) -> None:
        self.conn.close()

    def query(self, sql: str) -> dict[str, Any]:
        cfg = self.cfg
        deadline = _Deadline(float(cfg["timeout_s"]))
        self.conn.set_progress_handler(deadline, PROGRESS_STEPS)
        started = time.monotonic()
        cursor = None
        try:
            cursor = self.conn.execute(sql)
            if cursor.description is None:
                # Only a query has a result set; anything else that got this far is refused.
                return {"ok": False, "kind": "denied", "error": "the statement is not a query"}
            columns = [d[0] for d in cursor.description]
            rows: list[list[Any]] = []
            size = 0
            max_rows, max_bytes = int(cfg["max_rows"]), int(cfg["max_result_bytes"])
            while True:
                chunk = cursor.fetchmany(FETCH_CHUNK)
                if not chunk:
                    break
                for row in chunk:
                    size += 12 * len(row) + sum(len(v) for v in row if isinstance(v, str | bytes))
                    rows.append([_encode(v) for v in row] if any(isinstance(v, bytes) for v in row) else list(row))
                if len(rows) > max_rows or size > max_bytes:
                    return {
                        "ok": False,
                        "kind": "too_large",
                        "error": f"result exceeds the caps ({max_rows} rows, {max_bytes} bytes)",
                        "rows_seen": len(rows),
                    }
            return {"ok": True, "columns": columns, "rows": rows, "bytes": size,
                    "seconds": time.monotonic() - started}
        except (sqlite3.Error, MemoryError, OverflowError) as exc:
            return _classify_error(exc, deadline)
        finally:
            if cursor is not None:
                cursor.close()


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



def run_mutation(path: str, sql: str, cfg: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    work = path + ".attempt"
    shutil.copyfile(path, work)
    conn = sqlite3.connect(work, isolation_level=None)
    deadline = _Deadline(float(cfg["timeout_s"]))
    try:
        deadline = _guard(conn, cfg, allow_writes=True)
        # Autocommit: the one statement commits itself (the authorizer refuses BEGIN/COMMIT).
        conn.execute(sql)
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
    for table, snapshot in before.items():
        if table == "__schema__":
            continue
        columns, rows = snapshot
        old = Counter(hashable(r) for r in rows)
        new_rows = after[table][1]
        new = Counter(hashable(r) for r in new_rows)
        if old == new:
            continue
        removed = pick(rows, old - new)
        added = pick(new_rows, new - old)
        size += sum(_size(v) for r in removed + added for v in r)
        if size > max_bytes or len(removed) + len(added) > int(cfg["max_rows"]):
            return {"ok": False, "kind": "too_large", "error": "the change exceeds the result caps"}
        diff[table] = {
            "columns": columns,
            "removed": [[_encode(v) for v in r] for r in removed],
            "added": [[_encode(v) for v in r] for r in added],
        }
    return {"ok": True, "diff": diff}



def _wrap_predicate(sql: str, predicate: str, n_columns: int) -> str:
    names = ", ".join(f"c{i + 1}" for i in range(n_columns))
    # Newlines keep a trailing line comment in `sql` from swallowing the wrapper.
    return f"WITH result({names}) AS (\n{sql}\n)\nSELECT count(*) FROM result WHERE NOT coalesce(({predicate}), 0)"


def _result_bytes(result: dict[str, Any]) -> int:
    if "bytes" in result:
        return int(result["bytes"])
    if "rows" in result:
        return sum(_size(v) for row in result["rows"] for v in row)
    if "diff" in result:
        return sum(_size(v) for d in result["diff"].values() for r in d["removed"] + d["added"] for v in r)
    return len(result.get("error", "")) + 64


def _run_statement(spec: dict[str, Any], path: str, cfg: dict[str, Any], mutation: bool,
                   before: dict[str, Any] | None, session: ReadOnlySession | None) -> dict[str, Any]:
    if mutation:
        assert before is not None
        return run_mutation(path, spec["sql"], cfg, before)
    assert session is not None
    result = session.query(spec["sql"])
    if result["ok"] and spec.get("predicate"):
        check = session.query(_wrap_predicate(spec["sql"], spec["predicate"], len(result["columns"])))
        if not check["ok"]:
            check["error"] = "predicate check failed: " + check.get("error", "")
            return check
        result["predicate_failures"] = int(check["rows"][0][0])
    return result


def _statement_limit(cfg: dict[str, Any], spec: dict[str, Any]) -> float:
    """The watchdog's limit for one statement: its own deadline (twice for a predicate
    task: the query, then the predicate check) plus a grace for the in-VM deadline to
    fire first."""
    seconds = float(cfg["timeout_s"]) * (2 if spec.get("predicate") else 1)
    return seconds + max(WATCHDOG_GRACE_S, WATCHDOG_GRACE_SHARE * seconds)


def _watched(payload: dict[str, Any], path: str, numbers: list[int], gave_up: set[int],
             before: dict[str, Any] | None) -> dict[int, dict[str, Any]]:
    """Run statements under the watchdog (`sandboxes.inside.watchdog`). SQLite's own deadline
    (a progress handler) cannot fire while one step runs inside a single function call
    (`instr` or `replace` on megabyte strings, a LIKE pattern): the watchdog then kills
    the statement's process at its limit, records a timeout for it, and runs the
    statements after it in a fresh process. A statement costs at most its own limit."""
    cfg = payload["limits"]
    mutation = payload["mode"] == "mutation"
    # A statement that ran out of time once is not given the time again.
    results: dict[int, dict[str, Any]] = {n: dict(_SKIPPED) for n in numbers if n in gave_up}
    sessions: list[ReadOnlySession] = []

    def work(number: int) -> dict[str, Any]:
        if not mutation and not sessions:  # opened in the statement process, once
            sessions.append(ReadOnlySession(path, cfg))
        return _run_statement(payload["statements"][number], path, cfg, mutation, before,
                              sessions[0] if sessions else None)

    results.update(run_watched(
        [n for n in numbers if n not in results], work,
        lambda number: _statement_limit(cfg, payload["statements"][number]),
        lambda number: dict(_WATCHDOG_TIMEOUT),
        lambda number, status: _ended(status),
    ))
    for number, result in results.items():
        if result.get("kind") == "timeout":
            gave_up.add(number)
    return results


def _run_all(payload: dict[str, Any], paths: list[str], builds: list[str | None]) -> list[dict[int, dict[str, Any]]]:
    """Every statement on every built instance (instance by instance), in one process
    under the watchdog (a fresh one only after a kill): as `_watched`, without a fork
    per instance. A statement that timed out on one instance is skipped on the next."""
    cfg = payload["limits"]
    mutation = payload["mode"] == "mutation"
    count = len(payload["statements"])
    items = [index * count + number for index in range(len(paths)) if builds[index] is None
             for number in range(count)]
    opened: dict[int, Any] = {}  # per instance, in the statement process: its session or snapshot
    timed_out: set[int] = set()  # in the statement process: statements stopped by their deadline

    def work(item: int) -> dict[str, Any]:
        index, number = divmod(item, count)
        if number in timed_out:
            return dict(_SKIPPED)
        if index not in opened:
            opened[index] = _snapshot(paths[index]) if mutation else ReadOnlySession(paths[index], cfg)
        handle = opened[index]
        result = _run_statement(payload["statements"][number], paths[index], cfg, mutation,
                                handle if mutation else None, None if mutation else handle)
        if result.get("kind") == "timeout":
            timed_out.add(number)
        return result

    def skip(item: int, done: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
        number = item % count
        stopped = any(r.get("kind") == "timeout" for i, r in done.items() if i % count == number)
        return dict(_SKIPPED) if stopped else None

    results = run_watched(
        items, work, lambda item: _statement_limit(cfg, payload["statements"][item % count]),
        lambda item: dict(_WATCHDOG_TIMEOUT), lambda item, status: _ended(status), skip)
    per_instance: list[dict[int, dict[str, Any]]] = [{} for _ in paths]
    for item, result in results.items():
        index, number = divmod(item, count)
        per_instance[index][number] = result
    return per_instance


_SKIPPED = {"ok": False, "kind": "skipped", "error": "skipped after a timeout"}
_WATCHDOG_TIMEOUT = {"ok": False, "kind": "timeout",
                     "error": "the statement ran past its time limit inside one SQLite step and was stopped by "
                              "the watchdog"}


def _ended(status: int) -> dict[str, Any]:
    """A statement whose process ended before its result (a crash, a memory kill)."""
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGKILL, signal.SIGSEGV, signal.SIGBUS):
        return {"ok": False, "kind": "resource", "error": f"the statement's process was killed "
                                                          f"(signal {os.WTERMSIG(status)})"}
    return {"ok": False, "kind": "error", "error": "the statement's process ended before its result"}


def _run_instance(payload: dict[str, Any], index: int, path: str, indexes: list[int],
                  gave_up: set[int], checked_each: bool) -> dict[int, dict[str, Any]]:
    """Run the statements `indexes` on one built instance. With `checked_each`, the file
    is hashed after every statement and rebuilt when one changed it (the slow path, used
    only if the fast path found the file changed at the end)."""
    mutation = payload["mode"] == "mutation"
    before = _snapshot(path) if mutation else None
    if not checked_each:
        return _watched(payload, path, indexes, gave_up, before)
    digest = _sha(path)
    results: dict[int, dict[str, Any]] = {}
    for number in indexes:
        result = _watched(payload, path, [number], gave_up, before)[number]
        if _sha(path) != digest:
            # Defence in depth says this cannot happen; if it does, the statement is
            # a violation and the instance is rebuilt so later statements see clean data.
            result = {"ok": False, "kind": "denied", "error": "the evaluation database changed"}
            os.unlink(path)
            build(path, payload["schema"], payload["instances"][index], payload["limits"])
        results[number] = result
    return results


def run_many(payload: dict[str, Any], channel: object) -> dict[str, Any]:
    """Sandbox entry point for several jobs (several tasks' statements) in one call, each
    in its own directory, built, run and removed in turn: {"jobs": [payload, ...]}."""
    out = []
    for number, job in enumerate(payload["jobs"]):
        directory = f"{SCRATCH}/job{number}"
        os.mkdir(directory)
        try:
            out.append(run(job, channel, directory))
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    return {"jobs": out}


def run(payload: dict[str, Any], channel: object, directory: str = SCRATCH) -> dict[str, Any]:
    """Sandbox entry point: every statement on every instance, each on pristine data.

    payload: {"mode": "query"|"mutation", "schema": str, "instances": [str],
              "statements": [{"sql": str, "predicate": str|None}], "limits": {...}}
    Returns {"instances": [{"build_error"} | {"results", "digest_before", "digest_after"}],
    "deferred": [indexes]}: statements whose results would overflow this call's transfer
    budget are deferred to another call (never the first one, so every call makes progress).
    """
    cfg = payload["limits"]
    statements = payload["statements"]
    budget = int(cfg["call_budget_bytes"])
    paths, digests, builds = [], [], []
    for index, script in enumerate(payload["instances"]):
        path = f"{directory}/instance{index}.db"
        problem = build(path, payload["schema"], script, cfg)
        paths.append(path)
        builds.append(problem)
        digests.append(_sha(path) if problem is None else None)
    order = list(range(len(statements)))
    per_instance = _run_all(payload, paths, builds)
    for index, path in enumerate(paths):
        if builds[index] is not None:
            continue
        if _sha(path) != digests[index]:
            # Something changed the file: find out which statement, one check at a time.
            os.unlink(path)
            build(path, payload["schema"], payload["instances"][index], cfg)
            per_instance[index] = _run_instance(payload, index, path, order, set(), checked_each=True)
    deferred: list[int] = []
    kept: list[int] = []
    used = 0
    for number in order:
        size = sum(_result_bytes(results[number]) for results in per_instance if number in results)
        if used + size > budget:
            if kept:
                deferred.extend(order[order.index(number):])
                break
            for results in per_instance:
                if results.get(number, {}).get("ok"):
                    results[number] = {"ok": False, "kind": "too_large", "error": "result too large to transfer"}
            size = 0
        used += size
        kept.append(number)
    instances = []
    for index, problem in enumerate(builds):
        if problem is not None:
            instances.append({"build_error": problem})
        else:
            # Both digests go back so that callers (and tests) can see the evaluation
            # file is byte-identical after every statement ran.
            instances.append({
                "results": [per_instance[index][number] for number in kept],
                "digest_before": digests[index],
                "digest_after": _sha(paths[index]),
            })
    return {"instances": instances, "deferred": deferred}
