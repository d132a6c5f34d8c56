"""Red team 8, SQL: statements that would change the instance so that the gold query, run after
them, agrees with whatever they return (delete the rows, shadow the table with a TEMP table or
view, attach another database, open a transaction), through the real service on each backend
of ASSAY_TEST_BACKENDS. None gets a reward or an `error`; the honest query right after does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from service.testing.app import AppServer
from tests.conftest import BACKENDS
from tests.sandbox_server_support import backend_server

pytestmark = pytest.mark.slow

TASK = {"schema": "CREATE TABLE emp(id INTEGER PRIMARY KEY, name TEXT, salary REAL);",
        "instances": ["INSERT INTO emp VALUES (1,'a',120.5),(2,'b',99.25),(3,'c',300.0);",
                      "INSERT INTO emp VALUES (1,'d',10.0),(2,'e',20.0);"],
        "gold": "SELECT avg(salary) FROM emp"}
# Each returns what the gold query would return on the instance it leaves behind.
ATTACKS = [
    "DELETE FROM emp; SELECT NULL",
    "CREATE TEMP TABLE emp(salary REAL); SELECT NULL",
    "CREATE TEMP VIEW emp AS SELECT 7 AS salary; SELECT 7",
    "CREATE TEMP TABLE emp AS SELECT 7.0 AS salary; SELECT 7.0",
    "CREATE TEMP TRIGGER t AFTER INSERT ON emp BEGIN SELECT 1; END; SELECT NULL",
    "ATTACH ':memory:' AS x; SELECT NULL",
    "UPDATE emp SET salary = 1; SELECT 1.0",
    "SELECT 1.0 FROM emp LIMIT 1; UPDATE emp SET salary = 1",
    "PRAGMA query_only = 0; DELETE FROM emp; SELECT NULL",
    "SAVEPOINT a; DELETE FROM emp; SELECT NULL",
    "BEGIN; DELETE FROM emp; SELECT NULL",
    "WITH d AS (SELECT 1) DELETE FROM emp RETURNING NULL",
    "DELETE FROM emp RETURNING NULL",
    "REPLACE INTO emp VALUES (1,'z',1.0) RETURNING 1.0",
]


@pytest.fixture(scope="module", params=BACKENDS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AppServer]:
    yield from backend_server(request, tmp_path_factory, "redteam8-sql")


def test_statements_that_rewrite_the_instance_before_the_gold_query_get_nothing(server):
    statements = [*ATTACKS, "SELECT avg(salary) FROM main.emp"]
    with server.client(server.reward_key, timeout=600) as c:  # type: ignore[attr-defined]
        reply = c.post("/v1/groups", json={"groups": [{"verifier": "sql", "task": TASK, "responses": [
            f"```sql\n{s}\n```" for s in statements]}]})
    assert reply.status_code == 200, reply.text[:2000]
    results = reply.json()["groups"][0]["results"]
    for statement, result in zip(ATTACKS, results, strict=False):
        assert result["reward"] == 0.0 and result["verdict"] not in ("correct", "error"), (statement, result)
    assert results[-1]["reward"] == 1.0, results[-1]
