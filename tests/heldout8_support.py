"""Shared by tests/test_heldout8_*.py: judge held-out cases through `/v1/groups`, one group per
case, at most 32 groups a request (a request holds at most 64)."""

from __future__ import annotations

from typing import Any

from tests.heldout7_support import judge_groups


def verdicts_of(client: Any, verifier: str, cases: list[tuple[str, dict, str, str]]) -> dict[str, dict]:
    """Each case's result by its name."""
    groups = [(task, [response]) for _, task, response, _ in cases]
    results = [group[0] for start in range(0, len(groups), 32)
               for group in judge_groups(client, verifier, groups[start:start + 32])]
    return {name: result for (name, *_), result in zip(cases, results, strict=True)}


def check_verdict(result: dict, expected: str | list[str]) -> None:
    """The verdict the contract gives, or one of those a case allows where it leaves the choice open
    (never an infrastructure error); reward 1 exactly when correct."""
    allowed = [expected] if isinstance(expected, str) else expected
    assert result["verdict"] in allowed, (result["verdict"], result.get("evidence"))
    assert (result["reward"] == 1.0) is (result["verdict"] == "correct"), result
