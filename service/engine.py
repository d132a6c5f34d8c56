"""The verification engine: resolve tasks, run verifiers off the event loop, compute
advantages, and write one audit record per verification before answering."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio

from sandboxes.base import Sandbox
from service import views
from service.advantages import group_advantages
from service.auth import Caller
from service.config import Settings
from service.executors import Executor, JudgeJob, LocalExecutor
from service.fingerprints import Fingerprints, create_fingerprints
from service.judging import Judged
from service.logs import log_verification
from service.metrics import Metrics
from service.schemas import (
    ComponentOut,
    GenerationIn,
    GroupError,
    GroupResult,
    GroupSpec,
    GroupsRequest,
    GroupsResponse,
    RegisteredTask,
    ReplayOut,
    ResponseIn,
    RunTag,
    TaskRef,
    TaskRegistration,
    VerifyRequest,
    VerifyResult,
)
from service.store import AuditStore, IdempotencyRow, RecordRow, TaskBlobRow, is_integrity_error, new_record_id
from service.task_cache import ResolvedTasks, resolve_where_cheap
from verifiers import registry
from verifiers.base import Outcome, TaskBase, TaskInvalid, UnknownVerifier, Verdict, Verifier, sha256_text
from verifiers.feedback import HiddenText, infrastructure
from verifiers.inspection import Generation, apply_policies, is_masked

log = logging.getLogger(__name__)


class Saturated(Exception):
    """Too much work in flight: the caller should retry after a pause."""


class TaskNotFound(LookupError):
    pass


class RequestInvalid(ValueError):
    """A request breaks a service limit; the message names the field."""


class RequestIdConflict(Exception):
    """A `request_id` was reused for a different request."""


T = TypeVar("T")
_TASK_PARTS = re.compile(r"(^|; )(task\b)")


async def gather_or_abort(calls: list[Callable[[], Awaitable[T]]]) -> list[T]:
    """Run calls concurrently; the first one that raises cancels the rest and its
    exception is raised as itself (not wrapped in an ExceptionGroup)."""
    results: list[Any] = [None] * len(calls)
    failure: Exception | None = None
    async with anyio.create_task_group() as tg:

        async def run(i: int) -> None:
            nonlocal failure
            try:
                results[i] = await calls[i]()
            except Exception as exc:
                if failure is None:
                    failure = exc
                tg.cancel_scope.cancel()

        for i in range(len(calls)):
            tg.start_soon(run, i)
    if failure is not None:
        raise failure
    return results


def task_error_at(exc: TaskInvalid, where: str) -> TaskInvalid:
    """The same problem placed in a request: every "task.x: ..." part of its message, and its
    field, get `where` (e.g. `groups[2]`) in front."""
    return TaskInvalid(_TASK_PARTS.sub(rf"\1{where}.\2", str(exc)), field=f"{where}.{exc.field}")


@dataclass
class Resolved:
    verifier: Verifier
    task: TaskBase
    task_id: str | None
    task_hash: str
    raw: dict[str, Any]
    # The public view (keyed fingerprints for hidden fields), computed once per task, not per record.
    public: dict[str, Any] = field(default_factory=dict)
    _hidden_text: HiddenText | None = field(default=None, repr=False)

    def feedback(self, outcome: Outcome, response: str) -> dict[str, Any]:
        """The family's feedback, with any hidden word the response did not state masked."""
        if self._hidden_text is None:
            self._hidden_text = HiddenText.of(self.task)
        shown = {**self.verifier.feedback(self.task, outcome, response), **infrastructure(outcome)}
        return self._hidden_text.scrub(shown, response)


def generation_of(response: ResponseIn) -> Generation:
    if isinstance(response, GenerationIn):
        return Generation(response.text, response.tokens, response.finish_reason)
    return Generation(response)


def request_hash(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


class Engine:
    def __init__(self, settings: Settings, store: AuditStore, sandbox: Sandbox | None, metrics: Metrics,
                 executor: Executor | None = None, fingerprints: Fingerprints | None = None) -> None:
        self.settings = settings
        self.fingerprints = fingerprints or create_fingerprints(settings)
        self.store = store
        self.sandbox = sandbox
        self.metrics = metrics
        if executor is None:
            assert sandbox is not None, "the local executor needs a sandbox"
            executor = LocalExecutor(sandbox, settings.verify_threads, settings.verifier_services)
        self.executor = executor
        self.tasks = ResolvedTasks()  # perf hook: inline tasks resolved once per task
        self._inflight = 0
        self._inflight_lock = threading.Lock()
        # Called with the records of each answered request once they are logged (runs' alarms watch it).
        self.on_logged: Callable[[list[RecordRow]], None] | None = None

    # ------------------------------------------------------------------- tasks

    def resolve(self, ref: TaskRef, *, certified_only: bool = True) -> Resolved:
        """The verifier and parsed task of a reference. `certified_only`: with the setting
        `require_certified_tasks`, a registered task must hold a `certified` certificate."""
        verifier = registry.get(ref.verifier)
        if ref.task_id is not None:
            found = self.store.registered_task(ref.task_id)
            if found is None:
                raise TaskNotFound(f"task_id {ref.task_id!r} is not registered")
            row, blob = found
            if row.verifier != verifier.name:
                raise RequestInvalid(f"verifier: task {ref.task_id!r} belongs to verifier {row.verifier!r}")
            if certified_only and self.settings.require_certified_tasks and not self.store.is_certified(row.task_hash):
                raise TaskInvalid(f"task: registered task {ref.task_id!r} is not certified (POST /v1/tasks/certify); "
                                  "this service verifies certified tasks only", field="task_id")
            task = verifier.parse_task(blob.task)
            return Resolved(verifier, task, ref.task_id, row.task_hash, blob.task, self.fingerprints.public_view(task))
        assert ref.task is not None
        return self.tasks.get(verifier.name, ref.task, lambda: self._resolve_inline(verifier, ref.task))  # perf hook

    def _resolve_inline(self, verifier: Verifier, raw_task: dict[str, Any]) -> Resolved:
        task = verifier.parse_task(raw_task)
        raw = task.model_dump(mode="json")
        return Resolved(verifier, task, None, self.fingerprints.task_hash(task), raw,
                        self.fingerprints.public_view(task))

    def register_task(self, reg: TaskRegistration) -> RegisteredTask:
        verifier = registry.get(reg.verifier)
        raw = reg.task
        if reg.hide:
            # Hidden on registration: the names join the task's own `hide`, checked like it.
            try:
                verifier.task_model._known_hidden(reg.hide)
            except ValueError as exc:
                raise TaskInvalid(f"hide: {exc}", field="hide") from None
            raw = {**raw, "hide": sorted({*(raw.get("hide") or []), *reg.hide})}
        task = verifier.parse_task(raw)
        task_hash = self.fingerprints.task_hash(task)
        created = self.store.register_task(reg.task_id, verifier.name, task_hash, task.model_dump(mode="json"))
        if not created:  # the id's own hash: a task registered before keyed fingerprints keeps its plain one
            found = self.store.registered_task(reg.task_id)
            task_hash = found[0].task_hash if found is not None else task_hash
        return RegisteredTask(task_id=reg.task_id, verifier=verifier.name, task_hash=task_hash,
                              created=created, task=self.fingerprints.public_view(task))

    def registered(self, task_id: str) -> RegisteredTask:
        found = self.store.registered_task(task_id)
        if found is None:
            raise TaskNotFound(f"task_id {task_id!r} is not registered")
        row, blob = found
        task = registry.get(row.verifier).parse_task(blob.task)
        return RegisteredTask(task_id=task_id, verifier=row.verifier, task_hash=row.task_hash, created=False,
                              task=self.fingerprints.public_view(task))

    # ------------------------------------------------------------- admission

    def _admit(self, n: int) -> None:
        with self._inflight_lock:
            if self._inflight + n > self.settings.max_inflight_responses:
                self.metrics.inc("assay_rejected_total", reason="saturated")
                raise Saturated(f"{self._inflight} responses are being verified; retry later")
            self._inflight += n
            self.metrics.set("assay_inflight_responses", self._inflight)

    def _release(self, n: int) -> None:
        with self._inflight_lock:
            self._inflight -= n
            self.metrics.set("assay_inflight_responses", self._inflight)

    @contextlib.contextmanager
    def admitted(self, n: int) -> Iterator[None]:
        """Hold `n` responses' worth of the in-flight budget (Saturated when it is spent)."""
        self._admit(n)
        try:
            yield
        finally:
            self._release(n)

    def _check_responses(self, responses: list[Generation], where: str) -> None:
        limit = self.settings.max_response_chars
        for i, generation in enumerate(responses):
            response = generation.text
            if len(response) > limit:
                raise RequestInvalid(f"{where}[{i}]: response has {len(response)} characters; the limit is {limit}")

    # ------------------------------------------------------------ verification

    @staticmethod
    def job(resolved: Resolved, responses: list[str]) -> JudgeJob:
        # Evidence is the full audit view for every task: what a caller is shown of it is
        # chosen in service/views.py, from the feedback.
        return JudgeJob(resolved.verifier, resolved.task, resolved.raw, responses, reveal_hidden=True)

    def judge(self, resolved: Resolved, responses: list[str]) -> list[Judged]:
        """Blocking, in this process's sandbox (the CLI's local verify)."""
        assert isinstance(self.executor, LocalExecutor), "blocking judge needs the local executor"
        return self.executor.judge_now(self.job(resolved, responses))

    async def _judge_async(self, resolved: Resolved, responses: list[str]) -> list[Judged]:
        return await self.executor.judge(self.job(resolved, responses))

    def _row(self, resolved: Resolved, generation: Generation, judged: Judged, caller: Caller,
             request_id: str | None, group_id: str | None, group_index: int | None, submission: tuple[str, int],
             eval_id: str | None = None, run: RunTag | None = None) -> RecordRow:
        """`submission` is (this request's id, the response's index in it): unique in the store, so
        no response of a request is ever logged twice, whatever an executor retried."""
        outcome = apply_policies(resolved.task, generation, judged.outcome)
        response = generation.text
        reward = outcome.reward(resolved.task)
        flags = outcome.flag_map()
        self.metrics.verification(resolved.verifier.name, outcome.verdict.value, judged.duration_ms / 1000,
                                  list(flags), outcome.evidence)
        row = RecordRow(
            id=new_record_id(),
            created_at=datetime.now(UTC),  # before the receipt is signed, which names the time
            request_id=request_id,
            caller_key_id=caller.key_id,
            task_id=resolved.task_id,
            task_hash=resolved.task_hash,
            task_public=resolved.public,
            verifier=resolved.verifier.name,
            verifier_version=resolved.verifier.version,
            response_hash=sha256_text(response),
            response=response if self.settings.retention == "full" else None,
            components={c.name: {"value": c.value, "hard": c.hard} for c in outcome.components},
            reward=reward,
            verdict=outcome.verdict.value,
            evidence=outcome.evidence,
            feedback=resolved.feedback(outcome, response),
            flags=list(flags),
            flag_evidence=flags,
            sandbox_backend=self.executor.backend,
            usage=outcome.usage,
            duration_ms=round(judged.duration_ms, 3),
            group_id=group_id,
            group_index=group_index,
            submission_id=submission[0],
            submission_index=submission[1],
            tokens=generation.tokens,
            finish_reason=generation.finish_reason,
            masked=is_masked(resolved.task, generation, outcome.verdict.value),
            eval_id=eval_id,
            run_id=run.id if run else None,
            run_step=run.step if run else None,
        )
        log_verification(row)
        return row

    def result_of(self, row: RecordRow, view: views.View = "full") -> VerifyResult:
        """A record as a result, with its signed receipt, in the view chosen for the caller (service/views.py)."""
        signer = self.store.signer
        result = VerifyResult(
            receipt=None if signer is None else signer.receipt(row),
            record_id=row.id, verifier=row.verifier, verifier_version=row.verifier_version, reward=row.reward,
            verdict=row.verdict, components={k: ComponentOut(**v) for k, v in row.components.items()},
            evidence=row.evidence, feedback=row.feedback or {}, flags=row.flags, duration_ms=row.duration_ms,
            task_id=row.task_id, task_hash=row.task_hash, request_id=row.request_id,
            flag_evidence=row.flag_evidence or {}, tokens=row.tokens, finish_reason=row.finish_reason,
            masked=bool(row.masked),
        )
        return views.shown(result, view, registry.get(row.verifier).hidden_flags)

    def _blob(self, resolved: Resolved) -> TaskBlobRow:
        return TaskBlobRow(task_hash=resolved.task_hash, verifier=resolved.verifier.name, task=resolved.raw)

    @staticmethod
    def caller_facing(resolved: Resolved, exc: TaskInvalid) -> TaskInvalid:
        """A registered task's problems may quote its hidden content: name the field only."""
        if resolved.task_id is None:
            return exc
        log.warning("registered task %r is invalid at %s: %s", resolved.task_id, exc.field, exc)
        return TaskInvalid(f"{exc.field}: registered task {resolved.task_id!r} cannot be verified (invalid at "
                           f"{exc.field}); details are withheld because its content is hidden", field=exc.field)

    # ------------------------------------------------------------------ verify

    async def verify(self, req: VerifyRequest, caller: Caller) -> VerifyResult:
        generation = generation_of(req.response)
        self._check_responses([generation], "response")
        resolved = await resolve_where_cheap(self.resolve, req, [req])  # perf hook
        view = views.choose(caller, resolved.task_id is not None, req.evidence)
        if req.request_id is not None:
            existing = await anyio.to_thread.run_sync(self.store.record_by_request, caller.key_id, req.request_id)
            if existing is not None:
                return self._logged(existing, resolved, generation.text, view)
        self._admit(1)
        try:
            judged = (await self._judge_async(resolved, [generation.text]))[0]
        except TaskInvalid as exc:
            raise self.caller_facing(resolved, exc) from None
        finally:
            self._release(1)
        row = self._row(resolved, generation, judged, caller, req.request_id, None, None, (uuid.uuid4().hex, 0),
                        run=req.run)
        try:
            await self.store.append_async([row], [self._blob(resolved)])  # perf hook: group commit
        except Exception as exc:
            if req.request_id is not None and is_integrity_error(exc):
                existing = await anyio.to_thread.run_sync(self.store.record_by_request, caller.key_id,
                                                          req.request_id)
                if existing is not None:  # a concurrent retry logged it first
                    return self._logged(existing, resolved, generation.text, view)
            raise
        self._announce([row])
        return self.result_of(row, view)

    def _announce(self, rows: list[RecordRow]) -> None:
        if self.on_logged is not None and rows:
            self.on_logged(rows)

    def _logged(self, row: RecordRow, resolved: Resolved, response: str, view: views.View) -> VerifyResult:
        """The logged result of a repeated request_id, if the request is the same one."""
        differs = [name for name, same in (
            ("verifier", row.verifier == resolved.verifier.name),
            ("task_id", row.task_id == resolved.task_id),
            # Records written before keyed fingerprints name the task by its plain hash.
            ("task", row.task_hash in (resolved.task_hash, resolved.task.task_hash())),
            ("response", row.response_hash == sha256_text(response)),
        ) if not same]
        if differs:
            raise RequestIdConflict(f"request_id: {row.request_id!r} was already used for a different request "
                                    f"(record {row.id}: different {', '.join(differs)})")
        return self.result_of(row, view)

    # ------------------------------------------------------------------ groups

    async def groups(self, req: GroupsRequest, caller: Caller, idempotency_key: str | None = None,
                     eval_id: str | None = None) -> GroupsResponse:
        """Check limits, resolve every task (a problem here rejects the whole request,
        naming the group), verify the groups concurrently (a task found invalid while
        verifying fails only its own group), then log the records and answer."""
        generations = [[generation_of(r) for r in group.responses] for group in req.groups]
        self._check_group_limits(req, generations)
        body_hash = request_hash(req.model_dump(mode="json"))
        if idempotency_key is not None:
            stored = await anyio.to_thread.run_sync(self.store.idempotent_response, caller.key_id,
                                                    idempotency_key, body_hash)
            if stored is not None:
                return GroupsResponse.model_validate(stored)
        resolved = await resolve_where_cheap(self._resolve_groups, req, req.groups)  # perf hook
        shown = [views.choose(caller, r.task_id is not None, g.evidence, f"groups[{i}].evidence")
                 for i, (r, g) in enumerate(zip(resolved, req.groups, strict=True))]
        judged = await self._judge_groups(req, resolved, generations)
        rows: list[RecordRow] = []
        out: list[GroupResult] = []
        submission_id = uuid.uuid4().hex
        for index, (group, res, verdicts) in enumerate(zip(req.groups, resolved, judged, strict=True)):
            if isinstance(verdicts, GroupError):
                out.append(self._failed_group(group, index, verdicts))
                continue
            group_rows, result = self._group_result(req, group, res, generations[index], verdicts, caller,
                                                    (submission_id, len(rows)), eval_id, shown[index])
            rows += group_rows
            out.append(result)
        response = GroupsResponse(groups=out)
        used = [r for r, j in zip(resolved, judged, strict=True) if not isinstance(j, GroupError)]
        return await self._log_groups(response, rows, used, caller, idempotency_key, body_hash)

    def _check_group_limits(self, req: GroupsRequest, generations: list[list[Generation]]) -> None:
        s = self.settings
        if len(req.groups) > s.max_groups:
            raise RequestInvalid(f"groups: {len(req.groups)} groups; the limit is {s.max_groups}")
        generations = [[generation_of(r) for r in group.responses] for group in req.groups]
        for gi, group in enumerate(req.groups):
            if len(group.responses) > s.max_group_size:
                raise RequestInvalid(
                    f"groups[{gi}].responses: {len(group.responses)} responses; the limit is {s.max_group_size}")
            self._check_responses(generations[gi], f"groups[{gi}].responses")
        total = sum(len(g) for g in generations)
        if total > s.max_inflight_responses:  # would wait for room that can never come: not a 503
            raise RequestInvalid(f"groups: {total} responses in all; at most max_inflight_responses "
                                 f"({s.max_inflight_responses}) are verified at once: split the request")

    def _resolve_groups(self, req: GroupsRequest) -> list[Resolved]:
        """Blocking (registered tasks are read from the store). Errors name the group."""
        resolved = []
        for gi, group in enumerate(req.groups):
            try:
                resolved.append(self.resolve(group))
            except TaskInvalid as exc:
                raise task_error_at(exc, f"groups[{gi}]") from None
            except (UnknownVerifier, RequestInvalid) as exc:
                where = "" if str(exc).startswith("verifier:") else "verifier: "
                raise type(exc)(f"groups[{gi}].{where}{exc}") from None
            except TaskNotFound as exc:
                raise TaskNotFound(f"groups[{gi}].task_id: {exc}") from None
        return resolved

    async def _judge_groups(self, req: GroupsRequest, resolved: list[Resolved],
                            generations: list[list[Generation]]) -> list[list[Judged] | GroupError]:
        """Verify every group concurrently. A task found invalid fails its own group only;
        a busy or missing sandbox aborts the whole request (503, nothing logged)."""

        def group(index: int) -> Callable[[], Awaitable[list[Judged] | GroupError]]:
            async def run() -> list[Judged] | GroupError:
                try:
                    return await self._judge_async(resolved[index], [g.text for g in generations[index]])
                except TaskInvalid as exc:
                    shown = self.caller_facing(resolved[index], exc)
                    return GroupError(index=index, field=f"groups[{index}].{shown.field}", message=str(shown))
            return run

        total = sum(len(g.responses) for g in req.groups)
        self._admit(total)
        try:
            return await gather_or_abort([group(i) for i in range(len(req.groups))])
        finally:
            self._release(total)

    def _group_result(self, req: GroupsRequest, group: GroupSpec, resolved: Resolved, generations: list[Generation],
                      judged: list[Judged], caller: Caller, submission: tuple[str, int],
                      eval_id: str | None, view: views.View = "full") -> tuple[list[RecordRow], GroupResult]:
        """`submission`: the request's submission id and the index of this group's first response in it.
        Responses whose verdict is `error`, or masked by the truncation policy, are left out of the
        group statistics."""
        group_id = group.group_id or uuid.uuid4().hex
        submission_id, offset = submission
        rows = [self._row(resolved, gen, j, caller, None, group_id, index, (submission_id, offset + index), eval_id,
                          req.run)
                for index, (gen, j) in enumerate(zip(generations, judged, strict=True))]
        rewards = [r.reward for r in rows]
        include = [r.verdict != Verdict.error.value and not r.masked for r in rows]
        stats = group_advantages(rewards, include, req.advantage.scale, req.advantage.eps, req.advantage.bessel)
        # The record keeps what the caller was told about its group (the viewer shows it).
        for row, advantage in zip(rows, stats.advantages, strict=True):
            row.advantage, row.group_mean, row.group_std = advantage, stats.mean, stats.std
            row.group_zero_variance = stats.zero_variance
        if stats.zero_variance:
            self.metrics.inc("assay_zero_variance_groups_total", verifier=resolved.verifier.name)
        return rows, GroupResult(group_id=group_id, results=[self.result_of(r, view) for r in rows], rewards=rewards,
                                 advantages=stats.advantages, mean=stats.mean, std=stats.std,
                                 zero_variance=stats.zero_variance,
                                 errors=sum(r.verdict == Verdict.error.value for r in rows),
                                 masked=sum(bool(r.masked) for r in rows))

    @staticmethod
    def _failed_group(group: GroupSpec, index: int, error: GroupError) -> GroupResult:
        """A group whose task turned out invalid: no record, no reward, no advantage."""
        n = len(group.responses)
        return GroupResult(group_id=group.group_id or uuid.uuid4().hex, results=[], rewards=[None] * n,
                           advantages=[None] * n, mean=None, std=None, zero_variance=False, errors=n, error=error)

    async def _log_groups(self, response: GroupsResponse, rows: list[RecordRow], resolved: list[Resolved],
                          caller: Caller, idempotency_key: str | None, body_hash: str) -> GroupsResponse:
        idem = None
        if idempotency_key is not None:
            idem = IdempotencyRow(caller_key_id=caller.key_id, key=idempotency_key, request_hash=body_hash,
                                  response=response.model_dump(mode="json"))
        try:
            await self.store.append_async(rows, [self._blob(r) for r in resolved], idem)  # perf hook: group commit
        except Exception as exc:
            if idempotency_key is not None and is_integrity_error(exc):
                stored = await anyio.to_thread.run_sync(self.store.idempotent_response, caller.key_id,
                                                        idempotency_key, body_hash)
                if stored is not None:  # a concurrent retry of the same request won
                    return GroupsResponse.model_validate(stored)
            raise
        self._announce(rows)
        return response

    # ----------------------------------------------------------------- replay

    async def replay(self, record_id: str) -> ReplayOut:
        """Re-run a record's logged inputs through the executor (never on the replica under `ray`)."""
        row = await anyio.to_thread.run_sync(self.store.record, record_id)
        if row is None:
            raise TaskNotFound(f"record {record_id!r} not found")
        if row.response is None:
            raise RequestInvalid("record: the response was not retained (retention=hash_only); cannot replay")
        blob = await anyio.to_thread.run_sync(self.store.task_blob, row.task_hash)
        if blob is None:
            raise TaskNotFound(f"task content for record {record_id!r} is missing")
        verifier = registry.get(row.verifier)
        task = verifier.parse_task(blob.task)
        resolved = Resolved(verifier, task, row.task_id, row.task_hash, blob.task, row.task_public)
        try:
            judged = (await self._judge_async(resolved, [row.response]))[0]
        except TaskInvalid as exc:
            raise self.caller_facing(resolved, exc) from None
        outcome = apply_policies(task, Generation(row.response, row.tokens, row.finish_reason), judged.outcome)
        reward = outcome.reward(task)
        return ReplayOut(record_id=row.id, original_verdict=row.verdict, replayed_verdict=outcome.verdict.value,
                         original_reward=row.reward, replayed_reward=reward,
                         same_verdict=row.verdict == outcome.verdict.value,
                         same_version=row.verifier_version == verifier.version, verifier_version=verifier.version)
