"""The export line has one definition (service/record_line.py), derived from RecordOut: a new
RecordOut field with a column of its name is written by both export paths (Python and
PostgreSQL) as the API writes it; one the export cannot derive fails loudly, naming it."""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa

from service.pipeline.results import record_out
from service.record_line import FIELDS, RecordFormatError, columns_of, line_fields, python_line, sql_line
from service.schemas import RecordOut
from service.store import AuditStore
from service.tables import RecordRow
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)
from tests.test_audit_scale import fill, stored


class Wider(RecordOut):
    """RecordOut with fields added: stored columns of those names, of several kinds."""

    chain_id: str | None = None
    chain_index: int | None = None
    advantage: float | None = None
    group_zero_variance: bool | None = None
    submission_index: int | None = None


def _wider(row: RecordRow) -> dict[str, Any]:
    """What the API would write for Wider: RecordOut's values plus the added columns."""
    extra = {name: getattr(row, name) for name in Wider.model_fields if name not in RecordOut.model_fields}
    return json.loads(Wider(**record_out(row).model_dump(), **extra).model_dump_json())


def test_the_export_fields_are_record_outs():
    assert [f.name for f in FIELDS] == list(RecordOut.model_fields)


@pytest.mark.postgres
def test_a_new_record_field_flows_into_both_export_paths(database: str):  # noqa: F811
    store = AuditStore(database)
    fill(store, seed=5, n_groups=25)
    fields = line_fields(Wider)
    assert [f.name for f in fields] == list(Wider.model_fields)
    rows = stored(store)
    expected = [_wider(r) for r in rows]
    assert any(e["chain_id"] for e in expected) and any(e["chain_index"] for e in expected)
    # Python (SQLite, the archive): from plain rows of the derived columns.
    columns = ", ".join(columns_of(fields))
    with store.engine.connect() as conn:
        plain = conn.execute(sa.text(f"SELECT {columns} FROM records ORDER BY seq")).all()
        in_sql = conn.execute(sa.text(f"SELECT {sql_line(fields)} FROM records ORDER BY seq")).scalars().all()
    in_python = [python_line(fields)(r) for r in plain]
    for lines in (in_python, in_sql):
        assert [json.loads(line) for line in lines] == expected
        assert [list(json.loads(line)) for line in lines] == [list(e) for e in expected]


def test_a_field_the_export_cannot_derive_fails_loudly():
    class NoColumn(RecordOut):
        shiny: str | None = None

    class UnknownType(RecordOut):
        usage: set[str] | None  # type: ignore[assignment]

    with pytest.raises(RecordFormatError, match=r"RecordOut\.shiny.*no stored column 'shiny'"):
        line_fields(NoColumn)
    with pytest.raises(RecordFormatError, match=r"RecordOut\.usage.*does not know how to write"):
        line_fields(UnknownType)
