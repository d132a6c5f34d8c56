"""Host-side execution results shared by the SQLite (sandboxed) and Postgres backends."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Protocol

from verifiers.base import VerifyContext
from verifiers.sql.compare import Row
from verifiers.sql.task import SqlTask


@dataclass(frozen=True)
class Statement:
    """One statement to run on every instance; `predicate` asks for the count of the
    result rows that fail a predicate task's condition."""

    sql: str
    predicate: str | None = None


@dataclass
class TableDiff:
    columns: list[str]
    removed: list[Row]
    added: list[Row]


@dataclass
class StatementResult:
    ok: bool
    kind: str = ""  # on failure: timeout | denied | error | resource | too_large | skipped
    error: str = ""
    columns: list[str] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    diff: dict[str, TableDiff] | None = None
    predicate_failures: int | None = None


@dataclass
class InstanceRun:
    build_error: str | None = None
    results: list[StatementResult] = field(default_factory=list)
    # False when the evaluation database was not byte-identical after the statements ran.
    intact: bool = True


@dataclass
class Execution:
    instances: list[InstanceRun]
    usage: dict[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    def execute(self, task: SqlTask, statements: list[Statement], ctx: VerifyContext) -> Execution:
        """Run every statement on a pristine copy of every instance."""


def decode_value(value: Any) -> Any:
    if isinstance(value, dict) and "b64" in value:
        return base64.b64decode(value["b64"])
    return value


def decode_row(row: list[Any]) -> Row:
    if any(isinstance(v, dict) for v in row):
        return tuple(decode_value(v) for v in row)
    return tuple(row)


def decode_result(raw: dict[str, Any]) -> StatementResult:
    if not raw.get("ok"):
        return StatementResult(False, kind=str(raw.get("kind", "error")), error=str(raw.get("error", "")))
    diff = None
    if "diff" in raw:
        diff = {
            table: TableDiff(
                list(d["columns"]), [decode_row(r) for r in d["removed"]], [decode_row(r) for r in d["added"]]
            )
            for table, d in raw["diff"].items()
        }
    return StatementResult(
        True,
        columns=list(raw.get("columns") or []),
        rows=[decode_row(r) for r in raw.get("rows") or []],
        diff=diff,
        predicate_failures=raw.get("predicate_failures"),
    )
