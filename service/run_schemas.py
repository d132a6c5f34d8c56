"""Response models of the training-run endpoints (`GET /v1/runs`, `GET /v1/runs/{id}`) and the
per-run alarm thresholds a team may set (`PUT /v1/runs/{id}/thresholds`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True


class RewardHeldOutRule(_Rule):
    """Training reward up while held-out pass@1 falls beyond its bootstrap interval."""

    min_reward_rise: float = Field(0.05, ge=0, le=1, description="Training reward gain (window means) that counts "
                                                                 "as rising, between the two evaluations' steps.")


class FlagRateRule(_Rule):
    """A flag's rate above a level, or rising steeply."""

    level: float = Field(0.2, gt=0, le=1, description="A step whose rate of the flag reaches this raises it.")
    rise: float = Field(0.15, gt=0, le=1, description="Or: the rate rose this much within `window` steps.")
    ignore: list[str] = Field(["truncated"], description="Flags this rule never watches (truncation has its own "
                                                        "series and the length rule).")


class LengthGrowthRule(_Rule):
    """Response length growing with no gain in reward."""

    ratio: float = Field(1.5, gt=1, description="Mean length (tokens, else characters) of the latest `window` "
                                                "steps over that of the first `window` steps.")
    max_reward_gain: float = Field(0.02, ge=0, le=1, description="...while the window's mean reward gained at "
                                                                  "most this much.")


class TimeoutsByLengthRule(_Rule):
    """Timeouts or errors concentrated in the longest responses of a step."""

    min_rate: float = Field(0.1, gt=0, le=1, description="Timeout+error rate in the step's longest quarter.")
    ratio: float = Field(3.0, ge=1, description="...at least this many times the rate in its shorter half.")
    min_count: int = Field(2, ge=1, description="...and at least this many timeouts or errors there.")


class DiversityRule(_Rule):
    """Groups whose responses all say the same: zero-variance share or distinct answers per group."""

    max_zero_variance_share: float = Field(0.8, gt=0, le=1)
    min_distinct_answers: float = Field(1.2, ge=1, description="Mean distinct answers per group at or below this.")
    sustain: int = Field(3, ge=1, description="Steps in a row the level must hold.")


class Thresholds(BaseModel):
    """Every rule's thresholds; a `PUT` may give any part, the rest keep their defaults."""

    model_config = ConfigDict(extra="forbid")

    min_responses: int = Field(8, ge=1, description="A training step with fewer judged responses is not judged.")
    window: int = Field(3, ge=1, le=100, description="Steps averaged at each end of a comparison.")
    reward_up_heldout_down: RewardHeldOutRule = RewardHeldOutRule()
    flag_rate: FlagRateRule = FlagRateRule()
    length_growth: LengthGrowthRule = LengthGrowthRule()
    timeouts_by_length: TimeoutsByLengthRule = TimeoutsByLengthRule()
    diversity_collapse: DiversityRule = DiversityRule()


class LengthBucket(BaseModel):
    quarter: int = Field(description="1: the step's shortest quarter of responses ... 4: its longest.")
    n: int
    min_length: int
    max_length: int
    error_rate: float
    timeout_rate: float


class RunStep(BaseModel):
    """One training step's figures (records of the run that are not held-out evaluations)."""

    step: int
    n: int = Field(description="Responses logged at this step.")
    groups: int
    reward_mean: float | None = Field(description="Over judged responses (not `error`, not masked).")
    reward_std: float | None
    correct_rate: float | None
    zero_variance_share: float | None = Field(description="Share of the step's groups whose rewards were all equal.")
    distinct_answers: float | None = Field(
        description="Mean distinct answers per group: math's normalised answer, code's test outcome "
                    "(verdict and tests passed), else the response hash; no answer counts as one answer.")
    flag_rates: dict[str, float]
    mean_tokens: float | None
    mean_chars: float | None
    tokens_per_correct: float | None = Field(description="Tokens of all responses / correct responses.")
    truncation_rate: float
    error_rate: float
    timeout_rate: float
    by_length: list[LengthBucket] = Field(description="Error and timeout rates by response-length quarter "
                                                      "(tokens where the trainer sent them, else characters).")


class HeldOut(BaseModel):
    """A held-out evaluation tagged with the run (`POST /v1/evals` with `run`)."""

    step: int
    eval_id: str
    name: str | None
    checkpoint: str | None
    n_tasks: int
    n_responses: int
    pass_at_k: dict[str, float]
    maj_at_k: dict[str, float]
    mean_reward: float | None


class AlarmExample(BaseModel):
    record_id: str
    step: int | None
    task: str
    verdict: str
    reward: float
    group_id: str | None = None


class AlarmOut(BaseModel):
    rule: str
    subject: str = Field(description="What the rule watched, e.g. the flag's name; empty when the rule has one.")
    step: int = Field(description="The step at which it was first raised.")
    raised_at: datetime | None
    message: str
    steps: list[int] = Field(description="The steps where the rule's condition held.")
    tasks: list[str] = Field(description="Tasks (ids, else hashes) behind it, most records first.")
    examples: list[AlarmExample] = Field(description="Records to read first.")
    figures: dict[str, Any] = Field(description="The numbers the rule compared.")
    holds_now: bool = Field(description="The rule's condition still holds on the run's records now.")


class RunSummary(BaseModel):
    id: str
    records: int
    first_step: int
    last_step: int
    alarms: int


class RunList(BaseModel):
    runs: list[RunSummary]


class RunOut(BaseModel):
    id: str
    records: int
    first_step: int | None
    last_step: int | None
    steps: list[RunStep]
    held_out: list[HeldOut]
    thresholds: Thresholds
    alarms: list[AlarmOut]
