"""Task statistics in a time window add up BIGINT counts (issue 27 item 3, audit10).

Postgres sums a BIGINT into a NUMERIC. The window's statement adds up, per task, the whole hours'
rollup rows (BIGINT counts) and the edges' and split groups' corrections (sums of counts): while
those were NUMERIC, every count of the UNION ALL became NUMERIC, each hour's row was cast, and each
task's sums kept a NUMERIC state: ~300 of ~400 ms for a 1-day window at 10M records (~24,000 tasks),
against ~50 ms with BIGINT sums. The figures are the same either way (tests/test_audit_windows.py
compares them with a tally over the records)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from service.store import AuditStore
from service.task_stats import task_stats
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)
from tests.test_audit_scale import NOW, fill


@pytest.mark.postgres
def test_a_windowed_task_statistics_statement_casts_no_count_to_numeric(database: str):  # noqa: F811
    store = AuditStore(database)
    fill(store, seed=5, n_groups=60)
    statements: list[tuple[str, dict]] = []

    def keep(conn, cursor, statement, params, context, executemany) -> None:  # noqa: ANN001
        if "rollup_task_hours" in statement:
            statements.append((statement, params))

    sa.event.listen(store.engine, "before_cursor_execute", keep)
    try:
        # Partial hours at both edges, whole hours between: every part of the statement.
        found = task_stats(store, since=NOW - timedelta(hours=20, minutes=13), until=NOW - timedelta(minutes=7))
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", keep)
    assert found and len(statements) == 1
    statement, params = statements[0]
    assert "edge_groups" in statement and "rollup_split_groups" in statement
    with store.engine.connect() as conn:
        plan = "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN (VERBOSE) " + statement, params))
    assert "numeric" not in plan, plan
    store.engine.dispose()
