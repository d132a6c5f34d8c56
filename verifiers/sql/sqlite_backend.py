"""SQLite tasks: every statement runs inside the sandbox (see `sqlite_runner`).

A sandbox call costs a fork and a namespace set-up (milliseconds), a typical statement
far less, so work is batched twice over:

* one call builds a task's instances once and runs many statements on them (a group's
  responses, and the gold the first time a task is seen);
* when every sandbox worker of the pool is busy, the jobs of concurrent verifications
  wait and then go together in one call (`_Coalescer`), each in its own directory with
  its own instances, so a busy service pays fewer set-ups, while a quiet one adds no wait.

Each statement still gets its own deadline, a guarded read-only connection and a tamper
check. Inside the call, statements run in a forked process under a watchdog
(`sqlite_runner._watched`) that kills it at the statement's limit even when SQLite's own
deadline cannot fire (a single function call doing quadratic work), records the timeout
against that statement and goes on with the rest in a fresh process: a hostile statement
costs at most its own limit, and never ends the call. A shared call (several jobs) that
dies is retried job by job; one job's call that dies is retried once as a whole, then is
an infrastructure failure (never re-run one statement at a time, whose limits add up).
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

from sandboxes.base import CallResult, Limits, SandboxError, entry
from verifiers.base import VerifyContext
from verifiers.sql.execution import Execution, InstanceRun, Statement, StatementResult, decode_result
from verifiers.sql.inside import sqlite_runner
from verifiers.sql.task import SqlTask

TARGET = entry(sqlite_runner.run)
TARGET_MANY = entry(sqlite_runner.run_many)
POOL = "sql-sqlite"
PRELOAD = (sqlite_runner.__name__,)
# Worst-case statement time allowed in one call; more statements go to further calls.
CALL_STATEMENT_SECONDS = 60.0
# What one call may send back (the job-to-supervisor frame limit is 16 MiB).
CALL_BUDGET_BYTES = 6_000_000
# What the results of one call's statements may hold at most, by their caps.
CALL_RESULT_BYTES = 64_000_000
BUILD_SECONDS = 10.0
SANDBOX_MEMORY_MB = 768
# At most this many jobs, and this much task data, share one sandbox call.
MAX_JOBS_PER_CALL = 8
MAX_CALL_PAYLOAD_CHARS = 8_000_000


def _limits(task: SqlTask, n_statements: int) -> Limits:
    n = len(task.instances)
    # Each statement may run twice per instance (predicate check), plus the runner's
    # watchdog grace (sqlite_runner.WATCHDOG_GRACE_*) and a process start.
    per_statement = (task.timeout_s * (2 if task.predicate else 1) * 1.1 + 0.5) * n
    seconds = BUILD_SECONDS * n + per_statement * n_statements + 5.0
    return Limits(wall_s=seconds, cpu_s=seconds, memory_mb=SANDBOX_MEMORY_MB, processes=4, open_files=64,
                  output_bytes=200_000, scratch_mb=256, file_size_mb=128)


def _chunk_size(task: SqlTask) -> int:
    per_statement = task.timeout_s * len(task.instances) * (2 if task.predicate else 1)
    by_time = math.floor(CALL_STATEMENT_SECONDS / per_statement)
    # A call holds every result it computes before it defers what does not fit its
    # transfer budget: bound them so that no group's results can exhaust its memory
    # (a dead call is no longer re-run statement by statement).
    by_memory = CALL_RESULT_BYTES // (task.max_result_bytes * len(task.instances))
    return max(1, min(by_time, by_memory))


@dataclass(eq=False)  # jobs are compared by identity: two may carry equal payloads
class _Job:
    payload: dict[str, Any]
    limits: Limits
    size: int
    done: bool = False
    value: dict[str, Any] | None = None
    call: CallResult | None = None
    error: BaseException | None = None
    shared_with: int = 1

    def outcome(self) -> tuple[dict[str, Any] | None, CallResult]:
        if self.error is not None:
            raise self.error
        assert self.call is not None
        return self.value, self.call


@dataclass
class _Coalescer:
    """Sends a job at once while a sandbox worker is free; otherwise it waits, and the
    next thread to get a worker takes its own job plus whatever else is waiting."""

    _cond: threading.Condition = field(default_factory=threading.Condition)
    _queue: list[_Job] = field(default_factory=list)
    _inflight: int = 0

    def run(self, payload: dict[str, Any], limits: Limits, ctx: VerifyContext) -> tuple[dict | None, CallResult]:
        size = len(payload["schema"]) + sum(len(i) for i in payload["instances"])
        job = _Job(payload, limits, size)
        slots = max(1, int(getattr(ctx.sandbox, "workers", 2)))
        with self._cond:
            self._queue.append(job)
            while not job.done and self._inflight >= slots:
                self._cond.wait(timeout=1.0)
            if job.done:
                return job.outcome()
            batch = self._take(job)
            self._inflight += 1
        try:
            self._dispatch(batch, ctx)
        except BaseException as exc:
            for other in batch:
                if not other.done:
                    other.error, other.done = exc, True
        finally:
            with self._cond:
                self._inflight -= 1
                self._cond.notify_all()
        return job.outcome()

    def _take(self, own: _Job) -> list[_Job]:
        batch, size = [own], own.size
        for other in self._queue:
            if other is own:
                continue
            if len(batch) >= MAX_JOBS_PER_CALL or size + other.size > MAX_CALL_PAYLOAD_CHARS:
                break
            batch.append(other)
            size += other.size
        taken = {id(j) for j in batch}
        self._queue = [j for j in self._queue if id(j) not in taken]
        return batch

    def _dispatch(self, batch: list[_Job], ctx: VerifyContext) -> None:
        if len(batch) == 1:
            job = batch[0]
            job.value, job.call = _call_one(job.payload, job.limits, ctx)
            self._finish(batch)
            return
        for job in batch:
            job.payload["limits"]["call_budget_bytes"] = CALL_BUDGET_BYTES // len(batch)
            job.shared_with = len(batch)
        limits = batch[0].limits.replace(
            wall_s=sum(j.limits.wall_s for j in batch), cpu_s=sum(j.limits.cpu_s for j in batch))
        call = ctx.sandbox.call(TARGET_MANY, {"jobs": [j.payload for j in batch]}, limits, pool=POOL,
                                preload=PRELOAD)
        if call.returned and isinstance(call.value, dict):
            for job, value in zip(batch, call.value["jobs"], strict=True):
                job.value, job.call = value, call
        else:
            # The shared call died (or the runner failed on one job's content): run each
            # job alone so the failure, whatever it is, lands on its owner only.
            for job in batch:
                job.payload["limits"]["call_budget_bytes"] = CALL_BUDGET_BYTES
                job.shared_with = 1
                try:
                    job.value, job.call = _call_one(job.payload, job.limits, ctx)
                except SandboxError as exc:
                    job.error = exc
        self._finish(batch)

    def _finish(self, batch: list[_Job]) -> None:
        with self._cond:
            for job in batch:
                job.done = True
            self._cond.notify_all()


def _call_one(payload: dict[str, Any], limits: Limits, ctx: VerifyContext) -> tuple[dict | None, CallResult]:
    """One call; None when it did not return (the statement it ran is then blamed)."""
    call = ctx.sandbox.call(TARGET, payload, limits, pool=POOL, preload=PRELOAD)
    if call.returned and isinstance(call.value, dict):
        return call.value, call
    return None, call


class SqliteBackend:
    def __init__(self) -> None:
        self._coalescer = _Coalescer()

    def execute(self, task: SqlTask, statements: list[Statement], ctx: VerifyContext) -> Execution:
        results: dict[int, list[StatementResult]] = {}
        builds: list[str | None] = [None] * len(task.instances)
        intact = [True] * len(task.instances)
        usage: list[dict[str, Any]] = []
        pending = list(range(len(statements)))
        while pending:
            chunk = pending[: _chunk_size(task)]
            pending = pending[len(chunk):]
            value, call = self._call(task, [statements[i] for i in chunk], ctx)
            usage.append(call.summary())
            if value is None and len(chunk) > 1:
                # Statements run under the runner's watchdog, in processes of their own,
                # so no statement can end the call: a call that died failed on its own.
                # One more try, as a whole (never one statement at a time, whose limits
                # would add up), then it is the infrastructure's failure.
                value, call = self._call(task, [statements[i] for i in chunk], ctx)
                usage.append(call.summary())
                if value is None:
                    raise SandboxError("the SQLite runner died twice on the same statements",
                                       cause="sql_runner_died")
            if value is None:
                results[chunk[0]] = [_died(call)] * len(task.instances)
                continue
            done = self._collect(value, chunk, results, builds, intact)
            pending = [i for i in chunk if i not in done] + pending
        runs = []
        for instance, problem in enumerate(builds):
            if problem is not None:
                runs.append(InstanceRun(build_error=problem))
            else:
                runs.append(InstanceRun(results=[results[i][instance] for i in range(len(statements))],
                                        intact=intact[instance]))
        return Execution(runs, {"backend": "sqlite-in-sandbox", "calls": usage[:8], "n_calls": len(usage)})

    def _call(self, task: SqlTask, chunk: list[Statement], ctx: VerifyContext) -> tuple[dict | None, CallResult]:
        payload = {
            "mode": task.mode,
            "schema": task.schema_sql,
            "instances": task.instances,
            "statements": [{"sql": s.sql, "predicate": s.predicate} for s in chunk],
            "limits": {**task.limits_payload(), "call_budget_bytes": CALL_BUDGET_BYTES,
                       "build_timeout_s": BUILD_SECONDS},
        }
        return self._coalescer.run(payload, _limits(task, len(chunk)), ctx)

    @staticmethod
    def _collect(value: dict, chunk: list[int], results: dict[int, list[StatementResult]],
                 builds: list[str | None], intact: list[bool]) -> set[int]:
        deferred = {chunk[i] for i in value.get("deferred", [])}
        done = {i for i in chunk if i not in deferred}
        for instance, raw in enumerate(value["instances"]):
            if "build_error" in raw:
                builds[instance] = str(raw["build_error"])
                for index in done:
                    results.setdefault(index, [StatementResult(False, "skipped")] * len(builds))
                continue
            if raw.get("digest_before") != raw.get("digest_after"):
                intact[instance] = False
            for position, index in enumerate(i for i in chunk if i in done):
                results.setdefault(index, [StatementResult(False, "skipped")] * len(builds))
                results[index] = list(results[index])
                results[index][instance] = decode_result(raw["results"][position])
        return done


def _died(call: CallResult) -> StatementResult:
    """A lone statement whose sandbox call was killed: attribute it to the statement."""
    if call.killed_by in ("timeout", "cpu"):
        return StatementResult(False, "timeout", f"sandbox stopped the statement ({call.killed_by} limit)")
    if call.killed_by in ("memory", "output"):
        return StatementResult(False, "resource", f"sandbox stopped the statement ({call.killed_by} limit)")
    # Once the statement ran, whatever ended its runner (a crash, an exception, a broken
    # channel) is counted against the statement, never as `error`: hostile SQL must not
    # be able to drop its own sample from the group.
    return StatementResult(False, "error", "the statement ended its sandboxed runner "
                                           f"(exit code {call.exit_code}, signal {call.signal})")
