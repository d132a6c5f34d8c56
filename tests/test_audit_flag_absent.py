"""A flag page for a flag its verifier or window never had is empty at once (issue 27 item 3).

At ten million records `verifier=math&flag=forbidden_tool` (a tool_state flag: no math record has
it) took 175-325 ms: the planner took the two filters as independent, expected thousands of rows
and walked every flagged record's index entry in seq order to find none. The hourly rollups
count each flag per verifier and hour for every record ever written (archived ones too), so when
they hold none in the hours the page's window touches, the page is empty without reading the
records. The same check guards `/v1/records` (`AuditStore.query`) and the export. These tests hold
the page, the API's list and the export to the records filtered by hand, with a flag that only one
verifier has, in and out of its hour, and for a record written a moment before the read (on
SQLite the rollups lag the writer until a read names them)."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import sqlalchemy as sa

from service.audit_export import export_lines
from service.store import AuditStore
from service.tables import RecordRow, TaskBlobRow
from service.ui.queries import RecordFilter
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)
from tests.test_audit_scale import FLAGS, NOW, VERIFIERS, every_page, fill, stored, url  # noqa: F401  (url: fixture)

RARE = "only_on_sql"
BLOB = TaskBlobRow(task_hash="r" * 64, verifier="sql", task={"answer": "1"})


def _record(verifier: str, flags: list[str], at) -> RecordRow:
    return RecordRow(id=uuid.uuid4().hex, created_at=at, caller_key_id="key0", task_hash="r" * 64,
                     task_public={}, verifier=verifier, verifier_version="1", response_hash="0" * 64,
                     response="x", components={}, reward=0.0, verdict="incorrect", evidence={}, flags=flags,
                     sandbox_backend="process", duration_ms=1.0)


def _by_hand(rows: list[RecordRow], f: RecordFilter) -> list[str]:
    keep = [r for r in rows if f.flag in r.flags and f.verifier in (None, r.verifier)
            and (f.since is None or r.created_at.replace(tzinfo=f.since.tzinfo) >= f.since)
            and (f.until is None or r.created_at.replace(tzinfo=f.until.tzinfo) < f.until)]
    return [r.id for r in sorted(keep, key=lambda r: r.seq, reverse=True)]


def _api_and_export(store: AuditStore, f: RecordFilter) -> tuple[list[str], list[str]]:
    """The ids `/v1/records` (AuditStore.query) and the export give for the filter, newest first."""
    filters = {"flag": f.flag, "verifier": f.verifier, "since": f.since, "until": f.until}
    listed = [r.id for r in store.query(limit=100_000, **filters)]
    exported = [json.loads(line)["id"] for chunk in export_lines(store, filters)
                for line in chunk.splitlines()]
    return listed[::-1], exported[::-1]


def _records_reads(store: AuditStore) -> list[str]:
    """The statements that read the records table, from now on."""
    seen: list[str] = []

    def note(_conn, _cursor, statement: str, *_args) -> None:
        if " records" in statement.replace("\n", " ") and "FROM" in statement and "rollup_" not in statement:
            seen.append(statement)

    sa.event.listen(store.engine, "before_cursor_execute", note)
    return seen


def test_flag_pages_by_verifier_and_window_are_the_records_filtered_by_hand(url: str):  # noqa: F811
    store = AuditStore(url)
    fill(store, seed=5, n_groups=60)
    rare_at = NOW - timedelta(hours=3, minutes=10)
    store.append([_record("sql", [RARE], rare_at)], [BLOB])
    rows = stored(store)
    windows = [{}, {"since": rare_at - timedelta(hours=1)}, {"since": rare_at + timedelta(minutes=5)},
               {"since": rare_at + timedelta(hours=2)}, {"until": rare_at}, {"until": rare_at + timedelta(seconds=1)},
               {"since": NOW - timedelta(hours=20), "until": NOW - timedelta(hours=10)}]
    checked = empty = 0
    for flag in (*FLAGS, RARE, "never_seen"):
        for verifier in (None, *VERIFIERS, "tool_state"):
            for window in windows:
                f = RecordFilter(flag=flag, verifier=verifier, **window)
                found = every_page(store, f, limit=7)
                assert found == _by_hand(rows, f), (flag, verifier, window)
                assert _api_and_export(store, f) == (found, found), (flag, verifier, window)
                checked += 1
                empty += not found
    assert empty and checked - empty > 40  # both kinds of page were checked
    # The rare flag's own record, by its verifier, in its hour: the page has it.
    assert every_page(store, RecordFilter(flag=RARE, verifier="sql"), limit=7) == _by_hand(
        rows, RecordFilter(flag=RARE, verifier="sql")) != []
    store.engine.dispose()


def test_a_flag_page_that_cannot_have_a_record_does_not_read_the_records(url: str):  # noqa: F811
    store = AuditStore(url)
    fill(store, seed=9, n_groups=30)
    store.append([_record("sql", [RARE], NOW - timedelta(hours=2))], [BLOB])
    reads = _records_reads(store)
    for f in (RecordFilter(flag=RARE, verifier="math"), RecordFilter(flag="never_seen"),
              RecordFilter(flag=RARE, since=NOW + timedelta(hours=1)), RecordFilter(flag=RARE, sort="slowest",
                                                                                    verifier="code")):
        assert every_page(store, f, limit=5) == []
        assert _api_and_export(store, f) == ([], [])
    assert reads == [], reads[:1]
    # A page that may have records still reads them.
    assert len(every_page(store, RecordFilter(flag=RARE, verifier="sql"), limit=5)) == 1
    assert reads
    store.engine.dispose()


def test_a_record_with_a_new_flag_is_on_its_flag_page_at_once(url: str):  # noqa: F811
    # Written by the record writer and read right after: on SQLite the rollups have not counted
    # it yet when the read starts; the read's look at them must catch them up first.
    store = AuditStore(url)
    fill(store, seed=3, n_groups=30)
    for n in range(5):
        fresh = f"fresh_flag_{n}"
        record = _record(VERIFIERS[n % 3], [fresh], NOW - timedelta(minutes=n))
        store.append([record], [BLOB])
        page = every_page(store, RecordFilter(flag=fresh, verifier=VERIFIERS[n % 3]), limit=5)
        assert page == [record.id], (fresh, page)
        assert _api_and_export(store, RecordFilter(flag=fresh)) == (page, page)
    store.engine.dispose()
