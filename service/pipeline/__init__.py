"""The verification pipeline: every reward the service gives goes through `run_groups`.

Read top to bottom, one stage per module, each returning a small frozen value:

    resolve     tasks -> `Resolved` (verifier, parsed task, hash, public view) per group
    admit       limits, and a repeat answered from the log (the early exit) -> `Admitted`
    judge       each group to the executor as a `JudgeJob` -> one `Judged` per response
    score       outcome -> `Scored` (policies, reward, components, flags, feedback, masked)
    advantages  group-relative advantages over the responses that count -> `GroupStats`
    persist     records (+ task blobs, idempotency row) in one transaction, then the answer

`POST /v1/groups`, `POST /v1/verify` (a group of one, without group statistics), the
OpenRLHF route, evaluation runs and environment finishes all call `run_groups`. Replay and
the CLI's local `assay verify` run the same resolve, judge and score stages without
logging anything. `results.py` is the one mapper from a decision to a record and from a
record to what callers see.

Glossary (one word, one meaning):
    judge        the pipeline stage that has responses verified (and only that).
    verify       what a verifier does to one response (`Verifier.verify`); the HTTP route.
    run          what an executor does with a `JudgeJob` (`Executor.run`).
    executor     where verification runs: `local` threads or `ray` tasks (service/executors/).
    sandbox      where untrusted work runs (sandboxes/); one `SandboxConfig` builds it.
    outcome      a verifier's evidence, components, verdict and flags for one response.
    decision     an outcome scored for a task (`Scored`): reward, feedback, masked.
    record       the audit row of one decision (`RecordRow`); `result` is what a caller gets.
    group        one task with G responses; advantages are relative within it.
    session      an environment session: a multi-turn `tool_state` rollout (`/v1/envs`), in the database.
    sign-in      a viewer login (`/ui/`; module service/ui/sessions.py keeps its old name).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import anyio

from service.auth import Caller
from service.config import Settings
from service.errors import RecordNotFound, RequestInvalid
from service.executors.base import Executor, Judged
from service.fingerprints import Fingerprints, create_fingerprints
from service.metrics import Metrics
from service.pipeline import admit, advantages, judge, persist, resolve, score
from service.pipeline.admit import Budget
from service.pipeline.resolve import Resolved, ResolvedGroup
from service.pipeline.task_cache import ResolvedTasks, resolve_where_cheap
from service.pipeline.work import Work, generation_of
from service.schemas import GroupError, GroupSpec, GroupsRequest, GroupsResponse, ReplayOut, VerifyRequest, VerifyResult
from service.store import AuditStore
from service.tables import RecordRow
from verifiers.inspection import Generation

# Requests of at most this many responses are scored and made into records on the event loop
# (about 0.1-0.2 ms of CPU a response); larger ones on a worker thread, so that the loop stays
# free for other requests. A hop to a worker thread costs about as much as two such records
# (docs/benchmarks.md, "The service's cost per request").
INLINE_RESPONSES = 8

__all__ = ["Pipeline", "Resolved", "Work", "generation_of", "replay", "run_groups", "verify_locally"]


@dataclass
class Pipeline:
    """What the stages share: settings, the store, the executor, metrics, fingerprints and the
    in-flight budget. One per app (or per CLI command)."""

    settings: Settings
    store: AuditStore
    executor: Executor
    metrics: Metrics
    fingerprints: Fingerprints | None = None  # None: the deployment's keyed fingerprints
    budget: Budget = field(init=False)
    tasks: ResolvedTasks = field(init=False)  # inline tasks resolved once per task
    # Called with the records of each answered request once they are logged (runs' alarms watch it).
    on_logged: Callable[[list[RecordRow]], None] | None = field(default=None)

    def __post_init__(self) -> None:
        if self.fingerprints is None:
            self.fingerprints = create_fingerprints(self.settings)
        self.budget = Budget(self.settings.max_inflight_responses, self.metrics)
        self.tasks = ResolvedTasks()

    async def groups(self, req: GroupsRequest, caller: Caller, idempotency_key: str | None = None,
                     eval_id: str | None = None) -> GroupsResponse:
        work = Work(req.groups, caller, req.run, req.advantage, idempotency_key=idempotency_key, eval_id=eval_id,
                    body=req)
        return await run_groups(self, work)

    async def verify(self, req: VerifyRequest, caller: Caller) -> VerifyResult:
        """A group of one: no group statistics, repeated by `request_id`."""
        spec = GroupSpec.model_construct(verifier=req.verifier, task=req.task, task_id=req.task_id,
                                         responses=[req.response], evidence=req.evidence, group_id=None)
        answer = await run_groups(self, Work([spec], caller, req.run, request_id=req.request_id))
        return answer.groups[0].results[0]

    async def replay(self, record_id: str) -> ReplayOut:
        return await replay(self, record_id)


async def run_groups(p: Pipeline, work: Work) -> GroupsResponse:
    """Verify groups: resolve -> admit -> judge -> score -> advantages -> persist."""
    groups = await resolve_where_cheap(partial(resolve.resolve_work, p), work, work.groups)  # 4xx naming the group
    admitted = await admit.admit(p, work, groups)  # limits; a repeat gets its logged answer
    if admitted.answer is not None:
        return admitted.answer
    with p.budget.hold(work.size):  # 503 when spent; held while the executor works
        judged = await judge.judge(p.executor, work, groups)  # an invalid task fails its group only
    if work.size <= INLINE_RESPONSES:  # a few records: cheaper here than a hop to a worker thread
        rows, answer = _conclude(p, work, groups, judged)
    else:
        rows, answer = await anyio.to_thread.run_sync(_conclude, p, work, groups, judged)  # CPU work: off the loop
    return await persist.persist(p, work, admitted, groups, rows, answer)  # logged before answering


def _conclude(p: Pipeline, work: Work, groups: list[ResolvedGroup],
              judged: list[list[Judged] | GroupError]) -> tuple[list[RecordRow], GroupsResponse]:
    """Score, advantages, and the records and answer made of them (blocking)."""
    scored = score.score_groups(groups, judged)
    stats = advantages.group_stats(work, groups, scored, p.metrics)
    return persist.records(p, work, groups, scored, stats)


async def replay(p: Pipeline, record_id: str) -> ReplayOut:
    """Re-run a record's logged inputs through resolve, judge and score (nothing is logged;
    under `ray`, never on the replica)."""
    row = await anyio.to_thread.run_sync(p.store.record, record_id)
    if row is None:
        raise RecordNotFound(f"record {record_id!r} not found")
    if row.response is None:
        raise RequestInvalid("record: the response was not retained (retention=hash_only); cannot replay")
    blob = await anyio.to_thread.run_sync(p.store.task_blob, row.task_hash)
    resolved = resolve.from_record(row, blob)
    generation = Generation(row.response, row.tokens, row.finish_reason)
    judged = (await judge.judge_one(p.executor, resolved, [row.response]))[0]
    decision = score.score(resolved, generation, judged, with_feedback=False)
    return ReplayOut(record_id=row.id, original_verdict=row.verdict, replayed_verdict=decision.verdict,
                     original_reward=row.reward, replayed_reward=decision.reward,
                     same_verdict=row.verdict == decision.verdict,
                     same_version=row.verifier_version == resolved.verifier.version,
                     verifier_version=resolved.verifier.version)


async def verify_locally(p: Pipeline, req: VerifyRequest) -> dict[str, object]:
    """The CLI's local `assay verify`: resolve, judge and score one response; nothing logged."""
    resolved = await anyio.to_thread.run_sync(resolve.resolve, p, req)
    generation = generation_of(req.response)
    judged = (await judge.judge_one(p.executor, resolved, [generation.text]))[0]
    return score.score(resolved, generation, judged).shown(resolved)
