"""Request and response models of the inspection endpoints: labels and review, held-out
evaluation runs, task statistics (issue 12)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.schemas import GroupSpec, Receipt, RecordOut, RunTag, UnicodeText, Verdict
from service.validation import check_eval, current_limits

LabelKind = Literal["agree", "disagree", "exploit"]


class LabelIn(UnicodeText):
    model_config = ConfigDict(extra="forbid")

    label: LabelKind = Field(description="`agree` with the verdict, `disagree` (give `corrected_verdict`), "
                                         "or `exploit` (give `pattern`).")
    corrected_verdict: Verdict | None = Field(None, description="With `disagree`: the verdict it should have had.")
    pattern: str | None = Field(None, min_length=1, max_length=100, description="With `exploit`: the pattern's name.")
    note: str | None = Field(None, max_length=4_000)

    @model_validator(mode="after")
    def _consistent(self) -> LabelIn:
        if self.label == "disagree" and self.corrected_verdict is None:
            raise ValueError("corrected_verdict: required with label `disagree`")
        if self.label != "disagree" and self.corrected_verdict is not None:
            raise ValueError("corrected_verdict: only with label `disagree`")
        if self.label == "exploit" and self.pattern is None:
            raise ValueError("pattern: required with label `exploit`")
        if self.label != "exploit" and self.pattern is not None:
            raise ValueError("pattern: only with label `exploit`")
        return self


class LabelOut(BaseModel):
    id: str
    record_id: str
    created_at: datetime
    author: str
    label: LabelKind
    corrected_verdict: Verdict | None
    pattern: str | None
    note: str | None


Stratum = Literal["flagged", "correct_unflagged", "incorrect"]


class QueueItem(BaseModel):
    stratum: Stratum
    record: RecordOut


class ReviewQueue(BaseModel):
    items: list[QueueItem]
    available: dict[str, int] = Field(description="Unlabelled records in each stratum that matched the filters.")


class Rate(BaseModel):
    labelled: int = Field(description="Records in this group that carry a label (their latest label counts).")
    hits: int = Field(description="Of those: verdicts the reviewers call wrong (or, for flags, confirmed exploits).")
    rate: float | None
    interval: tuple[float, float] | None = Field(description="Wilson 95% score interval of the rate.")


class VerifierReview(BaseModel):
    labels: int
    correct_false_positive: Rate = Field(description="`correct` verdicts the reviewers say were not correct.")
    incorrect_false_negative: Rate = Field(description="`incorrect` verdicts the reviewers say were correct.")
    flagged_exploit_share: Rate = Field(description="Flagged records the reviewers confirmed as exploits.")


class ReviewSummary(BaseModel):
    verifiers: dict[str, VerifierReview]


class EvalIn(UnicodeText):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    checkpoint: str = Field(min_length=1, max_length=200, description="The checkpoint's label.")
    families: dict[str, list[GroupSpec]] = Field(
        min_length=1, description="Family name -> tasks, each with its n responses (strings or generation objects).")
    run: RunTag | None = Field(None, description="The training run and step whose checkpoint this evaluates: the "
                                                 "run's page shows its held-out pass@k and maj@k against the step.")

    @model_validator(mode="before")
    @classmethod
    def _within_limits(cls, data: Any) -> Any:
        """Checked on the raw lists, before any task is built (settings: max_eval_tasks, max_group_size)."""
        check_eval(data, current_limits())
        return data

    @model_validator(mode="after")
    def _non_empty(self) -> EvalIn:
        for name, tasks in self.families.items():
            if not tasks:
                raise ValueError(f"families.{name}: needs at least one task")
            if not 0 < len(name) <= 100:
                raise ValueError("families: names are 1 to 100 characters")
        return self


class TokenBucket(BaseModel):
    max_tokens: int
    n: int
    accuracy: float | None


class EvalReport(BaseModel):
    n_tasks: int
    n_responses: int
    pass_at_k: dict[str, float]
    maj_at_k: dict[str, float]
    mean_reward: float | None
    mean_tokens: float | None
    accuracy_by_tokens: list[TokenBucket]
    truncation_rate: float | None
    error_rate: float | None
    flag_rates: dict[str, float]
    false_step_rate_among_correct: float | None


class EvalOut(BaseModel):
    id: str
    name: str
    checkpoint: str
    created_at: datetime
    families: dict[str, EvalReport]
    overall: EvalReport
    receipts: list[Receipt] = Field(
        default_factory=list, description="The signed receipt of every record of the run, in the order written.")
    signed: Receipt | None = Field(
        None, description="On the answer to POST /v1/evals: the service's signature over this report, "
                          "payload {eval_id, name, checkpoint, report (assay_rules.canonical.eval_report_digest), "
                          "records (the receipts' record ids in order), task_sent (per family, each task as the "
                          "request named it), time}; trainer_client checks it.")


class Difference(BaseModel):
    a: float | None
    b: float | None
    diff: float | None = Field(description="b - a")
    interval: tuple[float, float] | None = Field(description="Bootstrap 95% interval of the difference, over tasks.")


class FamilyComparison(BaseModel):
    n_tasks_a: int
    n_tasks_b: int
    paired: bool = Field(description="Both runs answered the same tasks: the bootstrap resamples tasks in pairs.")
    metrics: dict[str, Difference]


class EvalComparison(BaseModel):
    a: str
    b: str
    families: dict[str, FamilyComparison]
    overall: FamilyComparison


Band = Literal["unseen", "too_easy", "easy", "medium", "hard", "too_hard"]


class TaskStats(BaseModel):
    task_id: str | None
    task_hash: str
    verifier: str
    attempts: int
    pass_rate: float | None = Field(description="Share of attempts whose raw correctness passed (errors left out).")
    groups: int
    zero_variance_share: float | None = Field(description="Share of its groups whose raw correctness was all equal.")
    mean_tokens: float | None
    band: Band
    certificate: Literal["certified", "quarantined"] | None = Field(
        None, description="The task's newest certificate status (POST /v1/tasks/certify); None when never certified.")


class TaskStatsOut(BaseModel):
    tasks: list[TaskStats]
