"""Traps for the `sql` verifier: the ways reference SQL graders are fooled or made
unsafe. Each is a test through the verifier's public interface, on real SQLite inside the
real sandbox; every attack is followed, in the same sandbox call, by an honest query
that must still be rewarded, and the runtime guards are also tested on their own (the
parser bypassed) to show the evaluation databases stay byte-identical."""

from __future__ import annotations

import time

import pytest

from sandboxes.base import Limits
from verifiers.base import TaskInvalid, Verdict, VerifyContext
from verifiers.registry import get
from verifiers.sql.task import SqlTask

SCHEMA = "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, dept TEXT, salary REAL, boss INTEGER);"
INSTANCES = [
    "INSERT INTO emp VALUES (1,'ann','ops',10.0,NULL),(2,'bob','dev',20.0,1),(3,'cat','dev',20.0,1),"
    "(4,'dan','dev',30.0,2);",
    "INSERT INTO emp VALUES (1,'eve','dev',5.0,NULL),(2,'fay','ops',7.5,1),(3,'gus','dev',5.0,1);",
]
HONEST = "SELECT name FROM emp WHERE dept = 'dev' ORDER BY name"


def task(**fields: object) -> SqlTask:
    raw = {"dialect": "sqlite", "schema": SCHEMA, "instances": INSTANCES, "gold": HONEST, **fields}
    parsed = get("sql").parse_task(raw)
    assert isinstance(parsed, SqlTask)
    return parsed


def judge(ctx: VerifyContext, t: SqlTask, *responses: str):
    return get("sql").verify_many(t, list(responses), ctx)


def assert_honest_still_rewarded(outcome, t: SqlTask) -> None:
    assert outcome.verdict is Verdict.correct, outcome.evidence
    assert outcome.reward(t) == 1.0
    # Any attack that got to run ran in this same sandbox call: the evaluation files
    # hashed the same before and after all of its statements.
    assert "evaluation_database_changed" not in outcome.flags


# --------------------------------------------------------------------- comparison traps


def test_wrong_order_fails_on_gold_written_order_newline_by(ctx):
    # A substring test for "ORDER BY" misses this gold; the parser does not.
    t = task(gold="SELECT name FROM emp WHERE dept = 'dev' ORDER\nBY salary DESC, name")
    wrong, right = judge(ctx, t, "SELECT name FROM emp WHERE dept = 'dev' ORDER BY name",
                         "SELECT name FROM emp WHERE dept='dev' ORDER BY salary DESC, name ASC")
    assert wrong.verdict is Verdict.incorrect and wrong.reward(t) == 0.0
    assert wrong.evidence["order_matters"] is True
    assert "order_mismatch_at_row" in wrong.evidence["instances"][0]["diff"]
    assert_honest_still_rewarded(right, t)


def test_rows_tied_on_the_order_by_keys_may_come_in_any_order(ctx):
    # bob and cat tie on salary 20: their relative order is the database's choice.
    t = task(gold="SELECT name, salary FROM emp WHERE dept = 'dev' ORDER BY salary DESC")
    swapped, ascending, honest = judge(
        ctx, t,
        "SELECT name, salary FROM emp WHERE dept = 'dev' ORDER BY salary DESC, name DESC",
        "SELECT name, salary FROM emp WHERE dept = 'dev' ORDER BY salary",
        "SELECT name, salary FROM emp WHERE dept = 'dev' ORDER BY 2 DESC, name")
    assert swapped.verdict is Verdict.correct, swapped.evidence
    assert ascending.verdict is Verdict.incorrect
    assert "order_mismatch_at_row" in ascending.evidence["instances"][0]["diff"]
    assert_honest_still_rewarded(honest, t)


def test_order_by_in_a_subquery_only_does_not_make_order_matter(ctx):
    t = task(gold="SELECT name FROM (SELECT name FROM emp WHERE dept = 'dev' ORDER BY name DESC)")
    (out,) = judge(ctx, t, "SELECT name FROM emp WHERE dept = 'dev' ORDER BY name")
    assert out.evidence["order_matters"] is False
    assert out.verdict is Verdict.correct


def test_distinct_where_gold_keeps_duplicates_is_wrong(ctx):
    t = task(gold="SELECT salary FROM emp WHERE dept = 'dev'")
    distinct, honest = judge(ctx, t, "SELECT DISTINCT salary FROM emp WHERE dept = 'dev'",
                             "SELECT salary FROM emp WHERE dept = 'dev'")
    assert distinct.verdict is Verdict.incorrect
    diff = distinct.evidence["instances"][0]["diff"]
    assert diff["missing_count"] == 1 and diff["extra_count"] == 0
    assert_honest_still_rewarded(honest, t)


def test_duplicates_where_gold_is_distinct_is_wrong(ctx):
    t = task(gold="SELECT DISTINCT salary FROM emp WHERE dept = 'dev'")
    (dupes,) = judge(ctx, t, "SELECT salary FROM emp WHERE dept = 'dev'")
    assert dupes.verdict is Verdict.incorrect
    assert dupes.evidence["instances"][0]["diff"]["extra_count"] == 1


def test_hard_coded_values_right_on_one_instance_wrong_on_another(ctx):
    t = task()
    hard_coded, honest = judge(ctx, t, "SELECT 'bob' UNION ALL SELECT 'cat' UNION ALL SELECT 'dan'", HONEST)
    first, second = hard_coded.evidence["instances"]
    assert first["match"] is True and second["match"] is False
    assert hard_coded.verdict is Verdict.incorrect and hard_coded.reward(t) == 0.0
    assert "instance_dependent" in hard_coded.flags
    assert_honest_still_rewarded(honest, t)


def test_gold_empty_on_every_instance_is_a_task_error_not_a_free_pass(ctx):
    t = task(gold="SELECT name FROM emp WHERE dept = 'sales'")
    with pytest.raises(TaskInvalid, match="empty on every instance"):
        judge(ctx, t, "SELECT name FROM emp WHERE 0")
    with pytest.raises(TaskInvalid, match="empty on every instance"):
        judge(ctx, t, "SELECT nonsense FROM nowhere")


def test_empty_result_is_not_rewarded_where_gold_is_empty_on_one_instance_only(ctx):
    t = task(gold="SELECT name FROM emp WHERE salary > 25")  # one row, then none
    empty, broken, honest = judge(ctx, t, "SELECT name FROM emp WHERE 0", "SELECT nme FROM emp",
                                  "SELECT name FROM emp WHERE salary > 25.0")
    assert empty.verdict is Verdict.incorrect
    assert broken.verdict is Verdict.incorrect
    assert "no such column" in broken.evidence["instances"][0]["error"]
    assert broken.evidence["instances"][0]["failure"] == "error"
    assert_honest_still_rewarded(honest, t)


def test_null_is_compared_as_null(ctx):
    t = task(gold="SELECT name, boss FROM emp ORDER BY id")
    coalesced, blank, honest = judge(
        ctx, t, "SELECT name, coalesce(boss, 0) FROM emp ORDER BY id",
        "SELECT name, coalesce(boss, '') FROM emp ORDER BY id", "SELECT name, boss FROM emp ORDER BY id")
    assert coalesced.verdict is Verdict.incorrect
    assert blank.verdict is Verdict.incorrect
    assert_honest_still_rewarded(honest, t)


def test_null_filter_semantics(ctx):
    t = task(gold="SELECT name FROM emp WHERE boss IS NULL")
    eq_null, honest = judge(ctx, t, "SELECT name FROM emp WHERE boss = NULL", "SELECT name FROM emp WHERE boss IS NULL")
    assert eq_null.verdict is Verdict.incorrect  # `= NULL` is never true
    assert_honest_still_rewarded(honest, t)


def test_float_drift_is_tolerated_but_rounding_is_not(ctx):
    t = task(gold="SELECT dept, sum(salary) * 0.1 FROM emp GROUP BY dept")
    drift, rounded, honest = judge(
        ctx, t,
        "SELECT dept, sum(salary * 0.1) FROM emp GROUP BY dept",  # same value, different float rounding
        "SELECT dept, round(sum(salary) * 0.1, 0) FROM emp GROUP BY dept",
        "SELECT dept, sum(salary) * 0.1 FROM emp GROUP BY dept",
    )
    assert drift.verdict is Verdict.correct, drift.evidence
    assert rounded.verdict is Verdict.incorrect
    assert_honest_still_rewarded(honest, t)


def test_types_one_equals_one_point_zero_but_not_text_one(ctx):
    t = task(gold="SELECT count(*) FROM emp WHERE dept = 'ops'")
    as_float, as_text, honest = judge(ctx, t, "SELECT count(*) * 1.0 FROM emp WHERE dept = 'ops'",
                                      "SELECT CAST(count(*) AS TEXT) FROM emp WHERE dept = 'ops'",
                                      "SELECT count(id) FROM emp WHERE dept = 'ops'")
    assert as_float.verdict is Verdict.correct
    assert as_text.verdict is Verdict.incorrect
    assert_honest_still_rewarded(honest, t)


def test_integers_are_compared_exactly_not_with_float_tolerance(ctx):
    t = task(gold="SELECT 100000000000")
    (near,) = judge(ctx, t, "SELECT 99999999999")
    assert near.verdict is Verdict.incorrect


# --------------------------------------------------------------------- unsafe statements

ATTACKS = {
    "drop_table": "DROP TABLE emp",
    "multi_statement": "SELECT name FROM emp; DROP TABLE emp",
    "multi_statement_select": "SELECT name FROM emp WHERE dept = 'dev'; SELECT 1",
    "attach": "ATTACH DATABASE '/tmp/work/x.db' AS x",
    "vacuum_into": "VACUUM INTO '/tmp/work/copy.db'",
    "pragma": "PRAGMA writable_schema = ON",
    "pragma_in_select": "SELECT * FROM pragma_table_info('emp')",
    "write_behind_with": "WITH gone AS (DELETE FROM emp RETURNING name) SELECT name FROM gone",
    "insert": "INSERT INTO emp VALUES (9,'zed','dev',1.0,NULL)",
    "load_extension": "SELECT load_extension('/tmp/work/evil.so')",
    "unparsable": "SELEC name FROM emp WHERE !!",
    "begin": "BEGIN",
    "create_temp": "CREATE TEMP TABLE t AS SELECT * FROM emp",
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_unsafe_statement_is_a_violation_and_is_not_run(ctx, name):
    t = task()
    attack, honest = judge(ctx, t, f"```sql\n{ATTACKS[name]}\n```", HONEST)
    if name == "pragma_in_select":
        # A table-valued pragma function parses as a read; the authorizer refuses it at run time.
        assert attack.verdict is Verdict.violation, attack.evidence
        assert attack.reward(t) == 0.0
        assert "sql_denied_at_runtime" in attack.flags
        assert {i["failure"] for i in attack.evidence["instances"]} == {"denied"}
    else:
        assert attack.verdict is Verdict.violation, attack.evidence
        assert {c.name: c.value for c in attack.components}["compliance"] == 0.0
        assert attack.reward(t) == 0.0
        assert "instances" not in attack.evidence  # refused before anything ran
    assert_honest_still_rewarded(honest, t)


def test_runaway_recursive_cte_times_out_within_the_limit_and_stops(ctx):
    t = task(timeout_s=1.0)
    started = time.monotonic()
    runaway, honest = judge(
        ctx, t, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", HONEST)
    elapsed = time.monotonic() - started
    assert runaway.verdict is Verdict.timeout and runaway.reward(t) == 0.0
    first = runaway.evidence["instances"][0]
    assert first["failure"] == "timeout" and "interrupted" in first["error"]  # SQLite itself stopped
    assert runaway.evidence["instances"][1]["failure"] == "skipped"  # not given the time twice
    call = runaway.usage["calls"][0]
    assert call["killed_by"] is None  # the deadline stopped it, not the sandbox's kill
    assert call["cpu_s"] < 2.5, call  # one second of statement time, not a burning worker
    assert elapsed < 6.0
    assert_honest_still_rewarded(honest, t)


def test_huge_cross_join_hits_the_row_cap(ctx):
    t = task(max_rows=1000)
    huge, honest = judge(ctx, t, "SELECT * FROM emp a, emp b, emp c, emp d, emp e, emp f", HONEST)
    assert huge.verdict is Verdict.incorrect and huge.reward(t) == 0.0
    assert huge.evidence["instances"][0]["failure"] == "too_large"
    assert_honest_still_rewarded(honest, t)


def test_huge_cross_join_aggregate_times_out(ctx):
    t = task(timeout_s=1.0)
    huge, honest = judge(ctx, t, "SELECT count(*) FROM emp a, emp b, emp c, emp d, emp e, emp f, emp g, emp h, "
                                 "emp i, emp j, emp k, emp l, emp m, emp n", HONEST)
    assert huge.verdict is Verdict.timeout
    assert_honest_still_rewarded(honest, t)


def test_huge_value_is_refused(ctx):
    t = task()
    big, honest = judge(ctx, t, "SELECT zeroblob(500000000)", HONEST)
    assert big.verdict is Verdict.incorrect and big.reward(t) == 0.0
    assert_honest_still_rewarded(honest, t)


# ------------------------------------------------------- the runtime guards on their own

RUNTIME_ATTACKS = [
    "DROP TABLE emp",
    "DELETE FROM emp",
    "UPDATE emp SET salary = 0",
    "INSERT INTO emp VALUES (9,'zed','dev',1.0,NULL)",
    "ATTACH DATABASE '/tmp/work/x.db' AS x",
    "VACUUM INTO '/tmp/work/copy.db'",
    "VACUUM",
    "PRAGMA writable_schema = ON",
    "PRAGMA query_only = OFF",
    "SELECT load_extension('/tmp/work/evil.so')",
    "SELECT name FROM emp; DROP TABLE emp",
    "CREATE TABLE x(a)",
    "CREATE TEMP TABLE t AS SELECT * FROM emp",
    "BEGIN IMMEDIATE",
    "SELECT * FROM pragma_table_info('emp')",
    "REINDEX",
    "ANALYZE",
]


def test_runtime_guards_refuse_writes_even_when_the_parser_is_bypassed(sandbox):
    """Defence in depth: hand hostile statements straight to the sandboxed runner."""
    from verifiers.sql.sqlite_backend import POOL, PRELOAD, TARGET

    t = task()
    payload = {
        "mode": "query", "schema": SCHEMA, "instances": INSTANCES,
        "statements": [{"sql": s} for s in [*RUNTIME_ATTACKS, HONEST]],
        "limits": {**t.limits_payload(), "call_budget_bytes": 4_000_000},
    }
    call = sandbox.call(TARGET, payload, Limits(wall_s=60, cpu_s=60, memory_mb=768), pool=POOL, preload=PRELOAD)
    assert call.returned, (call.raised, call.stderr[-2000:])
    for instance in call.value["instances"]:
        assert instance["digest_before"] == instance["digest_after"]
        *attacks, honest = instance["results"]
        for sql, result in zip(RUNTIME_ATTACKS, attacks, strict=True):
            assert not result["ok"], sql
            assert result["kind"] == "denied", (sql, result)  # refused by the guards, not by luck
        assert honest["ok"] and honest["rows"]
