"""Red team: no SQL response can turn its own verdict into `error` (issue 17).

Hostile statements go after the parser, the sandboxed SQLite runner, its memory, its
output and the encoding of what it sends back. Each must get reward 0 and a verdict
other than `error`; an honest query judged in the same group must still be rewarded.
Runs on every backend in ASSAY_TEST_BACKENDS."""

from __future__ import annotations

import pytest

from verifiers.base import Verdict
from verifiers.registry import get
from verifiers.sql.task import SqlTask

SCHEMA = "CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, data BLOB);"
INSTANCES = ["INSERT INTO t VALUES (1, 'a', x'00ff'), (2, 'b', NULL), (3, 'c', x'');"]
HONEST = "SELECT name FROM t ORDER BY id"
NEST = 50_000

ATTACKS = {
    "parenthesis_nesting_past_the_recursion_limit": "SELECT " + "(" * NEST + "1" + ")" * NEST,
    "subquery_nesting_past_the_recursion_limit": "SELECT name FROM t WHERE id IN (" * 2000 + "1" + ")" * 2000,
    "expression_chain": "SELECT " + " + ".join(["1"] * 100_000),
    "case_nesting": "SELECT " + "CASE WHEN 1 THEN " * 5000 + "1" + " END" * 5000,
    "endless_recursive_cte": "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r",
    "memory_exhaustion_blob": "SELECT randomblob(2000000000)",
    "memory_exhaustion_string": "SELECT printf('%.*c', 1000000000, 'x')",
    "memory_exhaustion_group_concat": ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r LIMIT 10000000) "
                                       "SELECT group_concat(hex(randomblob(64))) FROM r"),
    "output_flood_rows": ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r LIMIT 5000000) "
                          "SELECT x, hex(randomblob(100)) FROM r"),
    "invalid_utf8_text": "SELECT CAST(x'ff80fe' AS TEXT) FROM t",
    "encoded_surrogate_text": "SELECT CAST(x'eda080' AS TEXT) FROM t",
    "blob_values": "SELECT data FROM t ORDER BY id",
    "integer_overflow": "SELECT 9223372036854775807 + 1, -9223372036854775808 - 1",
    "huge_float_and_nan": "SELECT 1e308 * 10, -1e308 * 10, 0.0 / 0",
    "nul_byte_in_statement": "SELECT name FROM t\x00; DROP TABLE t",
    "lone_surrogate_in_statement": "SELECT '\ud800' FROM t",
    "load_extension": "SELECT load_extension('/tmp/x')",
    "attach_a_file": "ATTACH DATABASE '/tmp/x.db' AS x",
    "pragma_writable_schema": "PRAGMA writable_schema = 1",
    "empty_statement": ";;;",
    "many_statements": "SELECT 1;" * 5000,
}


def _task() -> SqlTask:
    parsed = get("sql").parse_task({"dialect": "sqlite", "schema": SCHEMA, "instances": INSTANCES, "gold": HONEST})
    assert isinstance(parsed, SqlTask)
    return parsed


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_sql_attack_is_never_error(ctx, name):
    task = _task()
    attack, honest = get("sql").verify_many(task, [ATTACKS[name], HONEST], ctx)
    assert attack.verdict is not Verdict.error, attack.evidence
    assert attack.reward(task) == 0.0, (attack.verdict, attack.evidence)
    assert (honest.verdict, honest.reward(task)) == (Verdict.correct, 1.0), honest.evidence


def test_attack_alone_then_honest(ctx):
    # Alone in its group, so nothing shares its sandbox call.
    task = _task()
    for statement in (ATTACKS["parenthesis_nesting_past_the_recursion_limit"], ATTACKS["memory_exhaustion_blob"]):
        (attack,) = get("sql").verify_many(task, [statement], ctx)
        assert attack.verdict is not Verdict.error and attack.reward(task) == 0.0, attack.evidence
    (honest,) = get("sql").verify_many(task, [HONEST], ctx)
    assert honest.reward(task) == 1.0, honest.evidence
