"""Labels and evaluation runs are append-only on Postgres too, whoever connects."""

from __future__ import annotations

import psycopg
import pytest

from service.store import AuditStore
from service.tables import EvalRow, LabelRow
from tests.test_audit_postgres import database, postgres_url  # noqa: F401 - fixtures

pytestmark = pytest.mark.postgres


def test_labels_and_evals_refuse_update_and_delete(database: str):  # noqa: F811
    store = AuditStore(database)
    store.add_label(LabelRow(id="l1", record_id="r1", author="ada", author_key_id="k", label="agree"))
    store.add_eval(EvalRow(id="e1", name="n", checkpoint="c", caller_key_id="k", layout={}))
    store.engine.dispose()
    AuditStore(database).engine.dispose()  # a second start-up re-installs the triggers cleanly
    with psycopg.connect(database.replace("postgresql+psycopg://", "postgresql://")) as conn:
        for statement in ("UPDATE labels SET label = 'exploit'", "DELETE FROM labels",
                          "UPDATE evals SET name = 'x'", "DELETE FROM evals"):
            with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
                conn.execute(statement)
            conn.rollback()
        assert conn.execute("SELECT label FROM labels").fetchall() == [("agree",)]
