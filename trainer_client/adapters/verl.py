"""verl custom reward: `custom_reward_function.path=.../verl.py`, `name=compute_score`
(or `compute_score_batch` with verl's BatchRewardManager).

verl imports the function by path, so the module-level functions read the service from
`ASSAY_URL` and `ASSAY_API_KEY` (and `ASSAY_ERROR_POLICY`); with `ASSAY_RECEIPT_KEY` (the
service's public key) every reward's signed receipt is checked and a forged one refused. verl needs a float for every
sample and the same extra keys every time, so an `error` verdict cannot be dropped here:
policy `zero` (default) scores it 0 and marks it with `error: 1.0` so it is counted in
verl's logs, never hidden; `raise` stops the step. With `ASSAY_RUN_ID` set, requests carry
`run: {id, step}`, the step taken from a `global_step`/`global_steps` keyword or extra_info
key (verl's reward managers pass none by default: add it to extra_info, or call
`default_scorer().client.at_step(step)` from the trainer).
"""

from __future__ import annotations

import os
from typing import Any

from trainer_client.adapters.common import tag_step, to_groups
from trainer_client.client import RewardClient
from trainer_client.results import ErrorPolicy, Group, ResponseResult

EXTRA_KEYS = ("acc", "format", "error")


class VerlScorer:
    def __init__(self, client: RewardClient, *, default_verifier: str = "math",
                 data_source_verifiers: dict[str, str] | None = None,
                 error_policy: ErrorPolicy | str = ErrorPolicy.zero) -> None:
        self.client = client
        self.default_verifier = default_verifier
        self.data_source_verifiers = data_source_verifiers or {}
        self.policy = ErrorPolicy(error_policy)
        if self.policy is ErrorPolicy.drop:
            raise ValueError("verl needs a score for every sample: use error_policy 'zero' or 'raise'")

    def task_ref(self, data_source: str, ground_truth: Any, extra_info: dict[str, Any] | None) -> dict[str, Any]:
        """extra_info may name the task ({"assay_task_id"} or {"assay_task"}); else the
        ground truth is a math answer for the data source's verifier."""
        extra = extra_info or {}
        verifier = extra.get("assay_verifier") or self.data_source_verifiers.get(data_source, self.default_verifier)
        if extra.get("assay_task_id"):
            return {"verifier": verifier, "task_id": str(extra["assay_task_id"])}
        if extra.get("assay_task"):
            return {"verifier": verifier, "task": dict(extra["assay_task"])}
        return {"verifier": verifier, "task": {"answer": str(ground_truth)}}

    def _dict(self, result: ResponseResult) -> dict[str, float]:
        score = result.reward_under(self.policy)
        components = result.component_values()
        return {
            "score": float(score if score is not None else 0.0),
            "acc": float(result.verdict == "correct"),
            "format": float(components.get("format", 0.0 if result.is_error else 1.0)),
            "error": float(result.is_error),
        }

    def compute_score(self, data_source: str, solution_str: str, ground_truth: Any,
                      extra_info: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, float]:
        ref = self.task_ref(data_source, ground_truth, extra_info)
        tag_step(self.client, kwargs, extra_info)
        result = self.client.score_groups([Group(**ref, responses=[solution_str])])[0].results[0]
        return self._dict(result)

    def compute_score_batch(self, data_sources: list[str], solution_strs: list[str], ground_truths: list[Any],
                            extra_infos: list[dict[str, Any] | None] | None = None,
                            **kwargs: Any) -> list[dict[str, float]]:
        extras = extra_infos or [None] * len(solution_strs)
        tag_step(self.client, kwargs, extras[0] if extras else None)
        refs = [self.task_ref(d, g, e) for d, g, e in zip(data_sources, ground_truths, extras, strict=True)]
        groups, index = to_groups(refs, list(solution_strs))
        out: list[dict[str, float]] = [{} for _ in solution_strs]
        for group, rows in zip(self.client.score_groups(groups), index, strict=True):
            for row, result in zip(rows, group.results, strict=True):
                out[row] = self._dict(result)
        return out


_default: VerlScorer | None = None


def default_scorer() -> VerlScorer:
    """The scorer the module-level functions use, configured from the environment."""
    global _default
    if _default is None:
        url = os.environ.get("ASSAY_URL", "http://127.0.0.1:8000")
        client = RewardClient(url, os.environ.get("ASSAY_API_KEY"), run_id=os.environ.get("ASSAY_RUN_ID") or None)
        _default = VerlScorer(client, default_verifier=os.environ.get("ASSAY_VERIFIER", "math"),
                              error_policy=os.environ.get("ASSAY_ERROR_POLICY", "zero"))
    return _default


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None,
                  **kwargs: Any) -> dict[str, float]:
    return default_scorer().compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)


def compute_score_batch(data_sources: list[str], solution_strs: list[str], ground_truths: list[Any],
                        extra_infos: list[dict[str, Any] | None] | None = None,
                        **kwargs: Any) -> list[dict[str, float]]:
    return default_scorer().compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, **kwargs)
