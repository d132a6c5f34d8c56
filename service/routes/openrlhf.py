"""OpenRLHF `--remote_rm_url` endpoint.

OpenRLHF posts `{"query": [...], "prompts": [...], "labels": [...]}` where each query is
prompt + response (decoded with special tokens) and expects `{"rewards", "scores",
"extra_logs"}`. It sends no Authorization header, so the API key may also be given as the
`api_key` query parameter (use a key with only the `reward` scope: URLs end up in logs).
It retries a failed request up to 5 times without an idempotency key, so one is derived
from the body: a retried batch returns the stored result and is not logged twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from assay_rules.grouping import consecutive_runs
from service.auth import Caller, require_scope
from service.config import Settings
from service.deps import PipelineDep
from service.errors import RequestInvalid, Saturated, TooBigToFit, Unverified, problems, responses, summary
from service.packing import check_fits, pack
from service.schemas import GroupSpec, GroupsRequest, Receipt, ResponseIn, RunTag, TaskRef, UnicodeText
from service.validation import check_length, current_limits

router = APIRouter(prefix="/v1", tags=["trainer adapters"])
_bearer = HTTPBearer(auto_error=False)
_reward_scope = require_scope("reward")
# End-of-sequence and padding markers a decoded query may end with (Llama, Qwen, GPT-2, Gemma...).
_TRAILING_SPECIALS = re.compile(r"(?:\s*(?:<\|[A-Za-z0-9_]{1,40}\|>|</s>|<eos>|<pad>|<end_of_turn>))+\s*$")


class OpenRLHFRequest(UnicodeText):
    model_config = ConfigDict(extra="allow")  # OpenRLHF versions add fields; ignore them

    query: list[ResponseIn] = Field(
        min_length=1, description="prompt + response, as OpenRLHF decodes them; or {text, tokens, finish_reason}.")
    prompts: list[str] | None = Field(None, description="The prompts, to cut the response out of each query.")
    labels: list[Any] = Field(
        description="Per sample: the answer (math), or a JSON object {task_id} or {verifier, task}.")
    run: RunTag | None = Field(None, description="The training run and step (or the `run_id`/`run_step` query).")

    @model_validator(mode="before")
    @classmethod
    def _within_limits(cls, data: Any) -> Any:
        limit = current_limits().max_openrlhf_samples
        for name in ("query", "prompts", "labels"):
            check_length(data, name, limit, setting="max_openrlhf_samples")
        return data


class OpenRLHFResponse(BaseModel):
    rewards: list[float]
    scores: list[float]
    extra_logs: dict[str, list[float]]
    receipts: list[Receipt | None] = Field(
        default_factory=list, description="Per sample, the signed receipt of its record (None: no record, the "
                                          "label's task was invalid). OpenRLHF ignores it; a proxy can check it.")


def _caller(request: Request, api_key: str | None = Query(None, description="API key when no header can be sent."),
            credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> Caller:
    if credentials is None and api_key:
        credentials = HTTPAuthorizationCredentials(scheme="Bearer", credentials=api_key)
    return _reward_scope.check(request, credentials)  # perf hook: require_scope's dependency is async


def response_of(query: str, prompt: str | None) -> str:
    """The model's response: the query without its prompt and trailing special tokens."""
    text = query
    if prompt:
        if query.startswith(prompt):
            text = query[len(prompt):]
        elif prompt in query:  # e.g. left padding tokens in front of the prompt
            text = query[query.index(prompt) + len(prompt):]
    return _TRAILING_SPECIALS.sub("", text)


def _cut(query: ResponseIn, prompt: str | None) -> ResponseIn:
    if isinstance(query, str):
        return response_of(query, prompt)
    return query.model_copy(update={"text": response_of(query.text, prompt)})


def task_of(label: Any, verifier: str, index: int) -> dict[str, Any]:
    """A label names a task: a registered id, an inline task, or (plain value) the answer."""
    if isinstance(label, str) and label.lstrip().startswith("{"):
        with contextlib.suppress(json.JSONDecodeError):  # not JSON: a plain answer after all
            label = json.loads(label)
    if isinstance(label, dict):
        if "task_id" in label:
            return {"verifier": label.get("verifier", verifier), "task_id": label["task_id"]}
        if "task" in label:
            return {"verifier": label.get("verifier", verifier), "task": label["task"]}
        raise RequestInvalid(f"labels[{index}]: an object label needs `task_id` or `task`")
    if label is None:
        raise RequestInvalid(f"labels[{index}]: missing label")
    return {"verifier": verifier, "task": {"answer": str(label)}}


def checked_task(spec: dict[str, Any], index: int) -> dict[str, Any]:
    """A label's task reference must have the shape of one (strings, an object task)."""
    try:
        TaskRef.model_validate(spec)
    except ValidationError as exc:
        raise RequestInvalid(f"labels[{index}]: {summary(problems(exc.errors(), empty='label'))}") from None
    return spec


def _run_of(run_id: str | None, run_step: int | None) -> RunTag | None:
    """The run from the query string (OpenRLHF sets only the URL): both or neither."""
    if run_id is None and run_step is None:
        return None
    if run_id is None or run_step is None:
        raise RequestInvalid("run_id, run_step: give both or neither")
    try:
        return RunTag(id=run_id, step=run_step)
    except ValidationError as exc:
        raise RequestInvalid(f"run_id: {exc.errors()[0]['msg']}") from None


Chunk = list[tuple[dict[str, Any], list[int]]]


def _chunks(specs: list[dict[str, Any]], settings: Settings) -> list[Chunk]:
    """Consecutive samples with the same task form a group (OpenRLHF's n_samples_per_prompt),
    packed into requests within the service's group and in-flight limits."""
    groups = consecutive_runs(specs, max_run=settings.max_group_size)
    sizes = [len(idx) for _, idx in groups]
    check_fits([(f"labels[{idx[0]}:{idx[-1] + 1}]", len(idx)) for _, idx in groups], settings.max_inflight_responses)
    packs = pack(sizes, settings.max_groups, settings.max_inflight_responses)
    return [[groups[i] for i in indices] for indices in packs]


@router.post("/openrlhf", response_model=OpenRLHFResponse,
             responses=responses(RequestInvalid, TooBigToFit, Saturated, Unverified))
async def openrlhf(body: OpenRLHFRequest, pipeline: PipelineDep,
                   verifier: str = Query("math", description="Verifier for plain-answer labels."),
                   error_policy: Literal["zero", "raise"] = Query(
                       "zero", description="`error` verdicts: reward 0 (counted in extra_logs.error) or HTTP 503."),
                   run_id: str | None = Query(None, max_length=200, description="The training run (with `run_step`)."),
                   run_step: int | None = Query(None, ge=0, le=2**31 - 1, description="The trainer's global step."),
                   caller: Caller = Depends(_caller)) -> OpenRLHFResponse:
    """Score a batch of OpenRLHF queries with Assay."""
    run = body.run or _run_of(run_id, run_step)
    n = len(body.query)
    for name in ("prompts", "labels"):
        value = getattr(body, name)
        if value is not None and len(value) != n:
            raise RequestInvalid(f"{name}: {len(value)} items for {n} queries")
    prompts = body.prompts or [None] * n
    responses = [_cut(q, p) for q, p in zip(body.query, prompts, strict=True)]
    specs = [checked_task(task_of(label, verifier, i), i) for i, label in enumerate(body.labels)]
    # OpenRLHF retries without an idempotency key: the body itself identifies a retry.
    base_key = "openrlhf:" + hashlib.sha256(
        json.dumps([[q if isinstance(q, str) else q.model_dump() for q in body.query], body.prompts, body.labels,
                    verifier, *([run.model_dump()] if run else [])], default=str).encode()).hexdigest()
    results: list[Any] = [None] * n
    chunks = _chunks(specs, pipeline.settings)
    for ci, chunk in enumerate(chunks):
        req = GroupsRequest(groups=[GroupSpec(**spec, responses=[responses[i] for i in idx]) for spec, idx in chunk],
                            run=run)
        answer = await pipeline.groups(req, caller, f"{base_key}:{ci}")
        for (_, idx), group in zip(chunk, answer.groups, strict=True):
            if group.error is not None:
                # The task was found invalid while verifying: those samples have no result.
                if error_policy == "raise":
                    raise RequestInvalid(f"labels[{idx[0]}]: {group.error.message}")
                continue
            for i, result in zip(idx, group.results, strict=True):
                results[i] = result
    errors = [r is None or r.verdict == "error" for r in results]
    if error_policy == "raise" and any(errors):
        raise Unverified(f"{sum(errors)} responses could not be verified (verdict error)")
    rewards = [0.0 if err else float(r.reward) for r, err in zip(results, errors, strict=True)]
    logs = {
        "correct": [float(r is not None and r.verdict == "correct") for r in results],
        "error": [float(e) for e in errors],
        "format": [(float(r.components["format"].value) if "format" in r.components else 1.0)
                   if r is not None else 0.0 for r in results],
    }
    return OpenRLHFResponse(rewards=rewards, scores=rewards, extra_logs=logs,
                            receipts=[None if r is None else r.receipt for r in results])
