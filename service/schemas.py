"""Request and response models at the HTTP edge (pydantic v2). Limits that depend on
settings (group size, response length) are checked by the pipeline (service/pipeline/admit.py) with clear messages."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from service.validation import bad_value, check_groups, current_limits
from verifiers import registry
from verifiers.base import Verdict


class UnicodeText(BaseModel):
    """Request bodies whose strings (keys included) are valid Unicode and whose numbers are
    finite (service/validation.py); the error names the field."""

    @model_validator(mode="before")
    @classmethod
    def _valid_unicode(cls, data: Any) -> Any:
        problem = bad_value(data)
        if problem is not None:
            raise ValueError(problem)
        return data


class _Strict(UnicodeText):
    model_config = ConfigDict(extra="forbid")


def _known_verifiers(schema: dict[str, Any]) -> None:
    schema["enum"] = registry.names()


class TaskRef(_Strict):
    # The document says what the validator enforces: one of `task` or `task_id`.
    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["task"]}, {"required": ["task_id"]}]})

    verifier: str = Field(description="Verifier name, e.g. `math`, `code`, `sql`, `tool_state`.",
                          json_schema_extra=_known_verifiers)
    task: dict[str, Any] | None = Field(None, description="The task inline (see GET /v1/verifiers for schemas).")
    task_id: str | None = Field(None, max_length=200, description="A registered task's id instead of `task`.")

    @model_validator(mode="after")
    def _one_task(self) -> TaskRef:
        if (self.task is None) == (self.task_id is None):
            raise ValueError("give exactly one of `task` or `task_id`")
        return self


class GenerationIn(_Strict):
    text: str = Field(description="The model output to judge.")
    tokens: int | None = Field(None, ge=0, le=10_000_000, description="Tokens the policy generated.")
    finish_reason: str | None = Field(
        None, max_length=32, description='Why generation stopped: "stop", "length" (hit the limit: flagged '
                                         '`truncated`, see the task\'s `truncation` policy), ...')


# A response is the text alone, or the text with the generation's facts.
ResponseIn = str | GenerationIn


EVIDENCE_VIEW = Field(
    None, description='`"feedback"`: evidence is the policy-safe feedback only; `"full"`: the full audit evidence '
                      "(for a registered task only with a key holding `audit`). Default: full for an inline task, "
                      "feedback for a registered one.")


class RunTag(_Strict):
    """The training run and step a verification belongs to (per-run series and alarms: /v1/runs)."""

    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:@+-]+$",
                    description="The caller's name for the run, e.g. `qwen-7b-grpo-3`.")
    step: int = Field(ge=0, le=2**31 - 1, description="The trainer's global step.")


_RUN = Field(None, description="The training run and step this belongs to: `{id, step}` (see GET /v1/runs).")


class VerifyRequest(TaskRef):
    evidence: Literal["full", "feedback"] | None = EVIDENCE_VIEW
    response: ResponseIn = Field(description="The model output to judge (a string or {text, tokens, finish_reason}).")
    request_id: str | None = Field(
        None, max_length=200,
        description="Caller's id for this verification; repeating it returns the logged result, not a new one.",
    )
    run: RunTag | None = _RUN


class ComponentOut(BaseModel):
    value: float
    hard: bool


class Receipt(BaseModel):
    """Ed25519 signature (base64) over `payload` as canonical JSON (sorted keys, no whitespace, UTF-8):
    record_id, task_hash, response_hash, verifier, verifier_version, verdict, reward, components, time;
    on /v1/verify and /v1/groups answers also task_sent (SHA-256 of the verifier and the task or task_id
    as the request named them, `assay_rules.canonical.task_sent`), and request_id when the record has one.
    The key is at GET /v1/receipts/key; trainer_client.receipts checks it."""

    payload: dict[str, Any]
    key_id: str
    signature: str


class VerifyResult(BaseModel):
    record_id: str
    verifier: str
    verifier_version: str
    reward: float
    verdict: Verdict
    components: dict[str, ComponentOut]
    evidence: dict[str, Any]
    feedback: dict[str, Any] = Field(
        default_factory=dict, description="What a policy may be shown: the response's own errors, visible-test "
                                          "results, counts, the format problem; never a hidden value.")
    flags: list[str] = []
    flag_evidence: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Per flag: what the detector saw.")
    duration_ms: float
    task_id: str | None = None
    task_hash: str
    request_id: str | None = None
    tokens: int | None = None
    finish_reason: str | None = None
    masked: bool = Field(False, description="Left out of the group statistics by the task's truncation policy.")
    receipt: Receipt | None = Field(None, description="The service's signed receipt of this result.")


class AdvantageOptions(_Strict):
    scale: Literal["group", "none"] = Field("group", description="Divide by the group std (`group`) or not.")
    eps: float = Field(1e-4, ge=0, le=1)
    bessel: bool = Field(True, description="Use the unbiased (n-1) std, as torch.std does.")


class GroupSpec(TaskRef):
    evidence: Literal["full", "feedback"] | None = EVIDENCE_VIEW
    responses: list[ResponseIn] = Field(min_length=1)
    group_id: str | None = Field(None, max_length=64, description="Optional caller id for the group.")


class GroupsRequest(_Strict):
    groups: list[GroupSpec] = Field(min_length=1)
    advantage: AdvantageOptions = AdvantageOptions()
    run: RunTag | None = _RUN

    @model_validator(mode="before")
    @classmethod
    def _within_limits(cls, data: Any) -> Any:
        """Checked on the raw lists, before any group is built (settings: max_groups, max_group_size)."""
        limits = current_limits()
        if isinstance(data, dict):
            check_groups(data.get("groups"), "groups", limits, limits.max_groups)
        return data


class GroupError(BaseModel):
    """Why a group has no results: its task turned out invalid while being verified."""

    index: int = Field(description="The group's position in the request.")
    field: str = Field(description="The part of the request at fault, e.g. `groups[2].task.answer`.")
    message: str


class GroupResult(BaseModel):
    group_id: str
    results: list[VerifyResult] = Field(description="One per response; empty when the group is in `error`.")
    rewards: list[float | None] = Field(description="None for every response of a group in `error`.")
    advantages: list[float | None] = Field(
        description="None for responses whose verdict is `error`, masked responses, and every response of a group "
                    "in `error`.")
    mean: float | None
    std: float | None
    zero_variance: bool
    errors: int = Field(description="Responses excluded from the statistics: those whose verdict is `error`, "
                                    "or all of them when the group is in `error`.")
    masked: int = Field(0, description="Responses excluded by the task's truncation policy `mask`.")
    error: GroupError | None = Field(None, description="Set when the group's task was found invalid while "
                                                       "verifying: no record, reward or advantage was computed.")


class GroupsResponse(BaseModel):
    groups: list[GroupResult]


class TaskRegistration(_Strict):
    task_id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:/-]+$")
    verifier: str = Field(json_schema_extra=_known_verifiers)
    task: dict[str, Any]
    hide: list[str] = Field(default_factory=list, max_length=64,
                            description='Further task fields to hide, beyond the verifier\'s own (e.g. ["answer"]).')
    certify: bool = Field(False, description="Certify the task now (see POST /v1/tasks/certify).")
    reference: str | None = Field(None, max_length=1_000_000, description="The reference for certification.")


class RegisteredTask(BaseModel):
    task_id: str
    verifier: str
    task_hash: str
    created: bool
    task: dict[str, Any] = Field(description="The public view: hidden fields replaced by keyed fingerprints.")
    certificate: dict[str, Any] | None = Field(
        None, description="The newest certificate (POST /v1/tasks/certify): status, reasons, reference runs, probes.")


class RecordOut(BaseModel):
    id: str
    seq: int
    created_at: datetime
    request_id: str | None
    caller_key_id: str | None
    task_id: str | None
    task_hash: str
    task: dict[str, Any]
    verifier: str
    verifier_version: str
    response_hash: str
    response: str | None
    components: dict[str, ComponentOut]
    reward: float
    verdict: Verdict
    evidence: dict[str, Any]
    feedback: dict[str, Any] | None = None
    flags: list[str]
    flag_evidence: dict[str, dict[str, Any]] = {}
    sandbox_backend: str
    usage: dict[str, Any] | None
    duration_ms: float
    group_id: str | None
    group_index: int | None
    tokens: int | None = None
    finish_reason: str | None = None
    masked: bool = False
    eval_id: str | None = None
    run: RunTag | None = None


class RecordPage(BaseModel):
    records: list[RecordOut]
    next_cursor: int | None = Field(description="Pass as `after` to get the next page; null at the end.")


class VerifierInfo(BaseModel):
    name: str
    version: str
    description: str
    task_schema: dict[str, Any]
    hidden_fields: list[str]
    languages: dict[str, Any] | None = Field(
        None, description="code: per language its compile and run commands, time factor and toolchain version.")
    last_diff: dict[str, Any] | None = Field(
        None, description="The newest release-gate report's summary (POST /v1/verifiers/{name}/diff), if any.")


class ReplayOut(BaseModel):
    record_id: str
    original_verdict: Verdict
    replayed_verdict: Verdict
    original_reward: float
    replayed_reward: float
    same_verdict: bool
    same_version: bool
    verifier_version: str


class ErrorOut(BaseModel):
    detail: Any
