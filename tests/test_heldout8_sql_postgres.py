"""Held-out SQL statements, round 8, Postgres dialect: a second blind batch (16 statements,
written before the SQL verifier's code was read; 15/16 before the round's fix, 16/16 after),
then regression cases for the fix: a `real` (float4) result is compared at no finer than
single precision (`verifiers/sql/compare.py`, `SINGLE_RELATIVE`).

Through the verifier registry's Python API with the Postgres service, as tests/test_sql_postgres.py.
"""

from __future__ import annotations

import pytest

from tests.heldout8_sql_cases import PG_CASES, PG_SALES, C, X, pg_task, sql
from tests.test_sql_postgres import ctx, postgres_url  # noqa: F401 - fixtures
from verifiers.registry import get

pytestmark = pytest.mark.postgres

PG_FIX_CASES: list[tuple[str, dict, str, str]] = [
    ("float4_sum_far_off", pg_task(PG_SALES), sql("SELECT emp_id, SUM(amount) * 1.001 FROM sales GROUP BY emp_id"), X),
    ("float4_sum_off_by_1e5", pg_task(PG_SALES),
     sql("SELECT emp_id, SUM(amount) * 1.00001 FROM sales GROUP BY emp_id"), X),
    ("float4_gold_numeric_answer", pg_task("SELECT emp_id, SUM(amount) FROM sales GROUP BY emp_id"),
     sql("SELECT emp_id, ROUND(SUM(amount)::numeric, 2) FROM sales GROUP BY emp_id"), C),
    ("double_stays_at_the_task_tolerance", pg_task(PG_SALES),
     sql("SELECT emp_id, ROUND(SUM(amount)::numeric, 2)::float8 + 0.000001 FROM sales GROUP BY emp_id"), X),
]


ALL = PG_CASES + PG_FIX_CASES


@pytest.mark.parametrize("name,raw,response,expected", ALL, ids=[case[0] for case in ALL])
def test_heldout8_sql_postgres(ctx, name, raw, response, expected):  # noqa: F811 - the fixture
    verifier = get("sql")
    task = verifier.parse_task(raw)
    outcome = verifier.verify_many(task, [response], ctx)[0]
    assert outcome.verdict.value == expected, (outcome.verdict, outcome.evidence)
    assert (outcome.reward(task) == 1.0) is (expected == "correct")
