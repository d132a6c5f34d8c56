"""The verification engine: resolve tasks, run verifiers off the event loop, compute
advantages, and write one audit record per verification before answering."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import anyio

from sandboxes.base import Sandbox, SandboxBusy, SandboxError
from service.advantages import group_advantages
from service.auth import Caller
from service.config import Settings
from service.metrics import Metrics
from service.schemas import (
    ComponentOut,
    GenerationIn,
    GroupResult,
    GroupsRequest,
    GroupsResponse,
    RegisteredTask,
    ReplayOut,
    ResponseIn,
    TaskRef,
    TaskRegistration,
    VerifyRequest,
    VerifyResult,
)
from service.store import AuditStore, IdempotencyRow, RecordRow, TaskBlobRow, is_integrity_error, new_record_id
from verifiers import registry
from verifiers.base import Outcome, TaskBase, TaskInvalid, Verdict, Verifier, VerifyContext, hard, sha256_text
from verifiers.inspection import Generation, apply_policies, is_masked

log = logging.getLogger(__name__)


class Saturated(Exception):
    """Too much work in flight: the caller should retry after a pause."""


class TaskNotFound(LookupError):
    pass


class RequestInvalid(ValueError):
    """A request breaks a service limit; the message names the field."""


@dataclass
class Resolved:
    verifier: Verifier
    task: TaskBase
    task_id: str | None
    task_hash: str
    raw: dict[str, Any]
    public: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Computed once per task, not once per record.
        self.public = self.task.public_view()


@dataclass
class Judged:
    outcome: Outcome
    duration_ms: float


def generation_of(response: ResponseIn) -> Generation:
    if isinstance(response, GenerationIn):
        return Generation(response.text, response.tokens, response.finish_reason)
    return Generation(response)


def request_hash(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


class Engine:
    def __init__(self, settings: Settings, store: AuditStore, sandbox: Sandbox, metrics: Metrics) -> None:
        self.settings = settings
        self.store = store
        self.sandbox = sandbox
        self.metrics = metrics
        self._limiter = anyio.CapacityLimiter(settings.verify_threads)
        self._inflight = 0
        self._inflight_lock = threading.Lock()

    # ------------------------------------------------------------------- tasks

    def resolve(self, ref: TaskRef) -> Resolved:
        verifier = registry.get(ref.verifier)
        if ref.task_id is not None:
            found = self.store.registered_task(ref.task_id)
            if found is None:
                raise TaskNotFound(f"task_id {ref.task_id!r} is not registered")
            row, blob = found
            if row.verifier != verifier.name:
                raise RequestInvalid(f"verifier: task {ref.task_id!r} belongs to verifier {row.verifier!r}")
            task = verifier.parse_task(blob.task)
            return Resolved(verifier, task, ref.task_id, row.task_hash, blob.task)
        assert ref.task is not None
        task = verifier.parse_task(ref.task)
        raw = task.model_dump(mode="json")
        return Resolved(verifier, task, None, task.task_hash(), raw)

    def register_task(self, reg: TaskRegistration) -> RegisteredTask:
        verifier = registry.get(reg.verifier)
        task = verifier.parse_task(reg.task)
        created = self.store.register_task(reg.task_id, verifier.name, task.task_hash(), task.model_dump(mode="json"))
        return RegisteredTask(task_id=reg.task_id, verifier=verifier.name, task_hash=task.task_hash(),
                              created=created, task=task.public_view())

    def registered(self, task_id: str) -> RegisteredTask:
        found = self.store.registered_task(task_id)
        if found is None:
            raise TaskNotFound(f"task_id {task_id!r} is not registered")
        row, blob = found
        task = registry.get(row.verifier).parse_task(blob.task)
        return RegisteredTask(task_id=task_id, verifier=row.verifier, task_hash=row.task_hash, created=False,
                              task=task.public_view())

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

    def _check_responses(self, responses: list[Generation], where: str) -> None:
        limit = self.settings.max_response_chars
        for i, generation in enumerate(responses):
            response = generation.text
            if len(response) > limit:
                raise RequestInvalid(f"{where}[{i}]: response has {len(response)} characters; the limit is {limit}")

    # ------------------------------------------------------------ verification

    def judge(self, resolved: Resolved, responses: list[str]) -> list[Judged]:
        """Blocking: run the verifier; never raises for a response's own behaviour."""
        verifier = resolved.verifier
        ctx = VerifyContext(self.sandbox, reveal_hidden=resolved.task_id is None,
                            services=self.settings.verifier_services)
        started = time.perf_counter()
        try:
            if type(verifier).verify_many is not Verifier.verify_many:
                outcomes = verifier.verify_many(resolved.task, responses, ctx)
                per = (time.perf_counter() - started) * 1000 / max(len(responses), 1)
                return [Judged(o, per) for o in outcomes]
            return [self._judge_one(verifier, resolved.task, r, ctx) for r in responses]
        except TaskInvalid:
            raise
        except Exception as exc:  # infrastructure or verifier bug: reported, never a reward
            per = (time.perf_counter() - started) * 1000 / max(len(responses), 1)
            return [Judged(self._error_outcome(verifier, exc), per) for _ in responses]

    def _judge_one(self, verifier: Verifier, task: TaskBase, response: str, ctx: VerifyContext) -> Judged:
        started = time.perf_counter()
        try:
            outcome = verifier.verify(task, response, ctx)
        except TaskInvalid:
            raise
        except Exception as exc:
            outcome = self._error_outcome(verifier, exc)
        return Judged(outcome, (time.perf_counter() - started) * 1000)

    def _error_outcome(self, verifier: Verifier, exc: Exception) -> Outcome:
        kind = "sandbox_error" if isinstance(exc, SandboxError) else "verifier_error"
        if isinstance(exc, SandboxBusy):
            kind = "sandbox_busy"
        log.exception("verification failed in %s", verifier.name, exc_info=exc)
        self.metrics.inc("assay_errors_total", verifier=verifier.name, kind=kind)
        return Outcome(Verdict.error, [hard("correctness", False)],
                       {"error": kind, "message": f"{type(exc).__name__}: {str(exc)[:500]}"}, flags=[kind])

    async def _judge_async(self, resolved: Resolved, responses: list[str]) -> list[Judged]:
        verifier = resolved.verifier
        if type(verifier).verify_many is not Verifier.verify_many or len(responses) == 1:
            return await anyio.to_thread.run_sync(self.judge, resolved, responses, limiter=self._limiter)
        results: list[list[Judged]] = [[] for _ in responses]

        async def one(i: int) -> None:
            results[i] = await anyio.to_thread.run_sync(self.judge, resolved, [responses[i]], limiter=self._limiter)

        async with anyio.create_task_group() as tg:
            for i in range(len(responses)):
                tg.start_soon(one, i)
        return [r[0] for r in results]

    def _row(self, resolved: Resolved, generation: Generation, judged: Judged, caller: Caller,
             request_id: str | None, group_id: str | None, group_index: int | None,
             eval_id: str | None = None) -> RecordRow:
        outcome = apply_policies(resolved.task, generation, judged.outcome)
        response = generation.text
        reward = outcome.reward(resolved.task)
        flags = outcome.flag_map()
        self.metrics.inc("assay_verifications_total", verifier=resolved.verifier.name, verdict=outcome.verdict.value)
        for name in flags:
            self.metrics.inc("assay_flags_total", verifier=resolved.verifier.name, flag=name)
        self.metrics.observe("assay_verification_seconds", judged.duration_ms / 1000, verifier=resolved.verifier.name)
        return RecordRow(
            id=new_record_id(),
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
            flags=list(flags),
            flag_evidence=flags,
            sandbox_backend=self.sandbox.name,
            usage=outcome.usage,
            duration_ms=round(judged.duration_ms, 3),
            group_id=group_id,
            group_index=group_index,
            tokens=generation.tokens,
            finish_reason=generation.finish_reason,
            masked=is_masked(resolved.task, generation, outcome.verdict.value),
            eval_id=eval_id,
        )

    @staticmethod
    def result_of(row: RecordRow) -> VerifyResult:
        return VerifyResult(
            record_id=row.id, verifier=row.verifier, verifier_version=row.verifier_version, reward=row.reward,
            verdict=row.verdict, components={k: ComponentOut(**v) for k, v in row.components.items()},
            evidence=row.evidence, flags=row.flags, duration_ms=row.duration_ms, task_id=row.task_id,
            task_hash=row.task_hash, request_id=row.request_id, flag_evidence=row.flag_evidence or {},
            tokens=row.tokens, finish_reason=row.finish_reason, masked=bool(row.masked),
        )

    def _blob(self, resolved: Resolved) -> TaskBlobRow:
        return TaskBlobRow(task_hash=resolved.task_hash, verifier=resolved.verifier.name, task=resolved.raw)

    async def verify(self, req: VerifyRequest, caller: Caller) -> VerifyResult:
        generation = generation_of(req.response)
        self._check_responses([generation], "response")
        if req.request_id is not None:
            existing = await anyio.to_thread.run_sync(self.store.record_by_request, caller.key_id, req.request_id)
            if existing is not None:
                return self.result_of(existing)
        resolved = self.resolve(req)
        self._admit(1)
        try:
            judged = (await self._judge_async(resolved, [generation.text]))[0]
        finally:
            self._release(1)
        row = self._row(resolved, generation, judged, caller, req.request_id, None, None)
        try:
            await anyio.to_thread.run_sync(self.store.append, [row], [self._blob(resolved)])
        except Exception as exc:
            if req.request_id is not None and is_integrity_error(exc):
                existing = self.store.record_by_request(caller.key_id, req.request_id)
                if existing is not None:  # a concurrent retry logged it first
                    return self.result_of(existing)
            raise
        return self.result_of(row)

    async def groups(self, req: GroupsRequest, caller: Caller, idempotency_key: str | None = None,
                     eval_id: str | None = None) -> GroupsResponse:
        s = self.settings
        if len(req.groups) > s.max_groups:
            raise RequestInvalid(f"groups: {len(req.groups)} groups; the limit is {s.max_groups}")
        generations = [[generation_of(r) for r in group.responses] for group in req.groups]
        for gi, group in enumerate(req.groups):
            if len(group.responses) > s.max_group_size:
                raise RequestInvalid(
                    f"groups[{gi}].responses: {len(group.responses)} responses; the limit is {s.max_group_size}")
            self._check_responses(generations[gi], f"groups[{gi}].responses")
        body_hash = request_hash(req.model_dump(mode="json"))
        if idempotency_key is not None:
            stored = await anyio.to_thread.run_sync(self.store.idempotent_response, caller.key_id,
                                                    idempotency_key, body_hash)
            if stored is not None:
                return GroupsResponse.model_validate(stored)
        resolved = [self.resolve(group) for group in req.groups]
        total = sum(len(group.responses) for group in req.groups)
        self._admit(total)
        try:
            judged: list[list[Judged]] = [[] for _ in req.groups]

            async def run(i: int) -> None:
                judged[i] = await self._judge_async(resolved[i], [g.text for g in generations[i]])

            async with anyio.create_task_group() as tg:
                for i in range(len(req.groups)):
                    tg.start_soon(run, i)
        finally:
            self._release(total)
        rows: list[RecordRow] = []
        out: list[GroupResult] = []
        for group, res, group_gens, group_judged in zip(req.groups, resolved, generations, judged, strict=True):
            group_id = group.group_id or uuid.uuid4().hex
            group_rows = [self._row(res, gen, j, caller, None, group_id, index, eval_id)
                          for index, (gen, j) in enumerate(zip(group_gens, group_judged, strict=True))]
            rows += group_rows
            rewards = [r.reward for r in group_rows]
            include = [r.verdict != Verdict.error.value and not r.masked for r in group_rows]
            stats = group_advantages(rewards, include, req.advantage.scale, req.advantage.eps, req.advantage.bessel)
            for row, advantage in zip(group_rows, stats.advantages, strict=True):
                row.advantage, row.group_mean, row.group_std = advantage, stats.mean, stats.std
                row.group_zero_variance = stats.zero_variance
            if stats.zero_variance:
                self.metrics.inc("assay_zero_variance_groups_total", verifier=res.verifier.name)
            out.append(GroupResult(group_id=group_id, results=[self.result_of(r) for r in group_rows],
                                   rewards=rewards, advantages=stats.advantages, mean=stats.mean, std=stats.std,
                                   zero_variance=stats.zero_variance,
                                   errors=sum(r.verdict == Verdict.error.value for r in group_rows),
                                   masked=sum(bool(r.masked) for r in group_rows)))
        response = GroupsResponse(groups=out)
        idem = None
        if idempotency_key is not None:
            idem = IdempotencyRow(caller_key_id=caller.key_id, key=idempotency_key, request_hash=body_hash,
                                  response=response.model_dump(mode="json"))
        try:
            await anyio.to_thread.run_sync(self.store.append, rows, [self._blob(r) for r in resolved], idem)
        except Exception as exc:
            if idempotency_key is not None and is_integrity_error(exc):
                stored = self.store.idempotent_response(caller.key_id, idempotency_key, body_hash)
                if stored is not None:  # a concurrent retry of the same request won
                    return GroupsResponse.model_validate(stored)
            raise
        return response

    # ----------------------------------------------------------------- replay

    def replay(self, record_id: str) -> ReplayOut:
        row = self.store.record(record_id)
        if row is None:
            raise TaskNotFound(f"record {record_id!r} not found")
        if row.response is None:
            raise RequestInvalid("record: the response was not retained (retention=hash_only); cannot replay")
        blob = self.store.task_blob(row.task_hash)
        if blob is None:
            raise TaskNotFound(f"task content for record {record_id!r} is missing")
        verifier = registry.get(row.verifier)
        task = verifier.parse_task(blob.task)
        resolved = Resolved(verifier, task, row.task_id, row.task_hash, blob.task)
        judged = self.judge(resolved, [row.response])[0]
        outcome = apply_policies(task, Generation(row.response, row.tokens, row.finish_reason), judged.outcome)
        reward = outcome.reward(task)
        return ReplayOut(record_id=row.id, original_verdict=row.verdict, replayed_verdict=outcome.verdict.value,
                         original_reward=row.reward, replayed_reward=reward,
                         same_verdict=row.verdict == outcome.verdict.value,
                         same_version=row.verifier_version == verifier.version, verifier_version=verifier.version)
