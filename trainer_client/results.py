"""Typed requests and results of the reward API, and the error policy.

Pure Python (pydantic only) so that an adapter can use them without torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from assay_rules.advantages import group_advantages

ERROR = "error"


class ErrorPolicy(StrEnum):
    """What a caller does with a response whose verdict is `error` (infrastructure failed).

    `drop`: the reward is None (masked out of the loss and the group statistics);
    `zero`: the reward is 0.0 (explicitly chosen by the caller, still counted as an error);
    `raise`: RewardError is raised.
    """

    drop = "drop"
    zero = "zero"
    raise_ = "raise"


class RewardError(RuntimeError):
    """Raised under ErrorPolicy.raise_ when a response could not be verified."""


class RewardRequestError(RuntimeError):
    """The service rejected a request (4xx other than 429): a client bug, never retried."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"reward service answered {status}: {body[:500]}")
        self.status = status
        self.body = body


class Generation(BaseModel):
    """A response with what the trainer knows of its generation; `finish_reason="length"`
    marks a response cut at the length limit (flagged `truncated` by the service)."""

    model_config = ConfigDict(extra="forbid")

    text: str
    tokens: int | None = None
    finish_reason: str | None = None


class Group(BaseModel):
    """One task with G responses. Exactly one of `task` (inline) and `task_id` (registered)."""

    model_config = ConfigDict(extra="forbid")

    verifier: str
    task: dict[str, Any] | None = None
    task_id: str | None = None
    responses: list[str | Generation] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_task(self) -> Group:
        if (self.task is None) == (self.task_id is None):
            raise ValueError("a group needs exactly one of `task` and `task_id`")
        return self

    def task_ref(self) -> dict[str, Any]:
        return {"task": self.task} if self.task is not None else {"task_id": self.task_id}

    def payload(self) -> dict[str, Any]:
        """The group as the service's /v1/groups takes it."""
        responses = [r if isinstance(r, str) else r.model_dump(exclude_none=True) for r in self.responses]
        return {"verifier": self.verifier, **self.task_ref(), "responses": responses}


class ResponseResult(BaseModel):
    """The service's judgement of one response (extra fields the service adds are kept)."""

    model_config = ConfigDict(extra="allow")

    verdict: str
    reward: float | None = None
    record_id: str | None = None
    verifier: str | None = None
    verifier_version: str | None = None
    components: Any = None
    evidence: dict[str, Any] = Field(default_factory=dict)
    # What a policy may be shown (multi-turn training): never a hidden value of the task.
    feedback: dict[str, Any] = Field(default_factory=dict)
    flags: list[str] = Field(default_factory=list)
    duration_ms: float | None = None
    masked: bool = False

    @property
    def is_error(self) -> bool:
        return self.verdict == ERROR

    def raw_correctness(self) -> float | None:
        """The verifier's own correctness (before flag policies and shaping); None for errors."""
        if self.is_error:
            return None
        return self.component_values().get("correctness", 1.0 if self.verdict == "correct" else 0.0)

    def component_values(self) -> dict[str, float]:
        """Components as name -> value, whichever of the two JSON shapes the service used."""
        comps = self.components
        if isinstance(comps, dict):
            out: dict[str, float] = {}
            for name, value in comps.items():
                if isinstance(value, dict):
                    value = value.get("value")
                if isinstance(value, int | float):
                    out[str(name)] = float(value)
            return out
        if isinstance(comps, list):
            return {
                str(c["name"]): float(c["value"])
                for c in comps
                if isinstance(c, dict) and "name" in c and isinstance(c.get("value"), int | float)
            }
        return {}

    def reward_under(self, policy: ErrorPolicy | str) -> float | None:
        policy = ErrorPolicy(policy)
        if not self.is_error:
            return float(self.reward) if self.reward is not None else None
        if policy is ErrorPolicy.drop:
            return None
        if policy is ErrorPolicy.zero:
            return 0.0
        raise RewardError(f"response could not be verified: {self.evidence or self.flags}")


def client_error_result(reason: str, detail: str) -> ResponseResult:
    """A response whose request never got an answer: an infrastructure error, not a reward."""
    return ResponseResult(verdict=ERROR, reward=None, evidence={"client_error": detail[:500]},
                          flags=[f"client:{reason}"])


class GroupResult(BaseModel):
    """One group's results, in response order, with group-relative advantages."""

    model_config = ConfigDict(extra="allow")

    results: list[ResponseResult]
    rewards: list[float | None] = Field(default_factory=list)
    advantages: list[float | None] = Field(default_factory=list)
    mean: float | None = None
    std: float | None = None
    zero_variance: bool = False

    @property
    def verdicts(self) -> list[str]:
        return [r.verdict for r in self.results]

    @property
    def n_errors(self) -> int:
        return sum(r.is_error for r in self.results)

    def rewards_under(self, policy: ErrorPolicy | str) -> list[float | None]:
        return [r.reward_under(policy) for r in self.results]


def group_stats(
    rewards: Sequence[float | None], *, scale: str = "group", eps: float = 1e-4
) -> tuple[list[float | None], float | None, float | None, bool]:
    """Group-relative advantages over the rewards that are not None (errors and masked
    responses), as (advantages, mean, std, zero_variance): `assay_rules.group_advantages`,
    the service's rule; used when the client had to split one oversized group over
    several requests."""
    stats = group_advantages(rewards, scale=scale, eps=eps)
    return stats.advantages, stats.mean, stats.std, stats.zero_variance


def merge_parts(parts: list[GroupResult], *, scale: str = "group", eps: float = 1e-4) -> GroupResult:
    """Join the parts of a split group and recompute its statistics over the whole group."""
    if len(parts) == 1:
        return parts[0]
    results = [r for p in parts for r in p.results]
    rewards = [None if r.is_error or r.masked else r.reward for r in results]
    adv, mean, std, zero_var = group_stats(rewards, scale=scale, eps=eps)
    return GroupResult(results=results, rewards=rewards, advantages=adv, mean=mean, std=std, zero_variance=zero_var)
