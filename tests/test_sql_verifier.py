"""The `sql` verifier on SQLite through its public interface (real sandbox, real SQLite),
plus the comparison rules and the statement classifier on their own."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest

from verifiers.base import TaskInvalid, Verdict
from verifiers.registry import get
from verifiers.sql.compare import Tagged, Tolerance, compare_results, values_equal
from verifiers.sql.parse import classify, extract_sql, order_key_columns, outermost_order_by
from verifiers.sql.task import SqlTask

ISSUE_TASK = {
    "dialect": "sqlite",
    "schema": "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, dept TEXT, salary REAL);",
    "instances": ["INSERT INTO emp VALUES (1,'ann','ops',10.0),(2,'bob','dev',20.0);",
                  "INSERT INTO emp VALUES (1,'cid','dev',5.0);"],
    "gold": "SELECT name FROM emp WHERE dept = 'dev' ORDER BY name",
}
ISSUE_RESPONSE = "```sql\nSELECT name FROM emp WHERE dept = 'dev' ORDER BY name\n```"


def parse(**fields: object) -> SqlTask:
    task = get("sql").parse_task({**ISSUE_TASK, **fields})
    assert isinstance(task, SqlTask)
    return task


def test_issue_request_shape_is_rewarded(ctx):
    task = parse()
    out = get("sql").verify(task, ISSUE_RESPONSE, ctx)
    assert out.verdict is Verdict.correct
    assert out.reward(task) == 1.0
    assert {c.name: (c.value, c.hard) for c in out.components} == {
        "format": (1.0, True), "compliance": (1.0, True), "correctness": (1.0, True)}
    assert [i["rows"] for i in out.evidence["instances"]] == [1, 1]
    assert out.usage["backend"] == "sqlite-in-sandbox"


def test_response_without_sql_is_invalid_format(ctx):
    task = parse()
    for response in ("", "   ", "```python\nprint('hi')\n```", "-- just a comment"):
        out = get("sql").verify(task, response, ctx)
        assert out.verdict is Verdict.invalid_format, response
        assert out.reward(task) == 0.0


def test_column_order_always_matters_names_only_when_asked(ctx):
    task = parse(gold="SELECT name, salary FROM emp")
    swapped, renamed = get("sql").verify_many(task, ["SELECT salary, name FROM emp",
                                                     "SELECT name AS who, salary AS pay FROM emp"], ctx)
    assert swapped.verdict is Verdict.incorrect
    assert renamed.verdict is Verdict.correct
    strict = parse(gold="SELECT name, salary FROM emp", column_names_matter=True)
    renamed, same = get("sql").verify_many(strict, ["SELECT name AS who, salary AS pay FROM emp",
                                                    "SELECT NAME, Salary FROM emp"], ctx)
    assert renamed.verdict is Verdict.incorrect
    assert "column names differ" in renamed.evidence["instances"][0]["diff"]["columns"]
    assert same.verdict is Verdict.correct


def test_wrong_column_count_is_incorrect(ctx):
    out = get("sql").verify(parse(), "SELECT name, dept FROM emp WHERE dept = 'dev' ORDER BY name", ctx)
    assert out.verdict is Verdict.incorrect
    assert "columns" in out.evidence["instances"][0]["diff"]


def test_order_matters_option_overrides_the_gold(ctx):
    unordered = parse(gold="SELECT name FROM emp ORDER BY name", order_matters=False)
    out = get("sql").verify(unordered, "SELECT name FROM emp ORDER BY name DESC", ctx)
    assert out.verdict is Verdict.correct
    ordered = parse(gold="SELECT name FROM emp", order_matters=True)
    out = get("sql").verify(ordered, "SELECT name FROM emp ORDER BY name DESC", ctx)
    assert out.verdict is Verdict.incorrect


def test_float_tolerance_option(ctx):
    loose = parse(gold="SELECT salary FROM emp", float_tolerance=0.01)
    assert get("sql").verify(loose, "SELECT salary * 1.001 FROM emp", ctx).verdict is Verdict.correct
    tight = parse(gold="SELECT salary FROM emp")
    assert get("sql").verify(tight, "SELECT salary * 1.001 FROM emp", ctx).verdict is Verdict.incorrect


def test_evidence_never_shows_gold_rows_unless_allowed(ctx):
    hidden = parse()
    out = get("sql").verify(hidden, "SELECT 'zed'", ctx)
    diff = out.evidence["instances"][0]["diff"]
    assert diff["missing_count"] == 1 and "missing" not in diff
    assert diff["extra"] == [["zed"]]  # the response's own rows are fine to show
    text = repr(out.evidence)
    assert "bob" not in text and "cid" not in text and "ORDER BY name" not in text
    shown = parse(show_expected=True)
    out = get("sql").verify(shown, "SELECT 'zed'", ctx)
    assert out.evidence["instances"][0]["diff"]["missing"] == [["bob"]]


def test_gold_failures_are_task_errors_without_leaking_the_gold(ctx):
    with pytest.raises(TaskInvalid) as err:
        get("sql").verify(parse(gold="SELECT secret_column FROM emp"), "SELECT 1", ctx)
    assert "secret_column" not in str(err.value)
    with pytest.raises(TaskInvalid, match="gold is not a single read-only query"):
        get("sql").verify(parse(gold="DELETE FROM emp"), "SELECT 1", ctx)
    with pytest.raises(TaskInvalid, match="instance 1 failed to load"):
        get("sql").verify(parse(instances=["INSERT INTO emp VALUES (1,'a','b',1.0);", "INSERT INTO nope VALUES (1);"]),
                          "SELECT 1", ctx)


def test_task_model_validation():
    verifier = get("sql")
    with pytest.raises(TaskInvalid, match="exactly one of gold, expected, predicate"):
        verifier.parse_task({k: v for k, v in ISSUE_TASK.items() if k != "gold"})
    with pytest.raises(TaskInvalid, match="one list of rows per instance"):
        verifier.parse_task({**ISSUE_TASK, "gold": None, "expected": [[["bob"]]]})
    with pytest.raises(TaskInvalid):
        verifier.parse_task({**ISSUE_TASK, "dialect": "mysql"})
    view = parse().public_view()
    assert view["schema"] == ISSUE_TASK["schema"]
    assert set(view["gold"]) == {"sha256"} and set(view["instances"]) == {"sha256"}


def test_explicit_expected_rows(ctx):
    task = parse(gold=None, expected=[[["bob", 20.0]], [["cid", 5]]])
    good, wrong = get("sql").verify_many(task, ["SELECT name, salary FROM emp WHERE dept = 'dev'",
                                                "SELECT name, salary + 1 FROM emp WHERE dept = 'dev'"], ctx)
    assert good.verdict is Verdict.correct
    assert wrong.verdict is Verdict.incorrect
    with pytest.raises(TaskInvalid, match="empty on every instance"):
        get("sql").verify(parse(gold=None, expected=[[], []]), "SELECT 1", ctx)


def test_row_predicates(ctx):
    predicate = {"sql": "EXISTS (SELECT 1 FROM emp WHERE emp.name = result.c1 AND emp.salary >= 10)",
                 "columns": 1, "row_count": {"min": 1, "max": 1}}
    task = parse(gold=None, instances=ISSUE_TASK["instances"][:1], predicate=predicate)
    right, too_many, wrong_rows, empty = get("sql").verify_many(task, [
        "SELECT name FROM emp WHERE salary >= 10 LIMIT 1",
        "SELECT name FROM emp",
        "SELECT 'nobody'",
        "SELECT name FROM emp WHERE 0",
    ], ctx)
    assert right.verdict is Verdict.correct, right.evidence
    assert too_many.verdict is Verdict.incorrect
    assert wrong_rows.verdict is Verdict.incorrect
    assert "1 rows fail the predicate" in wrong_rows.evidence["instances"][0]["problems"]
    assert empty.verdict is Verdict.incorrect


def test_mutation_task_judged_by_row_level_difference(ctx):
    task = parse(mode="mutation", gold="UPDATE emp SET salary = salary * 2 WHERE dept = 'dev'")
    outs = get("sql").verify_many(task, [
        "UPDATE emp SET salary = 2 * salary WHERE dept = 'dev'",
        "UPDATE emp SET salary = salary * 2",  # touches rows it must not
        "UPDATE emp SET salary = 40.0 WHERE name = 'bob'",  # hard-coded: right on one instance only
        "DELETE FROM emp WHERE dept = 'dev'",
        "DROP TABLE emp",
        "SELECT * FROM emp",  # changes nothing
        "UPDATE emp SET salary = salary * 2 WHERE dept = 'dev'; DELETE FROM emp",
    ], ctx)
    verdicts = [o.verdict for o in outs]
    assert verdicts == [Verdict.correct, Verdict.incorrect, Verdict.incorrect, Verdict.incorrect,
                        Verdict.violation, Verdict.incorrect, Verdict.violation]
    untouchable = outs[1].evidence["instances"][0]["tables"]["emp"]
    assert untouchable["unexpected_removed"] == [[1, "ann", "ops", 10.0]]
    assert "instance_dependent" in outs[2].flags
    with pytest.raises(TaskInvalid, match="changes nothing"):
        get("sql").verify(parse(mode="mutation", gold="DELETE FROM emp WHERE dept = 'sales'"), "SELECT 1", ctx)


def test_mutation_insert_with_defaults(ctx):
    task = parse(mode="mutation", gold="INSERT INTO emp(name, dept, salary) VALUES ('new', 'dev', 1.0)")
    good, other = get("sql").verify_many(task, [
        "INSERT INTO emp(dept, name, salary) VALUES ('dev', 'new', 1.0)",
        "INSERT INTO emp(name, dept, salary) VALUES ('new', 'ops', 1.0)",
    ], ctx)
    assert good.verdict is Verdict.correct
    assert other.verdict is Verdict.incorrect


def test_large_group_is_batched_and_every_response_judged_on_its_own(ctx):
    task = parse(timeout_s=0.5)
    honest = "SELECT name FROM emp WHERE dept = 'dev' ORDER BY name"
    runaway = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c"
    # Distinct texts (identical responses would run once, see the next test; a comment
    # after the statement does not make it another statement, one inside it does).
    responses = [r for i in range(31) for r in (f"/* {i} */ {honest}", f"SELECT /* {i} */ 'bob'", "DROP TABLE emp")]
    responses += [runaway, runaway.replace("max(x)", "max(x) + 0")]
    outs = get("sql").verify_many(task, responses, ctx)
    expected = [Verdict.correct, Verdict.incorrect, Verdict.violation] * 31 + [Verdict.timeout] * 2
    assert [o.verdict for o in outs] == expected
    # 64 statements (gold included) at 0.5 s x 2 instances each do not fit one call's time budget.
    assert outs[0].usage["n_calls"] >= 2


def test_results_too_big_for_one_call_are_deferred_not_lost(ctx):
    rows = ",".join(f"({i},'{'x' * 200}','dev',1.0)" for i in range(2000))
    task = parse(instances=[f"INSERT INTO emp VALUES {rows};"], gold="SELECT * FROM emp",
                 max_result_bytes=2_000_000)
    outs = get("sql").verify_many(task, [f"SELECT /* {i} */ * FROM emp" for i in range(12)], ctx)
    assert all(o.verdict is Verdict.correct for o in outs)
    assert outs[0].usage["n_calls"] >= 2


def test_identical_responses_run_once_but_get_their_own_outcomes(ctx):
    task = parse(timeout_s=0.5)
    runaway = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c"
    started = time.monotonic()
    outs = get("sql").verify_many(task, [runaway] * 8, ctx)
    assert time.monotonic() - started < 3.0  # eight runaways would take four seconds
    assert [o.verdict for o in outs] == [Verdict.timeout] * 8
    assert outs[0] is not outs[1] and outs[0].evidence is not outs[1].evidence


# --------------------------------------------------------------- rules on their own

TOL = Tolerance()


def test_value_rules():
    assert values_equal(1, 1.0, TOL)
    assert values_equal(Decimal("2.50"), 2.5, TOL)
    assert not values_equal("1", 1, TOL)
    assert not values_equal(None, 0, TOL) and not values_equal(None, "", TOL)
    assert values_equal(None, None, TOL)
    assert not values_equal(True, 1, TOL)
    assert values_equal(0.1 + 0.2, 0.3, TOL)
    assert not values_equal(99999999999, 100000000000, TOL)
    assert not values_equal(Decimal("0.1"), Decimal("0.1000000001"), TOL)  # exact without floats
    assert values_equal(float("nan"), float("nan"), TOL)
    assert not values_equal(b"1", "1", TOL)
    assert values_equal(Tagged("date", "2024-01-01"), Tagged("date", "2024-01-01"), TOL)
    assert not values_equal(Tagged("date", "2024-01-01"), "2024-01-01", TOL)


def test_multiset_rules():
    def same(expected, actual, order=False):
        return compare_results(["a"] * len(expected[0]), expected, ["a"] * len(actual[0]), actual,
                               order_matters=order, column_names_matter=False, tol=TOL).match

    assert same([(1,), (2,), (2,)], [(2,), (1,), (2,)])
    assert not same([(1,), (2,), (2,)], [(1,), (2,)])
    assert not same([(1,), (2,)], [(1,), (2,), (2,)])
    assert not same([(1,), (2,)], [(2,), (1,)], order=True)
    assert same([(0.30000000000000004, "x"), (1.0, "y")], [(1, "y"), (0.3, "x")])
    assert not same([(True,), (2,)], [(2,), (1,)])  # a boolean is not the number 1
    assert same([(float("nan"),), (None,)], [(None,), (float("nan"),)])
    assert not same([(None,), (1,)], [(1,), (0,)])


def test_classifier_and_extraction():
    assert outermost_order_by("SELECT a FROM t ORDER\nBY a", "sqlite")
    assert outermost_order_by("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1", "sqlite")
    assert not outermost_order_by("SELECT a FROM (SELECT a FROM t ORDER BY a) /* ORDER BY */", "sqlite")
    assert classify("WITH x AS (SELECT 1) SELECT * FROM x", "sqlite", "query").ok
    assert classify("VALUES (1), (2)", "sqlite", "query").ok
    assert classify("SELECT 1;", "postgres", "query").ok
    for sql in ("SELECT 1; SELECT 2", "SELECT * INTO t2 FROM t", "SELECT * FROM t FOR UPDATE",
                "SELECT set_config('statement_timeout', '0', false)", "SELECT nextval('s')", "COPY t TO '/tmp/x'"):
        assert not classify(sql, "postgres", "query").ok, sql
    assert classify("UPDATE t SET a = (SELECT max(a) FROM t)", "sqlite", "mutation").kind == "mutation"
    assert not classify("WITH x AS (DELETE FROM u RETURNING *) INSERT INTO t SELECT * FROM x", "postgres",
                        "mutation").ok
    assert extract_sql("Here:\n```sql\nSELECT 1\n```\nthen\n```sql\nSELECT 2\n```") == "SELECT 2"
    assert order_key_columns("SELECT name AS n, salary FROM emp ORDER BY salary DESC, 1", "sqlite") == (1, 0)
    assert order_key_columns("SELECT count(*) AS c, dept FROM emp GROUP BY dept ORDER BY count(*)", "sqlite") == (0,)
    assert order_key_columns("SELECT e.name FROM emp e ORDER BY e.salary", "sqlite") is None  # not in the result
    assert order_key_columns("SELECT * FROM emp ORDER BY name", "sqlite") is None
    assert extract_sql("SELECT 3") == "SELECT 3"
    assert extract_sql("```\nSELECT 4\n```") == "SELECT 4"
    assert extract_sql("With that in mind:\nSELECT a FROM t\n\nIt returns a.") == "SELECT a FROM t"
    assert extract_sql("no sql here, sorry") is None


def test_concurrent_verifications_share_calls_without_mixing_tasks(ctx):
    """Under load, jobs of different tasks go to the sandbox together; each must still be
    judged on its own task's data (and a runaway in one must not decide another)."""
    from concurrent.futures import ThreadPoolExecutor

    tasks = [parse(instances=[f"INSERT INTO emp VALUES (1,'n{k}','dev',{k}.0),(2,'m{k}','ops',1.0);"],
                   gold="SELECT name, salary FROM emp WHERE dept = 'dev'", timeout_s=0.5) for k in range(12)]
    runaway = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x), 1 FROM c"

    def one(k: int) -> list[Verdict]:
        responses = ["SELECT name, salary FROM emp WHERE dept = 'dev'", f"SELECT 'n{(k + 1) % 12}', {k}.0",
                     runaway if k % 4 == 0 else "SELECT name, salary FROM emp WHERE salary > 0 AND dept <> 'ops'"]
        return [o.verdict for o in get("sql").verify_many(tasks[k], responses, ctx)]

    with ThreadPoolExecutor(8) as pool:
        verdicts = list(pool.map(one, range(12)))
    for k, got in enumerate(verdicts):
        last = Verdict.timeout if k % 4 == 0 else Verdict.correct
        assert got == [Verdict.correct, Verdict.incorrect, last], (k, got)
