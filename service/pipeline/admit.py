"""Stage 2, admit: the request is within the service's limits, and it is not a repeat.

A repeat (the same Idempotency-Key and body, or the same `request_id` and inputs) is the
early exit: the logged answer, no new work, no new record. The in-flight budget
(`Budget`) is what the judge stage holds while it runs: a request that finds it spent is
`Saturated` (503 + Retry-After).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from service.errors import RequestIdConflict, RequestInvalid, Saturated
from service.metrics import Metrics
from service.pipeline.resolve import Resolved, ResolvedGroup
from service.schemas import GroupResult, GroupsResponse
from service.tables import RecordRow
from verifiers.base import sha256_text

if TYPE_CHECKING:
    from service.pipeline import Pipeline
    from service.pipeline.work import Work


class Budget:
    """Responses being verified in this process, at most `limit` at once."""

    def __init__(self, limit: int, metrics: Metrics) -> None:
        self.limit = limit
        self.metrics = metrics
        self.inflight = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def hold(self, n: int) -> Iterator[None]:
        """Hold `n` responses' worth of the budget (Saturated when it is spent)."""
        with self._lock:
            if self.inflight + n > self.limit:
                self.metrics.inc("assay_rejected_total", reason="saturated")
                raise Saturated(f"{self.inflight} responses are being verified; retry later")
            self.inflight += n
            self.metrics.set("assay_inflight_responses", self.inflight)
        try:
            yield
        finally:
            with self._lock:
                self.inflight -= n
                self.metrics.set("assay_inflight_responses", self.inflight)


@dataclass(frozen=True)
class Admitted:
    """Admitted work: its body's hash (what an idempotent repeat must match), or the logged
    answer of a repeat (`answer`, the early exit)."""

    body_hash: str | None = None
    answer: GroupsResponse | None = None


def request_hash(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def check_limits(p: Pipeline, work: Work, groups: list[ResolvedGroup]) -> None:
    s = p.settings
    if not work.single and len(work.groups) > s.max_groups:
        raise RequestInvalid(f"groups: {len(work.groups)} groups; the limit is {s.max_groups}")
    for gi, group in enumerate(groups):
        if not work.single and len(group.generations) > s.max_group_size:
            raise RequestInvalid(f"groups[{gi}].responses: {len(group.generations)} responses; "
                                 f"the limit is {s.max_group_size}")
        where = work.responses_field(gi)
        for i, generation in enumerate(group.generations):
            if len(generation.text) > s.max_response_chars:
                raise RequestInvalid(f"{where}[{i}]: response has {len(generation.text)} characters; "
                                     f"the limit is {s.max_response_chars}")
    if work.size > s.max_inflight_responses:  # would wait for room that can never come: not a 503
        raise RequestInvalid(f"groups: {work.size} responses in all; at most max_inflight_responses "
                             f"({s.max_inflight_responses}) are verified at once: split the request")


async def admit(p: Pipeline, work: Work, groups: list[ResolvedGroup]) -> Admitted:
    check_limits(p, work, groups)
    if work.single:
        if work.request_id is not None:
            row = await anyio.to_thread.run_sync(p.store.record_by_request, work.caller.key_id, work.request_id)
            if row is not None:
                return Admitted(answer=logged_single(p, row, groups[0]))
        return Admitted()
    if work.idempotency_key is None:  # nothing to repeat: no body hash, no store read, no thread hop
        return Admitted()
    return await anyio.to_thread.run_sync(_idempotent, p, work)


def _idempotent(p: Pipeline, work: Work) -> Admitted:
    """The body's hash, and the stored answer of an earlier request with the same key and body. Blocking."""
    body_hash = request_hash(work.body.model_dump(mode="json"))
    if work.idempotency_key is not None:
        stored = p.store.idempotent_response(work.caller.key_id, work.idempotency_key, body_hash)
        if stored is not None:
            return Admitted(body_hash, GroupsResponse.model_validate(stored))
    return Admitted(body_hash)


def logged_single(p: Pipeline, row: RecordRow, group: ResolvedGroup) -> GroupsResponse:
    """The logged result of a repeated `request_id`, if the request is the same one."""
    from service.pipeline.results import result_of

    same_request(row, group.resolved, group.generations[0].text)
    result = result_of(p.store.signer, row, group.view, group.sent)
    return GroupsResponse(groups=[GroupResult(group_id="", results=[result], rewards=[result.reward],
                                              advantages=[None], mean=None, std=None, zero_variance=False, errors=0)])


def same_request(row: RecordRow, resolved: Resolved, response: str) -> None:
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
