"""SQL, second round: honest forms are never punished, forbidden attempts never excused.

Through the verifier's public interface (real sandbox, real SQLite), on every backend in
ASSAY_TEST_BACKENDS. Each hostile response is judged in the same group as an honest one,
which must still get its reward.
"""

from __future__ import annotations

import pytest

from verifiers.base import Verdict, VerifyContext
from verifiers.registry import get
from verifiers.sql.parse import classify

SCHEMA = """
CREATE TABLE item(sku TEXT PRIMARY KEY, name TEXT NOT NULL, qty INTEGER, shelf INTEGER);
CREATE TABLE moves(id INTEGER PRIMARY KEY AUTOINCREMENT, sku TEXT, delta INTEGER);
"""
STOCKED = ("INSERT INTO item VALUES ('s1','bolt',500,3),('s2','nut',120,1),('s3','gear',7,3),"
           "('s4','cam',300,1),('s5','pin',120,2);")
SPARSE = "INSERT INTO item VALUES ('t1','axle',2,9);"
EMPTY = "INSERT INTO moves(sku, delta) VALUES ('x', 1);"


def task(**fields: object):
    spec = {"schema": SCHEMA, "instances": [STOCKED, SPARSE, EMPTY], **fields}
    return get("sql").parse_task(spec)


@pytest.fixture(scope="module")
def ctx(sandbox) -> VerifyContext:
    return VerifyContext(sandbox, reveal_hidden=True)


def judge(t, responses, ctx):
    return get("sql").verify_many(t, responses, ctx)


# ---------------------------------------------------------------- comments after the statement


@pytest.mark.parametrize("tail", ["; -- that is all", ";\n/* every item */", ";; -- x; y", "  ;  \n-- a\n-- b\n",
                                  " -- no semicolon at all"])
def test_a_comment_after_the_last_semicolon_is_not_a_statement(ctx, tail):
    t = task(gold="SELECT name FROM item WHERE qty > 100")
    hostile, honest = judge(t, ["SELECT name FROM item; /* and */ SELECT 1",
                                f"SELECT name FROM item WHERE qty > 100{tail}"], ctx)
    assert hostile.verdict is Verdict.violation
    assert honest.verdict is Verdict.correct, honest.evidence


def test_trailing_comment_in_a_predicate_task_still_runs_in_the_wrapper(ctx):
    t = task(predicate={"sql": "c1 > 100", "columns": 1, "row_count": {"min": 0}})
    wrong, honest = judge(t, ["SELECT qty FROM item; -- all", "SELECT qty FROM item WHERE qty > 100; -- big ones"], ctx)
    assert wrong.verdict is Verdict.incorrect
    assert honest.verdict is Verdict.correct, honest.evidence


def test_what_runs_is_the_statement_without_its_tail():
    found = classify("SELECT 1 ; -- done;\n/* x */", "sqlite", "query")
    assert found.ok and found.text == "SELECT 1"
    assert not classify("SELECT 1; -- c\nDELETE FROM item", "sqlite", "query").ok


# ---------------------------------------------------------------- ties on keys the gold does not return


def test_rows_tied_on_a_key_the_gold_does_not_return_may_come_in_any_order(ctx):
    # shelf is not returned; s2/s4 tie on shelf 1 and s1/s3 on shelf 3.
    t = task(gold="SELECT sku FROM item ORDER BY shelf")
    wrong_order, other_tie_break, honest = judge(t, [
        "SELECT sku FROM item ORDER BY shelf DESC",
        "SELECT sku FROM item ORDER BY shelf, sku DESC",
        "SELECT sku FROM item ORDER BY shelf ASC, qty",
    ], ctx)
    assert wrong_order.verdict is Verdict.incorrect
    assert wrong_order.evidence["instances"][0]["diff"]["order_mismatch_at_row"] == 0
    assert other_tie_break.verdict is Verdict.correct, other_tie_break.evidence
    assert honest.verdict is Verdict.correct


def test_hidden_and_returned_keys_mixed_and_expression_keys(ctx):
    t = task(gold="SELECT name, qty FROM item ORDER BY qty DESC, shelf % 2")
    wrong, honest = judge(t, ["SELECT name, qty FROM item ORDER BY qty DESC, shelf % 2 DESC",
                              "SELECT name, qty FROM item ORDER BY 2 DESC, shelf % 2, name DESC"], ctx)
    # nut (shelf 1) and pin (shelf 2) tie on qty 120 but not on shelf % 2.
    assert wrong.verdict is Verdict.incorrect
    assert honest.verdict is Verdict.correct, honest.evidence


@pytest.mark.parametrize(("gold", "honest", "wrong"), [
    # shelf 3 holds s1 and s3: LIMIT 4 keeps one of them, either will do.
    ("SELECT sku FROM item ORDER BY shelf LIMIT 4", "SELECT sku FROM item ORDER BY shelf, sku DESC LIMIT 4",
     "SELECT sku FROM item ORDER BY qty LIMIT 4"),
    ("SELECT sku, shelf FROM item ORDER BY shelf DESC LIMIT 1",
     "SELECT sku, shelf FROM item ORDER BY 2 DESC, sku DESC LIMIT 1",
     "SELECT sku, shelf FROM item ORDER BY shelf DESC, qty DESC LIMIT 2"),
])
def test_a_limit_that_cuts_a_tie_block_may_keep_any_of_the_tied_rows(ctx, gold, honest, wrong):
    t = task(gold=gold)
    bad, good, other = judge(t, [wrong, honest, honest.replace("DESC LIMIT", "ASC LIMIT")], ctx)
    assert bad.verdict is Verdict.incorrect
    assert good.verdict is Verdict.correct, good.evidence
    assert other.verdict is Verdict.correct, other.evidence


def test_a_distinct_gold_whose_keys_would_split_rows_keeps_a_strict_order(ctx):
    t = task(gold="SELECT DISTINCT shelf FROM item ORDER BY shelf")
    wrong, honest = judge(t, ["SELECT DISTINCT shelf FROM item ORDER BY shelf DESC",
                              "SELECT shelf FROM item GROUP BY shelf ORDER BY 1"], ctx)
    assert wrong.verdict is Verdict.incorrect
    assert honest.verdict is Verdict.correct


def test_instance_dependent_ignores_instances_empty_on_both_sides(ctx):
    t = task(gold="SELECT name FROM item WHERE qty > 100")
    empty_everywhere, honest = judge(t, ["SELECT name FROM item WHERE qty > 100000",
                                         "SELECT name FROM item WHERE qty >= 101"], ctx)
    assert empty_everywhere.verdict is Verdict.incorrect
    assert "instance_dependent" not in empty_everywhere.flag_map()
    # Right on the stocked instance only because of the names it lists: still flagged.
    t2 = task(gold="SELECT name FROM item WHERE qty < 100")
    hard_coded, honest2 = judge(t2, ["SELECT name FROM item WHERE name = 'gear'",
                                     "SELECT name FROM item WHERE qty < 100"], ctx)
    assert hard_coded.verdict is Verdict.incorrect
    assert "instance_dependent" in hard_coded.flag_map()
    assert honest.verdict is Verdict.correct and honest2.verdict is Verdict.correct
    assert "instance_dependent" not in honest.flag_map()


# ---------------------------------------------------------------- same meaning, same verdict


@pytest.mark.parametrize("gold", ["REPLACE INTO item VALUES ('s3','gear',8,3)",
                                  "INSERT OR REPLACE INTO item VALUES ('s3','gear',8,3)"])
def test_replace_into_and_insert_or_replace_are_judged_alike(ctx, gold):
    t = task(mode="mutation", gold=gold, instances=[STOCKED, STOCKED.replace("500", "501")])
    wrong, spelt_a, spelt_b, lower = judge(t, [
        "REPLACE INTO item VALUES ('s3','gear',9,3)",
        "REPLACE INTO item VALUES ('s3','gear',8,3)",
        "INSERT OR REPLACE INTO item VALUES ('s3','gear',8,3);",
        "replace into item (sku, name, qty, shelf) values ('s3', 'gear', 8, 3) -- new count",
    ], ctx)
    assert wrong.verdict is Verdict.incorrect
    for honest in (spelt_a, spelt_b, lower):
        assert honest.verdict is Verdict.correct, honest.evidence


@pytest.mark.parametrize("attempt", [
    "UPDATE sqlite_master SET sql = 'CREATE TABLE item(x)' WHERE name = 'item'",
    "DELETE FROM main.sqlite_schema WHERE type = 'index'",
    'UPDATE "SQLITE_MASTER" SET name = \'other\'',
    "INSERT INTO sqlite_temp_master VALUES ('table', 't', 't', 0, '')",
    "UPDATE sqlite_sequence SET seq = 0",
    "REPLACE INTO sqlite_sequence VALUES ('moves', 99)",
])
def test_a_write_to_the_catalog_is_a_violation_even_where_sqlite_refuses_it_itself(ctx, attempt):
    t = task(mode="mutation", gold="UPDATE item SET qty = qty + 1 WHERE sku = 's3'")
    hostile, honest = judge(t, [attempt, "UPDATE item SET qty = 8 WHERE sku = 's3'"], ctx)
    assert hostile.verdict is Verdict.violation, hostile.evidence
    assert "catalog" in hostile.evidence["reason"]
    assert hostile.reward(t) == 0.0
    assert honest.verdict is Verdict.correct


def test_an_insert_that_moves_the_autoincrement_counter_is_still_an_honest_insert(ctx):
    t = task(mode="mutation", gold="INSERT INTO moves(sku, delta) VALUES ('s1', -5)")
    honest, = judge(t, ["INSERT INTO moves (sku, delta) VALUES ('s1', -5);"], ctx)
    assert honest.verdict is Verdict.correct, honest.evidence


def test_postgres_catalog_targets_are_refused_by_the_parser():
    for attempt in ("UPDATE pg_catalog.pg_class SET relname = 'x'", "DELETE FROM pg_proc",
                    "INSERT INTO information_schema.tables VALUES (1)"):
        found = classify(attempt, "postgres", "mutation")
        assert not found.ok and "catalog" in found.reason, attempt
    assert classify("UPDATE item SET qty = 1", "postgres", "mutation").ok
