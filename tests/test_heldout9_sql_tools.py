"""Held-out SQL statements and tool_state traces, round 9: written blind (the public docs only),
labelled with the verdict the contract gives (tests/data/heldout9/sql.json, tool_state.json).
Through the public HTTP API on the in-process app and the process sandbox.
"""

from __future__ import annotations

import pytest

from tests.heldout9_support import check_expected, held_to, judge_cases, load_cases

SQL_CASES = load_cases("sql")
TOOL_CASES = load_cases("tool_state")


@pytest.fixture(scope="module")
def sql_verdicts(client) -> dict[str, dict]:
    return judge_cases(client, "sql", SQL_CASES)


@pytest.fixture(scope="module")
def tool_verdicts(client) -> dict[str, dict]:
    return judge_cases(client, "tool_state", TOOL_CASES)


@pytest.mark.parametrize("case", SQL_CASES, ids=[case["name"] for case in SQL_CASES])
def test_heldout9_sql(sql_verdicts, case):
    check_expected(sql_verdicts[case["name"]], held_to(case))


@pytest.mark.parametrize("case", TOOL_CASES, ids=[case["name"] for case in TOOL_CASES])
def test_heldout9_tool_state(tool_verdicts, case):
    check_expected(tool_verdicts[case["name"]], held_to(case))
