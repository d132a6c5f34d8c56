"""Stage 1, resolve: each group's verifier and parsed task (a registered task read from the
store), its hash and public view, and the view of the decision its caller may see.

Blocking (the store is read): the pipeline calls it in a thread. A problem rejects the whole
request and names the group (4xx); nothing has run yet.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from assay_rules.canonical import task_sent
from service import views
from service.errors import RecordNotFound, RequestInvalid, TaskNotFound
from service.schemas import RegisteredTask, TaskRef, TaskRegistration
from service.tables import RecordRow, TaskBlobRow
from verifiers import registry
from verifiers.base import Outcome, TaskBase, TaskInvalid, UnknownVerifier, Verifier
from verifiers.feedback import HiddenText, infrastructure
from verifiers.inspection import Generation

if TYPE_CHECKING:
    from service.pipeline import Pipeline
    from service.pipeline.work import Work

log = logging.getLogger(__name__)
_TASK_PARTS = re.compile(r"(^|; )(task\b)")


@dataclass(frozen=True, eq=False)
class Resolved:
    """One task, ready to verify against."""

    verifier: Verifier
    task: TaskBase
    task_id: str | None
    task_hash: str
    raw: dict[str, Any]
    # The public view (keyed fingerprints for hidden fields), computed once per task, not per record.
    public: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def _hidden_text(self) -> HiddenText:
        return HiddenText.of(self.task)

    def feedback(self, outcome: Outcome, response: str) -> dict[str, Any]:
        """The family's feedback, with any hidden word the response did not state masked."""
        shown = {**self.verifier.feedback(self.task, outcome, response), **infrastructure(outcome)}
        return self._hidden_text.scrub(shown, response)

    def blob(self) -> TaskBlobRow:
        return self._blob  # read only by the record writer: one per task, not one per request

    @cached_property
    def _blob(self) -> TaskBlobRow:
        return TaskBlobRow(task_hash=self.task_hash, verifier=self.verifier.name, task=self.raw)


@dataclass(frozen=True)
class ResolvedGroup:
    """A group's task, its responses and the view its caller gets."""

    resolved: Resolved
    generations: list[Generation]
    view: views.View
    # The receipt's `task_sent` (assay_rules.canonical.task_sent): the task as this request named it.
    sent: str | None = None


def resolve(p: Pipeline, ref: TaskRef, *, certified_only: bool = True) -> Resolved:
    """The verifier and parsed task of a reference. `certified_only`: with the setting
    `require_certified_tasks`, a registered task must hold a `certified` certificate."""
    verifier = registry.get(ref.verifier)
    if ref.task_id is not None:
        found = p.store.registered_task(ref.task_id)
        if found is None:
            raise TaskNotFound(f"task_id {ref.task_id!r} is not registered")
        row, blob = found
        if row.verifier != verifier.name:
            raise RequestInvalid(f"verifier: task {ref.task_id!r} belongs to verifier {row.verifier!r}")
        if certified_only and p.settings.require_certified_tasks and not p.store.is_certified(row.task_hash):
            raise TaskInvalid(f"task: registered task {ref.task_id!r} is not certified (POST /v1/tasks/certify); "
                              "this service verifies certified tasks only", field="task_id")
        task = verifier.parse_task(blob.task)
        return Resolved(verifier, task, ref.task_id, row.task_hash, blob.task, p.fingerprints.public_view(task))
    assert ref.task is not None
    raw = ref.task
    return p.tasks.get(verifier.name, raw, lambda: _inline(p, verifier, raw))


def _inline(p: Pipeline, verifier: Verifier, raw: dict[str, Any]) -> Resolved:
    """An inline task parsed, hashed and given its public view (kept per task by `p.tasks`)."""
    task = verifier.parse_task(raw)
    return Resolved(verifier, task, None, p.fingerprints.task_hash(task), task.model_dump(mode="json"),
                    p.fingerprints.public_view(task))


def resolve_work(p: Pipeline, work: Work) -> list[ResolvedGroup]:
    """Every group of a request; an error names the group (`groups[i]...`)."""
    from service.pipeline.work import generation_of

    out = []
    for gi, group in enumerate(work.groups):
        where = work.where(gi)
        try:
            resolved = resolve(p, group)
        except TaskInvalid as exc:
            raise task_error_at(exc, where) if where else exc from None
        except (UnknownVerifier, RequestInvalid) as exc:
            if not where:
                raise
            inner = "" if str(exc).startswith("verifier:") else "verifier: "
            raise type(exc)(f"{where}.{inner}{exc}") from None
        except TaskNotFound as exc:
            if not where:
                raise
            raise TaskNotFound(f"{where}.task_id: {exc}") from None
        generations = [generation_of(r) for r in group.responses]
        view = views.choose(work.caller, resolved.task_id is not None, group.evidence, work.evidence_field(gi))
        out.append(ResolvedGroup(resolved, generations, view, task_sent(group.verifier, group.task, group.task_id)))
    return out


def from_record(row: RecordRow, blob: TaskBlobRow | None) -> Resolved:
    """A logged record's task, as it was verified (replay)."""
    if blob is None:
        raise RecordNotFound(f"task content for record {row.id!r} is missing")
    verifier = registry.get(row.verifier)
    return Resolved(verifier, verifier.parse_task(blob.task), row.task_id, row.task_hash, blob.task, row.task_public)


def task_error_at(exc: TaskInvalid, where: str) -> TaskInvalid:
    """The same problem placed in a request: every "task.x: ..." part of its message, and its
    field, get `where` (e.g. `groups[2]`) in front."""
    return TaskInvalid(_TASK_PARTS.sub(rf"\1{where}.\2", str(exc)), field=f"{where}.{exc.field}")


def caller_facing(resolved: Resolved, exc: TaskInvalid) -> TaskInvalid:
    """A registered task's problems may quote its hidden content: name the field only."""
    if resolved.task_id is None:
        return exc
    log.warning("registered task %r is invalid at %s: %s", resolved.task_id, exc.field, exc)
    return TaskInvalid(f"{exc.field}: registered task {resolved.task_id!r} cannot be verified (invalid at "
                       f"{exc.field}); details are withheld because its content is hidden", field=exc.field)


# ------------------------------------------------------------ the task registry


def register_task(p: Pipeline, reg: TaskRegistration) -> RegisteredTask:
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
    task_hash = p.fingerprints.task_hash(task)
    created = p.store.register_task(reg.task_id, verifier.name, task_hash, task.model_dump(mode="json"))
    if not created:  # the id's own hash: a task registered before keyed fingerprints keeps its plain one
        found = p.store.registered_task(reg.task_id)
        task_hash = found[0].task_hash if found is not None else task_hash
    return RegisteredTask(task_id=reg.task_id, verifier=verifier.name, task_hash=task_hash,
                          created=created, task=p.fingerprints.public_view(task))


def registered(p: Pipeline, task_id: str) -> RegisteredTask:
    found = p.store.registered_task(task_id)
    if found is None:
        raise TaskNotFound(f"task_id {task_id!r} is not registered")
    row, blob = found
    task = registry.get(row.verifier).parse_task(blob.task)
    return RegisteredTask(task_id=task_id, verifier=row.verifier, task_hash=row.task_hash, created=False,
                          task=p.fingerprints.public_view(task))
