"""TRL `reward_funcs`: `GRPOTrainer(..., reward_funcs=[assay_reward_func(client)])`.

TRL calls a reward function with `prompts`, `completions`, `completion_ids` and every
dataset column as keyword lists, and accepts `None` for "no reward for this sample" (it
becomes NaN and is ignored), which is how an `error` verdict is dropped by default. The
whole batch goes to Assay in one `/v1/groups` request (up to the client's request bound).
A client made with `run_id=` tags the requests with `run: {id, step}`, the step being the
`trainer_state.global_step` TRL passes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from trainer_client.adapters.common import TaskBuilder, completion_text, default_task_builder, tag_step, to_groups
from trainer_client.client import AsyncRewardClient, RewardClient
from trainer_client.results import ErrorPolicy, GroupResult

RewardFunc = Callable[..., list[float | None]]


def _prepare(prompts: list[Any] | None, completions: list[Any], kwargs: dict[str, Any],
             build: TaskBuilder) -> tuple[list[Any], list[list[int]]]:
    texts = [completion_text(c) for c in completions]
    columns = {k: v for k, v in kwargs.items() if isinstance(v, list | tuple) and len(v) == len(texts)}
    refs = [build(columns, i) for i in range(len(texts))]
    return to_groups(refs, texts)


def _scatter(results: list[GroupResult], index: list[list[int]], n: int, policy: ErrorPolicy,
             kwargs: dict[str, Any], name: str) -> list[float | None]:
    out: list[float | None] = [None] * n
    verdicts = [""] * n
    for group, rows in zip(results, index, strict=True):
        for row, result in zip(rows, group.results, strict=True):
            verdicts[row] = result.verdict
    _log(kwargs, name, verdicts)  # before a `raise` policy can stop the step: errors are always counted
    for group, rows in zip(results, index, strict=True):
        for row, result in zip(rows, group.results, strict=True):
            out[row] = result.reward_under(policy)
    return out


def _log(kwargs: dict[str, Any], name: str, verdicts: list[str]) -> None:
    """Recent TRL passes `log_metric` (scalars averaged per logging step) and `log_extra`
    (a column of the completions table): report verdicts and errors there."""
    log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
    if callable(log_extra):
        log_extra(f"{name}_verdict", list(verdicts))
    if callable(log_metric) and verdicts:
        log_metric(f"{name}/errors", float(verdicts.count("error")))
        for verdict in sorted(set(verdicts)):
            log_metric(f"{name}/verdicts/{verdict}", verdicts.count(verdict) / len(verdicts))


def assay_reward_func(client: RewardClient, *, verifier: str = "math", task_builder: TaskBuilder | None = None,
                      error_policy: ErrorPolicy | str = ErrorPolicy.drop, name: str = "assay") -> RewardFunc:
    """A synchronous TRL reward function backed by Assay."""
    build = task_builder or default_task_builder(verifier)
    policy = ErrorPolicy(error_policy)

    def reward(prompts: list[Any] | None = None, completions: list[Any] | None = None,
               **kwargs: Any) -> list[float | None]:
        if not completions:
            return []
        groups, index = _prepare(prompts, completions, kwargs, build)
        tag_step(client, kwargs)  # TRL passes trainer_state: records go under (client.run_id, global_step)
        return _scatter(client.score_groups(groups), index, len(completions), policy, kwargs, name)

    reward.__name__ = name  # TRL logs rewards/<__name__>/mean
    return reward


def assay_async_reward_func(client: AsyncRewardClient, *, verifier: str = "math",
                            task_builder: TaskBuilder | None = None,
                            error_policy: ErrorPolicy | str = ErrorPolicy.drop,
                            name: str = "assay") -> Callable[..., Awaitable[list[float | None]]]:
    """An `async def` TRL reward function (TRL runs these concurrently with other rewards)."""
    build = task_builder or default_task_builder(verifier)
    policy = ErrorPolicy(error_policy)

    async def reward(prompts: list[Any] | None = None, completions: list[Any] | None = None,
                     **kwargs: Any) -> list[float | None]:
        if not completions:
            return []
        groups, index = _prepare(prompts, completions, kwargs, build)
        tag_step(client, kwargs)
        return _scatter(await client.score_groups(groups), index, len(completions), policy, kwargs, name)

    reward.__name__ = name
    return reward
