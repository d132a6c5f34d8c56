"""Shared by tests/test_heldout7_*.py: judge held-out cases through the public HTTP API.

Each case is (task, response, label): label True means a careful human grader gives the
response full reward, False means no reward. Cases of one task go in one `/v1/groups`
request, as a trainer would send them; a case is judged by its own result's verdict.
"""

from __future__ import annotations

import json
from typing import Any


def judge_groups(client: Any, verifier: str, groups: list[tuple[dict, list[Any]]]) -> list[list[dict]]:
    """Results per group, in order; the request is one `/v1/groups` call. A response given as an
    object (a tool-state trace) is sent as its JSON text, as a policy would write it."""
    body = {"groups": [{"verifier": verifier, "task": task,
                        "responses": [r if isinstance(r, str) else json.dumps(r) for r in responses]}
                       for task, responses in groups]}
    reply = client.post("/v1/groups", json=body)
    assert reply.status_code == 200, reply.text
    out = []
    for group in reply.json()["groups"]:
        assert group.get("error") is None, group["error"]
        out.append(group["results"])
    return out


def judge_one(client: Any, verifier: str, task: dict, response: Any) -> dict:
    return judge_groups(client, verifier, [(task, [response])])[0][0]


def check_label(result: dict, label: bool) -> None:
    """Full reward exactly when the label says so; never an infrastructure error."""
    assert result["verdict"] != "error", result
    rewarded = result["verdict"] == "correct"
    assert rewarded is label, (result["verdict"], result.get("evidence"))


def case_params(count: int, disagree: dict[int, str]) -> list[Any]:
    """One pytest param per case index; a case the verifier still disagrees with is named so
    (its test pins the documented choice, `pinned`)."""
    import pytest

    return [pytest.param(i, id=f"{i}-documented" if i in disagree else str(i)) for i in range(count)]


def pinned(label: bool, index: int, disagree: dict[int, str]) -> bool:
    """The label a case is held to: the blind one, or for a case in `disagree` the documented
    choice (its opposite, with the reason in `disagree`), so that a change of rule is seen."""
    return label if index not in disagree else not label
