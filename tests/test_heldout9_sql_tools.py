"""Held-out SQL statements and tool_state traces, round 9: written blind (the public docs only),
labelled with the verdict the contract gives (tests/data/heldout9/sql.json, tool_state.json).
Through the public HTTP API on the in-process app and the process sandbox.
"""

from __future__ import annotations

import json

import pytest

from tests.heldout8_support import check_verdict
from tests.heldout9_support import held_to, judge_cases, load_cases

SQL_CASES = load_cases("sql")
TOOL_CASES = load_cases("tool_state")
C, X, F, V = "correct", "incorrect", "invalid_format", "violation"


def _fix_case(name: str, like: str, cases: list[dict], response: str, expected: str, **task_changes: object) -> dict:
    """A case written after the blind run: the task of blind case `like` (changed), another response."""
    task = {**next(case["task"] for case in cases if case["name"] == like), **task_changes}
    return {"name": name, "task": task, "response": response, "expected": expected}


UK_ROWS = "SELECT title FROM books WHERE author_id IN (SELECT id FROM authors WHERE country = 'UK')"
# sql 1.3.0: SQL inside a sentence is found when it parses, a second statement stays a violation.
SQL_FIX_CASES = [
    _fix_case("inline_then_delete", "unfenced_in_prose", SQL_CASES, "Run this: SELECT 1; DELETE FROM loans", V),
    _fix_case("inline_after_colon_then_prose", "unfenced_in_prose", SQL_CASES,
              f"Query: {UK_ROWS}; it returns three rows on the first instance.", C),
    _fix_case("inline_wrong_rows", "unfenced_in_prose", SQL_CASES, "I would run SELECT title FROM books;", X),
    _fix_case("prose_select_is_no_sql", "unfenced_in_prose", SQL_CASES, "Then we SELECT the rows that matter.", F),
    _fix_case("lower_case_inline_is_prose", "unfenced_in_prose", SQL_CASES, f"I would run {UK_ROWS.lower()}", F),
]

PAY_ALL = {"tool": "transfer", "args": {"from_account": "A1", "to_account": "A3", "amount": 950}}
PAY_ON = {"tool": "transfer", "args": {"from_account": "A3", "to_account": "A2", "amount": 1250}}


def _trace(calls: list[dict], message: str = "Done.") -> str:
    return json.dumps({"calls": calls, "final_message": message})


# tool_state 1.2.0: a log is a multiset of entries; order that matters still shows.
TOOL_FIX_CASES = [
    _fix_case("dependent_in_order", "two_payments_in_order", TOOL_CASES, _trace([PAY_ALL, PAY_ON]), C,
              gold_actions=[PAY_ALL, PAY_ON]),
    _fix_case("dependent_out_of_order", "two_payments_in_order", TOOL_CASES, _trace([PAY_ON, PAY_ALL]), X,
              gold_actions=[PAY_ALL, PAY_ON]),
    _fix_case("one_payment_twice", "two_payments_in_order", TOOL_CASES,
              _trace([{"tool": "transfer", "args": {"from_account": "A1", "to_account": "A2", "amount": 300}}] * 2
                     + [{"tool": "transfer", "args": {"from_account": "A3", "to_account": "A2", "amount": 100}}]), X),
]


@pytest.fixture(scope="module")
def sql_verdicts(client) -> dict[str, dict]:
    return judge_cases(client, "sql", SQL_CASES + SQL_FIX_CASES)


@pytest.fixture(scope="module")
def tool_verdicts(client) -> dict[str, dict]:
    return judge_cases(client, "tool_state", TOOL_CASES + TOOL_FIX_CASES)


@pytest.mark.parametrize("case", SQL_CASES, ids=[case["name"] for case in SQL_CASES])
def test_heldout9_sql(sql_verdicts, case):
    check_verdict(sql_verdicts[case["name"]], held_to(case))


@pytest.mark.parametrize("case", TOOL_CASES, ids=[case["name"] for case in TOOL_CASES])
def test_heldout9_tool_state(tool_verdicts, case):
    check_verdict(tool_verdicts[case["name"]], held_to(case))


@pytest.mark.parametrize("case", SQL_FIX_CASES, ids=[case["name"] for case in SQL_FIX_CASES])
def test_heldout9_sql_fixes(sql_verdicts, case):
    check_verdict(sql_verdicts[case["name"]], case["expected"])


@pytest.mark.parametrize("case", TOOL_FIX_CASES, ids=[case["name"] for case in TOOL_FIX_CASES])
def test_heldout9_tool_state_fixes(tool_verdicts, case):
    check_verdict(tool_verdicts[case["name"]], case["expected"])
