"""What a caller asked for, as the pipeline takes it, and where its parts are named."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from service.auth import Caller
from service.schemas import AdvantageOptions, GenerationIn, GroupSpec, ResponseIn, RunTag
from verifiers.inspection import Generation


def generation_of(response: ResponseIn) -> Generation:
    if isinstance(response, GenerationIn):
        return Generation(response.text, response.tokens, response.finish_reason)
    return Generation(response)


@dataclass(frozen=True)
class Work:
    """Groups of responses, one task each. `single`: a POST /v1/verify, a group of one that
    gets no group statistics, is repeated by `request_id`, and whose errors name `response`
    and the request's own fields rather than `groups[i]`."""

    groups: Sequence[GroupSpec]
    caller: Caller
    run: RunTag | None = None
    advantage: AdvantageOptions | None = None  # None for `single`
    idempotency_key: str | None = None  # groups: the Idempotency-Key header
    request_id: str | None = None  # single: the caller's id for the verification
    eval_id: str | None = None  # records of an evaluation run are tagged with it
    body: Any = None  # the request as sent (its hash identifies an idempotent repeat)

    @property
    def single(self) -> bool:
        return self.advantage is None

    @property
    def size(self) -> int:
        return sum(len(g.responses) for g in self.groups)

    def where(self, index: int) -> str:
        """The prefix naming group `index` in the request ("" for a single verification)."""
        return "" if self.single else f"groups[{index}]"

    def responses_field(self, index: int) -> str:
        return "response" if self.single else f"groups[{index}].responses"

    def evidence_field(self, index: int) -> str:
        return "evidence" if self.single else f"groups[{index}].evidence"
