"""Shared by tests/test_heldout9_*.py and tests/test_heldout10_*.py: load a round's blind cases
(tests/data/heldout9/*.json, tests/data/heldout10/*.json) and judge them through `/v1/groups`
(tests/heldout8_support.py).

A case is `{"name", "task", "response", "expected", "note"?, "documented"?}`; `expected` is the blind
label: one verdict, or a list of verdicts a careful grader could give (all of them without reward)
where the contract leaves the choice open, with the reason in `note`. `documented`, added after the
blind run and only with a `note`, is the verdict the documented rule gives where it differs from the
blind label and the rule is kept: the test pins it, so a change of rule is seen.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.heldout8_support import verdicts_of

DATA = Path(__file__).parent / "data"


def load_cases(family: str, round_dir: str = "heldout9") -> list[dict[str, Any]]:
    """The family's cases of one round as written blind, in file order."""
    return json.loads((DATA / round_dir / f"{family}.json").read_text(encoding="utf-8"))


def judge_cases(client: Any, verifier: str, cases: list[dict[str, Any]]) -> dict[str, dict]:
    """Each case's result by its name."""
    names = [case["name"] for case in cases]
    assert len(set(names)) == len(names), "case names are unique"
    rows = [(case["name"], case["task"], case["response"], held_to(case)) for case in cases]
    return verdicts_of(client, verifier, rows)


def held_to(case: dict[str, Any]) -> str | list[str]:
    """The verdict(s) a case's test requires: the documented one where it was settled so, else the blind label."""
    return case.get("documented", case["expected"])
