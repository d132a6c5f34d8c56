"""Turning a trainer's batch (completions + dataset columns) into Assay groups."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from assay_rules.grouping import consecutive_runs
from trainer_client.results import Group

# Builds the task reference of row i from the trainer's columns: {"verifier", "task"|"task_id"}.
TaskBuilder = Callable[[dict[str, Sequence[Any]], int], dict[str, Any]]


def default_task_builder(verifier: str = "math") -> TaskBuilder:
    """Columns `task_id`, then `task` (object or JSON), then `answer`/`solution` (math answer)."""

    def build(columns: dict[str, Sequence[Any]], i: int) -> dict[str, Any]:
        name = columns["verifier"][i] if "verifier" in columns else verifier
        if columns.get("task_id") is not None and columns["task_id"][i] is not None:
            return {"verifier": name, "task_id": str(columns["task_id"][i])}
        if columns.get("task") is not None and columns["task"][i] is not None:
            task = columns["task"][i]
            return {"verifier": name, "task": json.loads(task) if isinstance(task, str) else dict(task)}
        for column in ("answer", "solution", "ground_truth"):
            if columns.get(column) is not None:
                return {"verifier": name, "task": {"answer": str(columns[column][i])}}
        raise KeyError("no task column: give `task_id`, `task`, or `answer`/`solution`, or pass task_builder=")

    return build


def trainer_step(kwargs: dict[str, Any], extra: dict[str, Any] | None = None) -> int | None:
    """The trainer's global step from what it passed: TRL's `trainer_state.global_step`, or a
    `global_step`/`global_steps` keyword or extra_info key (verl's meta_info name)."""
    state = kwargs.get("trainer_state")
    if state is not None and isinstance(getattr(state, "global_step", None), int):
        return int(state.global_step)
    for source in (kwargs, extra or {}):
        for name in ("global_step", "global_steps"):
            value = source.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
    return None


def tag_step(client: Any, kwargs: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
    """Set the client's step (its requests then carry `run: {id, step}`) when the trainer gave one."""
    step = trainer_step(kwargs, extra)
    if step is not None and getattr(client, "run_id", None) is not None:
        client.at_step(step)


def completion_text(completion: Any) -> str:
    """A TRL completion: plain text, or a conversation whose last message is the answer."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        content = completion[-1].get("content", "")
        if isinstance(content, list):  # multimodal content parts
            return "".join(part.get("text", "") for part in content if isinstance(part, dict))
        return str(content)
    raise TypeError(f"unsupported completion type {type(completion).__name__}")


def to_groups(refs: list[dict[str, Any]], texts: list[str]) -> tuple[list[Group], list[list[int]]]:
    """Consecutive rows with the same task form one group (`consecutive_runs`); returns the
    groups and the row indices of each."""
    runs = consecutive_runs(refs)
    return [Group(**ref, responses=[texts[i] for i in idx]) for ref, idx in runs], [idx for _, idx in runs]
