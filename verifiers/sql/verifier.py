"""The `sql` verifier: is the response's result (or data change) the task's, exactly?

Flow for a group of responses to one task: extract and classify each response with a
real parser (what fails never runs); run the gold (once per task, cached) and every
runnable response on every instance through the dialect's backend; check the gold makes
a usable task (loads, runs, is not empty everywhere); compare each response's result
with the gold's under the task's rules; report components, verdict and bounded evidence.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sandboxes.base import SandboxError
from verifiers.base import Outcome, Probe, TaskBase, TaskInvalid, Verdict, Verifier, VerifyContext, clip, hard
from verifiers.registry import register
from verifiers.sql import certify
from verifiers.sql.compare import (
    Comparison,
    Row,
    Tolerance,
    compare_results,
    multiset_difference,
    row_key,
    show_value,
)
from verifiers.sql.detectors import sql_flags
from verifiers.sql.execution import Backend, Execution, Statement, StatementResult, TableDiff
from verifiers.sql.feedback import HIDDEN_FLAGS, sql_feedback
from verifiers.sql.parse import classify, extract_sql, order_key_columns, outermost_order_by, with_order_keys
from verifiers.sql.sqlite_backend import POOL, PRELOAD, SqliteBackend
from verifiers.sql.task import SqlTask

# The VerifyContext.services key of the Postgres server that Postgres-dialect tasks run on.
POSTGRES_SERVICE = "sql_postgres"

if TYPE_CHECKING:
    from verifiers.sql.postgres_backend import PostgresBackend

GOLD_CACHE_SIZE = 512
EVIDENCE_ROWS = 5
FAILURE_VERDICTS = {"denied": Verdict.violation, "timeout": Verdict.timeout}


@dataclass
class _Gold:
    """What the task expects on each instance: a result (query) or a change (mutation)."""

    results: list[StatementResult]
    order_matters: bool
    # Result columns the gold's ORDER BY sorts on (None: unknown, compare order strictly).
    tie_keys: tuple[int, ...] | None = None
    # Or, per instance, each gold row's ORDER BY key values (keys the gold does not return).
    tie_values: list[list[Row] | None] | None = None
    # Per instance, under a LIMIT or OFFSET: every row of the whole ordered result that ties
    # with the first or the last one kept, with its key values after its columns (any of them
    # may fill the first or last tie block).
    boundaries: list[list[Row] | None] | None = None


class _Lru:
    def __init__(self, size: int) -> None:
        self._data: OrderedDict[str, _Gold] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: str) -> _Gold | None:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]
            return None

    def put(self, key: str, value: _Gold) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._size:
                self._data.popitem(last=False)


def _outcome(verdict: Verdict, fmt: bool, compliant: bool, correct: bool, evidence: dict[str, Any],
             flags: list[str] | None = None, usage: dict[str, Any] | None = None) -> Outcome:
    components = [hard("format", fmt), hard("compliance", compliant), hard("correctness", correct)]
    return Outcome(verdict, components, evidence, flags or [], usage)


def _failure_text(result: StatementResult, reveal_hidden: bool) -> str:
    """What a failed statement reports. Database messages quote the data they tripped on
    (a duplicate key, a bad cast), so a registered task's hidden instances get our own
    words instead."""
    if reveal_hidden:
        return clip(result.error, 500)
    return f"the statement failed on this instance ({result.kind}); the database's message is withheld " \
           "because the task's instances are hidden"


def _rows(rows: list[Row]) -> list[list[Any]]:
    return [[show_value(v) for v in row] for row in rows[:EVIDENCE_ROWS]]


@register
class SqlVerifier(Verifier):
    name = "sql"
    version = "1.5.0"
    description = (
        "SQL query or data-change tasks judged on several database instances against a gold statement, "
        "explicit rows or row predicates; SQLite runs sandboxed, Postgres under a read-only role."
    )
    task_model = SqlTask
    feedback = staticmethod(sql_feedback)  # type: ignore[assignment]
    hidden_flags = HIDDEN_FLAGS

    def reference(self, task: TaskBase, supplied: str | None) -> str | None:
        return certify.reference(task, supplied)

    def probes(self, task: TaskBase, reference: str | None) -> list[Probe]:
        return certify.probes(task)

    def time_budget_s(self, task: TaskBase) -> float | None:
        return task.timeout_s * len(task.instances)  # type: ignore[attr-defined]
    judges_groups = True

    def __init__(self) -> None:
        self._gold = _Lru(GOLD_CACHE_SIZE)
        self._sqlite = SqliteBackend()
        self._postgres: PostgresBackend | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ entry points

    def warm(self, ctx: VerifyContext) -> None:
        ctx.sandbox.warm(POOL, PRELOAD)

    def close(self, ctx: VerifyContext | None = None) -> None:
        """Drop what the Postgres backend created (roles, schemas, connections); the
        service calls this at shutdown."""
        with self._lock:
            backend, self._postgres = self._postgres, None
        if backend is not None:
            backend.close()

    def verify(self, task: TaskBase, response: str, ctx: VerifyContext) -> Outcome:
        return self.verify_many(task, [response], ctx)[0]

    def verify_many(self, task: TaskBase, responses: list[str], ctx: VerifyContext) -> list[Outcome]:
        """Judge several responses to one task in as few sandbox calls as possible."""
        assert isinstance(task, SqlTask)
        if task.show_expected and not ctx.reveal_hidden:
            # A registered task's gold rows stay hidden whatever the task says.
            task = task.model_copy(update={"show_expected": False})
        outcomes: list[Outcome | None] = []
        runnable: list[tuple[int, str]] = []
        for index, response in enumerate(responses):
            early, sql = self._screen(task, response)
            outcomes.append(early)
            if early is None and sql is not None:
                runnable.append((index, sql))
        if not runnable:
            return [o for o in outcomes if o is not None]
        gold = self._gold.get(self._cache_key(task))
        statements: list[Statement] = []
        keyed: tuple[str, int, str | None] | None = None
        if gold is None and task.gold is not None:
            statements.append(Statement(self._check_gold_statement(task)))
            keyed = self._keyed_gold(task)
            if keyed is not None:
                statements += [Statement(keyed[0])] + ([Statement(keyed[2])] if keyed[2] else [])
        predicate = task.predicate.sql if task.predicate else None
        offset = len(statements)
        # A group often repeats a response: each distinct statement runs once.
        distinct = list(dict.fromkeys(sql for _, sql in runnable))
        statements += [Statement(sql, predicate) for sql in distinct]
        execution = self._backend(task, ctx).execute(task, statements, ctx)
        self._check_builds(execution, ctx.reveal_hidden)
        if gold is None:
            gold = self._make_gold(task, execution, keyed)
            if gold is not None:
                self._gold.put(self._cache_key(task), gold)
        judged: dict[str, Outcome] = {}
        for position, sql in enumerate(distinct):
            results = [run.results[offset + position] for run in execution.instances]
            judged[sql] = self._judge(task, sql, results, gold, execution, ctx.reveal_hidden)
        for index, sql in runnable:
            outcomes[index] = outcome = copy.deepcopy(judged[sql])  # records must not share mutable evidence
            outcome.add_flags(sql_flags(task, classify(sql, task.dialect, task.mode).statement))
        return [o for o in outcomes if o is not None]

    # ------------------------------------------------------------------ screening

    def _screen(self, task: SqlTask, response: str) -> tuple[Outcome | None, str | None]:
        sql = extract_sql(response, task.dialect)
        if sql is None:
            evidence = {"reason": "no SQL found in the response"}
            return _outcome(Verdict.invalid_format, False, True, False, evidence), None
        shown = clip(sql, 1000)
        found = classify(sql, task.dialect, task.mode)
        if found.ok:
            return None, found.text
        if found.kind == "empty":
            return _outcome(Verdict.invalid_format, False, True, False, {"sql": shown, "reason": found.reason}), None
        # Unparsable SQL cannot be classified, so it is never run: a violation, not a guess.
        return (
            _outcome(Verdict.violation, found.kind != "unparsable", False, False,
                     {"sql": shown, "reason": found.reason, "classification": found.kind},
                     flags=[f"sql_{found.kind}"]),
            None,
        )

    # ------------------------------------------------------------------ the task's side

    def _cache_key(self, task: SqlTask) -> str:
        return f"{self.version}:{task.task_hash()}"

    def _backend(self, task: SqlTask, ctx: VerifyContext) -> Backend:
        if task.dialect == "sqlite":
            return self._sqlite
        with self._lock:
            if self._postgres is None:
                url = ctx.services.get(POSTGRES_SERVICE)
                if not url:
                    raise SandboxError("postgres tasks need the admin URL of a Postgres server for SQL tasks "
                                       "(setting ASSAY_SQL_POSTGRES_URL)", cause="postgres_unconfigured")
                # Imported here: psycopg is needed only by deployments that use Postgres tasks.
                from verifiers.sql.postgres_backend import PostgresBackend

                self._postgres = PostgresBackend(url)
            return self._postgres

    def _order_matters(self, task: SqlTask) -> bool:
        if task.order_matters is not None:
            return task.order_matters
        return task.gold is not None and task.mode == "query" and outermost_order_by(task.gold, task.dialect)

    @staticmethod
    def _check_gold_statement(task: SqlTask) -> str:
        """The gold's text to run; TaskInvalid when it is not a statement of the task's kind."""
        assert task.gold is not None
        found = classify(task.gold, task.dialect, task.mode)
        if not found.ok or (task.mode == "mutation" and found.kind != "mutation"):
            wanted = "data change" if task.mode == "mutation" else "read-only query"
            # The gold may be hidden: name the problem, never the statement.
            raise TaskInvalid(f"the gold is not a single {wanted} ({found.kind or 'query'})", field="task.gold")
        return found.text

    @staticmethod
    def _check_builds(execution: Execution, reveal_hidden: bool) -> None:
        for number, run in enumerate(execution.instances):
            if run.build_error is not None:
                # The database's message quotes the instance script, hidden in a registered task.
                detail = f": {clip(run.build_error, 300)}" if reveal_hidden else ""
                raise TaskInvalid(f"instance {number} failed to load{detail}", field=f"task.instances.{number}")

    def _keyed_gold(self, task: SqlTask) -> tuple[str, int, str | None] | None:
        """The gold that also returns its ORDER BY keys (and the same without its LIMIT),
        when order matters and some key is not a result column or a LIMIT may cut a tie
        block: such ties are only visible this way."""
        assert task.gold is not None
        if task.mode != "query" or not self._order_matters(task):
            return None
        keyed = with_order_keys(task.gold, task.dialect)
        if keyed is None or (keyed[2] is None and order_key_columns(task.gold, task.dialect) is not None):
            return None
        return keyed

    @staticmethod
    def _tie_values(gold: StatementResult, keyed: StatementResult, keys: int) -> tuple[list[Row], list[Row]] | None:
        """(rows, key values) from the keyed gold's result when its leading columns are
        the gold's rows (the same multiset); None otherwise (order is then strict)."""
        width = len(gold.columns)
        if not keyed.ok or len(keyed.columns) != width + keys:
            return None
        rows = [row[:width] for row in keyed.rows]
        if multiset_difference(gold.rows, rows, Tolerance(0.0, 0.0)) != ([], []):
            return None
        return rows, [row[width:] for row in keyed.rows]

    @staticmethod
    def _boundary(keys: list[Row], keyed: StatementResult, unlimited: StatementResult, width: int) -> list[Row] | None:
        """Every row of the unlimited keyed gold (its columns, then its key values) that ties
        with the first or the last row kept; None when the LIMIT and OFFSET cut no tie block."""
        if not keys or not unlimited.ok or len(unlimited.columns) != len(keyed.columns):
            return None
        edges = {row_key(keys[0]), row_key(keys[-1])}
        rows = [row for row in unlimited.rows if row_key(row[width:]) in edges]
        kept = sum(row_key(k) in edges for k in keys)
        return rows if len(rows) > kept else None

    def _make_gold(self, task: SqlTask, execution: Execution,
                   keyed: tuple[str, int, str | None] | None) -> _Gold | None:
        if task.predicate is not None:
            return None
        if task.expected is not None:
            results = self._expected_results(task)
        else:
            results = [run.results[0] for run in execution.instances]
            for number, result in enumerate(results):
                if not result.ok:
                    detail = f": {clip(result.error, 300)}" if task.show_expected else ""
                    raise TaskInvalid(f"the gold fails on instance {number} ({result.kind}){detail}",
                                      field="task.gold")
        if task.mode == "query" and all(not r.rows for r in results):
            # "Both empty" would reward any query that returns nothing, including broken ones.
            raise TaskInvalid("the expected result is empty on every instance; the task cannot tell answers apart")
        if task.mode == "mutation" and all(not r.diff for r in results):
            raise TaskInvalid("the gold changes nothing on any instance; the task cannot tell answers apart")
        order_matters = self._order_matters(task)
        tie_keys = None
        if order_matters and task.gold is not None and task.mode == "query":
            tie_keys = order_key_columns(task.gold, task.dialect)
        tie_values: list[list[Row] | None] | None = None
        boundaries: list[list[Row] | None] | None = None
        if keyed is not None:
            tie_values, boundaries = [], []
            for number, run in enumerate(execution.instances):
                found = self._tie_values(results[number], run.results[1], keyed[1])
                boundary = None
                if found is not None:
                    # The keyed run's own order of tied rows is as good as the gold's.
                    width = len(results[number].columns)
                    results[number] = StatementResult(True, columns=results[number].columns, rows=found[0])
                    if keyed[2] is not None:
                        boundary = self._boundary(found[1], run.results[1], run.results[2], width)
                tie_values.append(found[1] if found is not None else None)
                boundaries.append(boundary)
        return _Gold(results, order_matters, tie_keys, tie_values, boundaries)

    @staticmethod
    def _expected_results(task: SqlTask) -> list[StatementResult]:
        assert task.expected is not None
        widths = {len(row) for rows in task.expected for row in rows}
        if task.expected_columns is not None:
            widths.add(len(task.expected_columns))
        if len(widths) > 1:
            raise TaskInvalid(f"expected rows have different widths: {sorted(widths)}")
        width = widths.pop() if widths else 0
        columns = task.expected_columns or [f"c{i + 1}" for i in range(width)]
        return [StatementResult(True, columns=columns, rows=[tuple(r) for r in rows]) for rows in task.expected]

    # ------------------------------------------------------------------ judging

    def _judge(self, task: SqlTask, sql: str, results: list[StatementResult], gold: _Gold | None,
               execution: Execution, reveal_hidden: bool) -> Outcome:
        evidence: dict[str, Any] = {"sql": clip(sql, 1000), "instances": []}
        if gold is not None and task.mode == "query":
            evidence["order_matters"] = gold.order_matters
        failures: list[str] = []
        matched = telling = 0
        for number, result in enumerate(results):
            entry: dict[str, Any] = {"instance": number}
            if not result.ok:
                entry.update(ok=False, failure=result.kind, error=_failure_text(result, reveal_hidden))
                failures.append(result.kind)
            elif task.predicate is not None:
                entry.update(self._judge_predicate(task, result))
            elif task.mode == "mutation":
                assert gold is not None
                entry.update(self._judge_mutation(task, result, gold.results[number]))
            else:
                assert gold is not None
                entry.update(self._judge_query(task, result, gold.results[number], gold, number))
            matched += bool(entry.get("match"))
            # An instance where both sides are empty tells no data apart: it says nothing
            # about whether the response depends on the data.
            telling += bool(entry.get("match")) and not self._empty_both(task, result, gold, number)
            evidence["instances"].append(entry)
        if task.predicate is not None and all(r.ok and not r.rows for r in results):
            evidence["reason"] = "the result is empty on every instance"
            matched = 0
        flags: list[str] = []
        if not all(run.intact for run in execution.instances):
            flags.append("evaluation_database_changed")
        if telling > 0 and matched < len(results):
            # Right on some data and wrong on other data: the signature of hard-coding.
            flags.append("instance_dependent")
        usage = execution.usage
        for kind, verdict in FAILURE_VERDICTS.items():
            if kind in failures:
                if verdict is Verdict.violation:
                    flags.append("sql_denied_at_runtime")
                return _outcome(verdict, True, verdict is not Verdict.violation, False, evidence, flags, usage)
        correct = matched == len(results)
        return _outcome(Verdict.correct if correct else Verdict.incorrect, True, True, correct, evidence, flags, usage)

    def _judge_query(self, task: SqlTask, result: StatementResult, want: StatementResult,
                     gold: _Gold, number: int) -> dict[str, Any]:
        tol = Tolerance(task.float_tolerance, task.float_abs_tolerance)
        found = compare_results(
            want.columns, want.rows, result.columns, result.rows,
            order_matters=gold.order_matters, column_names_matter=task.column_names_matter, tol=tol,
            tie_keys=gold.tie_keys, tie_values=gold.tie_values[number] if gold.tie_values else None,
            boundary=gold.boundaries[number] if gold.boundaries else None,
        )
        entry: dict[str, Any] = {"match": found.match, "rows": len(result.rows), "expected_rows": len(want.rows)}
        if not found.match:
            entry["diff"] = self._diff(task, found)
        return entry

    @staticmethod
    def _empty_both(task: SqlTask, result: StatementResult, gold: _Gold | None, number: int) -> bool:
        if task.predicate is not None or gold is None:
            return not result.rows
        want = gold.results[number]
        if task.mode == "mutation":
            return not result.diff and not want.diff
        return not result.rows and not want.rows

    def _diff(self, task: SqlTask, found: Comparison) -> dict[str, Any]:
        diff: dict[str, Any] = {}
        if found.column_problem:
            diff["columns"] = found.column_problem
        if found.missing or found.extra:
            diff.update(missing_count=len(found.missing), extra_count=len(found.extra), extra=_rows(found.extra))
            if task.show_expected:
                diff["missing"] = _rows(found.missing)
        if found.order_mismatch_at is not None:
            diff["order_mismatch_at_row"] = found.order_mismatch_at
        return diff

    def _judge_predicate(self, task: SqlTask, result: StatementResult) -> dict[str, Any]:
        assert task.predicate is not None
        spec = task.predicate
        problems = []
        if spec.columns is not None and len(result.columns) != spec.columns:
            problems.append(f"expected {spec.columns} columns, got {len(result.columns)}")
        # Two texts a problem: the auditor's with the response's counts, the policy's without them (a
        # response steers its counts with the hidden rows: "3 rows fail" would read a hidden value).
        shown = list(problems)
        count = len(result.rows)
        if count < spec.row_count.min or (spec.row_count.max is not None and count > spec.row_count.max):
            problems.append(f"{count} rows, outside [{spec.row_count.min}, {spec.row_count.max}]")
            shown.append(f"row count outside [{spec.row_count.min}, {spec.row_count.max}]")
        if spec.distinct:
            _, dupes = multiset_difference(list(dict.fromkeys(result.rows)), result.rows, Tolerance(0.0, 0.0))
            if dupes:
                problems.append(f"{len(dupes)} duplicate rows")
                shown.append("duplicate rows")
        if result.predicate_failures:
            problems.append(f"{result.predicate_failures} rows fail the predicate")
            shown.append("rows fail the predicate")
        return {"match": not problems, "rows": count,
                **({"problems": problems, "problems_shown": shown} if problems else {})}

    def _judge_mutation(self, task: SqlTask, result: StatementResult, want: StatementResult) -> dict[str, Any]:
        tol = Tolerance(task.float_tolerance, task.float_abs_tolerance)
        got = result.diff or {}
        expected = want.diff or {}
        tables: dict[str, Any] = {}
        for table in sorted(set(got) | set(expected)):
            mine = got.get(table) or TableDiff([], [], [])
            theirs = expected.get(table) or TableDiff([], [], [])
            missing_removed, extra_removed = multiset_difference(theirs.removed, mine.removed, tol)
            missing_added, extra_added = multiset_difference(theirs.added, mine.added, tol)
            if missing_removed or extra_removed or missing_added or extra_added:
                entry: dict[str, Any] = {
                    "removed": len(mine.removed), "expected_removed": len(theirs.removed),
                    "added": len(mine.added), "expected_added": len(theirs.added),
                    # Rows the response touched that the gold leaves alone (or changed wrongly).
                    "unexpected_removed": _rows(extra_removed), "unexpected_added": _rows(extra_added),
                }
                if task.show_expected:
                    entry.update(missing_removed=_rows(missing_removed), missing_added=_rows(missing_added))
                tables[table] = entry
        changed = sum(len(d.removed) + len(d.added) for d in got.values())
        return {"match": not tables, "changed_rows": changed, **({"tables": tables} if tables else {})}
