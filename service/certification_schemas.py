"""Request and response models of task certification and the verifier release gate."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from service.schemas import TaskRef, UnicodeText
from verifiers.base import Verdict

MAX_CERTIFY_TASKS = 64
MAX_REFERENCE_RUNS = 16
MAX_DIFF_SAMPLE = 10_000
CertificateStatus = Literal["certified", "quarantined"]


class CertifyItem(TaskRef):
    reference: str | None = Field(
        None, max_length=1_000_000,
        description="A response that must earn the full reward (code: a solution; tool state: a trace; other "
                    "families have a default: math's gold, SQL's gold query, the database's own proof).")


class CertifyRequest(UnicodeText):
    tasks: list[CertifyItem] = Field(min_length=1, max_length=MAX_CERTIFY_TASKS)
    runs: int = Field(2, ge=2, le=MAX_REFERENCE_RUNS,
                      description="How often the reference is judged; every run must agree (flaky tasks fail).")


class ReferenceRun(BaseModel):
    verdict: Verdict
    reward: float
    duration_ms: float


class ProbeResult(BaseModel):
    name: str
    verdict: Verdict | None = Field(description="None when the probe was excused.")
    reward: float | None
    excused: bool = Field(False, description="The probe states the gold itself (e.g. the constant 0 for a gold 0).")


class CertificateOut(BaseModel):
    id: str
    created_at: datetime
    task_id: str | None
    task_hash: str
    verifier: str
    verifier_version: str
    status: CertificateStatus
    reasons: list[str] = Field(description="Why the task is quarantined (empty when certified).")
    reference_runs: list[ReferenceRun]
    probes: list[ProbeResult]
    counts: bool = Field(description="Whether it decides the task's standing: always for an inline task; for a "
                                     "registered task only when an admin key certified it.")


class CertifyResponse(BaseModel):
    certificates: list[CertificateOut]
    certified: int
    quarantined: int


class DiffRequest(UnicodeText):
    sample: int = Field(500, ge=1, le=MAX_DIFF_SAMPLE, description="Records to replay, spread over verdicts.")
    since: datetime | None = None


class Transition(BaseModel):
    logged: str
    replayed: str
    count: int
    examples: list[str] = Field(description="Record ids, at most five.")


class VerifierDiffOut(BaseModel):
    id: str
    created_at: datetime
    verifier: str
    verifier_version: str = Field(description="The version replayed now.")
    logged_versions: dict[str, int] = Field(description="Replayed records by the version that logged them.")
    replayed: int
    transitions: list[Transition] = Field(description="Counts by (logged verdict -> replayed verdict).")
    verdict_flips: int
    reward_flips: int
    reward_flip_rate: float | None
    reward_flip_interval: tuple[float, float] | None = Field(description="Wilson 95% interval.")
    reward_flip_examples: list[str]
