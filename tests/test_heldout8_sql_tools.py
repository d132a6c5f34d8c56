"""Held-out SQL statements and tool_state traces, round 8: written blind (the public docs
only), labelled with the verdict the contract gives. Blind scores: SQL 53/53 before any fix;
tool_state 20/21 and, in a second blind batch, 12/13: each difference the blind label's
mistake (see the cases' comments), no verifier change.

Through the public HTTP API (`/v1/groups`) on the in-process app and the process sandbox.
"""

from __future__ import annotations

import pytest

from tests.heldout8_sql_cases import SQL_CASES
from tests.heldout8_support import check_verdict, verdicts_of
from tests.heldout8_tool_state_cases import TOOL_STATE_CASES, TOOL_STATE_CASES_2


@pytest.fixture(scope="module")
def sql_verdicts(client) -> dict[str, dict]:
    return verdicts_of(client, "sql", SQL_CASES)


@pytest.fixture(scope="module")
def tool_verdicts(client) -> dict[str, dict]:
    return verdicts_of(client, "tool_state", TOOL_STATE_CASES + TOOL_STATE_CASES_2)


@pytest.mark.parametrize("name,expected", [(name, expected) for name, _, _, expected in SQL_CASES])
def test_heldout8_sql(sql_verdicts, name, expected):
    check_verdict(sql_verdicts[name], expected)


@pytest.mark.parametrize("name,expected",
                         [(name, expected) for name, _, _, expected in TOOL_STATE_CASES + TOOL_STATE_CASES_2])
def test_heldout8_tool_state(tool_verdicts, name, expected):
    check_verdict(tool_verdicts[name], expected)


def test_fitted_statements_are_flagged_instance_dependent(sql_verdicts):
    """A statement fitted to one instance's ids is right there and wrong on the other."""
    for name in ("hard_coded_dept_id", "raise_hard_coded_id"):
        assert "instance_dependent" in sql_verdicts[name]["flags"], sql_verdicts[name]
