"""The registered `proof` verifier: Metamath proofs checked against set.mm and friends.

The host finds the proof in the response (extract.py); the check itself runs in the
sandbox, in warm sessions forked from workers that already hold set.mm (serve.py), so a
proof costs milliseconds instead of the seconds a database read takes. Hard components:
`format` (a proof was found and parses), `compliance` (only usable references: nothing
after the theorem, nothing outside `allowed`, no forbidden axiom in the dependency
closure, no `?` step, no statement declared by the response) and `correctness` (the
proof yields exactly the stated assertion from the stated hypotheses).
"""

from __future__ import annotations

import functools
from typing import Any

from sandboxes.base import Limits, SandboxError, entry
from sandboxes.resident import Answer, ResidentSpec, answer_all, close_resident_servers, warm_pools
from verifiers.base import (
    Outcome,
    Probe,
    TaskBase,
    TaskInvalid,
    Verdict,
    Verifier,
    VerifyContext,
    clip,
    gated_verdict,
    hard,
)
from verifiers.proof import certify
from verifiers.proof.extract import extract_proof
from verifiers.proof.feedback import proof_feedback
from verifiers.proof.inside import serve
from verifiers.proof.task import ProofTask
from verifiers.registry import register

PRELOAD = (serve.__name__,)
TARGET = entry(serve.serve)
POOL = "proof"
# Workers hold set.mm (a few hundred MB); sessions are forks of them.
MEMORY_MB = 3072
SESSIONS = ResidentSpec(TARGET, "proof_serve", PRELOAD,
                        Limits(wall_s=600, cpu_s=300, memory_mb=MEMORY_MB, processes=4,
                               output_bytes=200_000, file_size_mb=1, open_files=64, scratch_mb=4),
                        max_age_s=120, max_requests=5000, wait_s=1.0)
# Reading an inline database (or a shipped one no worker preloads) on first use in a session.
LOAD_ALLOWANCE_S = 60.0
# Characters of proof text per allowed step (labels are short; compressed steps are letters).
CHARS_PER_STEP = 24


def _fresh_limits(task: ProofTask, count: int) -> Limits:
    budget = (task.timeout_s + 1) * count + LOAD_ALLOWANCE_S
    return Limits(wall_s=budget, cpu_s=budget, memory_mb=MEMORY_MB, processes=4, output_bytes=200_000,
                  file_size_mb=1, open_files=64, scratch_mb=4)


@register
class ProofVerifier(Verifier):
    name = "proof"
    version = "1.3.0"
    description = ("Metamath proofs (normal or compressed) checked against set.mm or another database: "
                   "frames, $d restrictions, axiom closure, no later or self citation.")
    task_model = ProofTask
    feedback = staticmethod(proof_feedback)  # type: ignore[assignment]
    judges_groups = True

    def reference(self, task: TaskBase, supplied: str | None) -> str | None:
        return certify.reference(task, supplied)

    def probes(self, task: TaskBase, reference: str | None) -> list[Probe]:
        return certify.probes(task, reference)

    def time_budget_s(self, task: TaskBase) -> float | None:
        return task.timeout_s  # type: ignore[attr-defined]

    def warm(self, ctx: VerifyContext) -> None:
        # Every worker reads set.mm as it starts (seconds): done here, at the service's start,
        # so that no request pays for it. Servers are forks of those workers, so recycling a
        # server forks a new one from a worker that still holds set.mm.
        warm_pools(ctx.sandbox, SESSIONS, {POOL: PRELOAD})

    def close(self, ctx: VerifyContext) -> None:
        close_resident_servers(ctx.sandbox, SESSIONS.pool)

    def verify(self, task: TaskBase, response: str, ctx: VerifyContext) -> Outcome:
        return self.verify_many(task, [response], ctx)[0]

    def verify_many(self, task: TaskBase, responses: list[str], ctx: VerifyContext) -> list[Outcome]:
        assert isinstance(task, ProofTask)
        outcomes: dict[int, Outcome] = {}
        pending: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
        for index, response in enumerate(responses):
            extracted = extract_proof(response)
            evidence: dict[str, Any] = {"extraction": extracted.method}
            if extracted.declared:
                evidence["declared"] = extracted.declared
            if extracted.proof is None:
                outcomes[index] = _format_failed(evidence, extracted.reason or "no proof found")
                continue
            evidence["proof_chars"] = len(extracted.proof)
            if len(extracted.proof) > task.max_proof_steps * CHARS_PER_STEP:
                outcomes[index] = _format_failed(
                    evidence, f"the proof has {len(extracted.proof)} characters; max_proof_steps "
                              f"{task.max_proof_steps} allows {task.max_proof_steps * CHARS_PER_STEP}")
                continue
            pending.append((index, _request(task, extracted.proof, extracted.stated), evidence))
        answers = answer_all(ctx.sandbox, SESSIONS, [request for _, request, _ in pending],
                             timeout_s=task.timeout_s + LOAD_ALLOWANCE_S,
                             fresh_limits=functools.partial(_fresh_limits, task), fresh_pool=POOL)
        for (index, _, evidence), answer in zip(pending, answers, strict=True):
            outcomes[index] = _answered(task, answer, evidence)
        return [outcomes[i] for i in range(len(responses))]


def _answered(task: ProofTask, answer: Answer, evidence: dict[str, Any]) -> Outcome:
    if answer.timed_out is not None:
        result = answer.timed_out.result
        return _timed_out(task, evidence, result.summary() if result else None)
    if answer.died is not None:
        result = answer.died.result
        reason = (result.killed_by if result else None) or "checker process died"
        return Outcome(Verdict.invalid_format,
                       [hard("format", False), hard("correctness", False), hard("compliance", True)],
                       {**evidence, "first_failure": {"reason": f"resource limit while checking: {reason}"}},
                       flags=["proof_check_resource_limit"], usage=result.summary() if result else None)
    return _outcome(task, answer.value, evidence)


def _request(task: ProofTask, proof: str, stated: str | None) -> dict[str, Any]:
    return {
        "database": task.database_spec(),
        "theorem": task.theorem,
        "statement": task.statement.model_dump() if task.statement is not None else None,
        "proof": proof,
        "stated": stated,
        "allowed": task.allowed,
        "forbidden_axioms": task.forbidden_axioms,
        "timeout_s": task.timeout_s,
        "max_steps": task.max_proof_steps,
        "max_expression": task.max_expression,
    }


def _format_failed(evidence: dict[str, Any], reason: str) -> Outcome:
    declares = bool(evidence.get("declared"))
    return Outcome(Verdict.invalid_format, [hard("format", False), hard("correctness", False),
                                            hard("compliance", not declares)],
                   {**evidence, "first_failure": {"reason": clip(reason, 300)}},
                   flags=["declares_statements"] if declares else [])


def _timed_out(task: ProofTask, evidence: dict[str, Any], usage: dict[str, Any] | None) -> Outcome:
    return Outcome(Verdict.timeout, [hard("format", True), hard("correctness", False), hard("compliance", True)],
                   {**evidence, "first_failure": {"reason": f"checking took longer than {task.timeout_s}s"}},
                   flags=["proof_check_timeout"], usage=usage)


def _outcome(task: ProofTask, result: Any, evidence: dict[str, Any]) -> Outcome:
    if not isinstance(result, dict) or "status" not in result:
        raise SandboxError("the proof checker returned no result")
    status = result["status"]
    if status == "task_invalid":
        raise TaskInvalid(f"task.{result.get('field')}: {result.get('message')}")
    evidence = {**evidence, **(result.get("evidence") or {})}
    if status == "timeout":
        return _timed_out(task, evidence, None)
    if status != "checked":
        raise SandboxError(f"the proof checker answered {clip(str(status), 100)!r}")
    flags = list(result.get("flags") or [])
    compliant = bool(result["compliant"])
    if evidence.get("declared"):
        compliant = False
        flags.append("declares_statements")
        evidence.setdefault("compliance_failures", []).append(
            f"the response declares statements ({' '.join(evidence['declared'])}); only a proof may be given")
    fmt, correct = bool(result["format"]), bool(result["correct"])
    components = [hard("format", fmt), hard("correctness", correct), hard("compliance", compliant)]
    return Outcome(gated_verdict(fmt, compliant, correct), components, evidence, flags=flags)
