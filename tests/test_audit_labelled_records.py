"""Labelled records kept apart (revision 0020, issue 27 item 3): the records page's label filter
(driven from `labelled_records` on partitioned Postgres) and the review queue's labelled counts
(read from it everywhere) give what the stored records and labels say, for labels written before
and after a first read, a relabelled record, every other filter and every sort, paged.

Hostile first: a label page asked with a cursor of another sort is refused naming `after`; the
honest cursor then pages through every match."""

from __future__ import annotations

import random
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from service import audit_partitions
from service.review import STRATA, review_queue, stratum_of
from service.store import AuditStore
from service.tables import LabelledRecordRow, LabelRow
from service.ui.queries import SORTS, BadCursor, RecordFilter, record_page
from tests.conftest import REPO
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)
from tests.test_audit_scale import NOW, _rows, every_page, fill, pages_agree, stored, url  # noqa: F401  (url: a fixture)


def _label(store: AuditStore, record_id: str, label: str) -> None:
    store.add_label(LabelRow(id=uuid.uuid4().hex, record_id=record_id, author="t", author_key_id="k", label=label))


def _latest(store: AuditStore) -> dict[str, str]:
    with store.db() as s:
        return dict(s.execute(sa.select(LabelRow.record_id, LabelRow.label).order_by(LabelRow.seq)).all())


def _utc(moment: datetime) -> datetime:
    """SQLite gives back naive UTC times."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def test_label_pages_and_review_counts_are_the_stored_labels(url: str):  # noqa: F811
    store = AuditStore(url)
    fill(store, seed=31, n_groups=90)  # labels 12 records
    rows = stored(store)
    rng = random.Random(4)
    for r in rng.sample(rows, 40):
        _label(store, r.id, rng.choice(["agree", "disagree", "exploit"]))
    relabelled = rows[5]
    _label(store, relabelled.id, "exploit")
    _label(store, relabelled.id, "agree")  # its latest label
    sample = next(r for r in rows if r.id in _latest(store) and r.group_id and r.task_id)
    # A first read (the review queue keeps the labelled records per store), then more labels.
    review_queue(store, None, None, 30, seed=1)
    for r in rng.sample(rows, 15):
        _label(store, r.id, "exploit")
    latest = _latest(store)
    by_id = {r.id: r for r in rows}

    with store.db() as s:
        kept = {row.record_id: row for row in s.scalars(sa.select(LabelledRecordRow))}
    assert set(kept) == set(latest)  # one row per labelled record, written by the trigger
    for record_id, row in kept.items():
        record = by_id[record_id]
        assert (row.seq, row.verifier, row.verdict, row.reward, row.flags, row.caller_key_id, row.task_hash,
                row.group_id, row.run_id) == (record.seq, record.verifier, record.verdict, record.reward,
                                              record.flags, record.caller_key_id, record.task_hash, record.group_id,
                                              record.run_id)

    def wanted(f: RecordFilter) -> list[str]:
        keep = [r for r in rows if (f.label == "any" and r.id in latest) or latest.get(r.id) == f.label]
        keep = [r for r in keep if f.verifier in (None, r.verifier) and f.verdict in (None, r.verdict)
                and f.key in (None, r.caller_key_id) and f.group in (None, r.group_id)
                and f.task in (None, r.task_id) and (f.flag is None or f.flag in r.flags)
                and (f.since is None or _utc(r.created_at) >= f.since)]
        column, descending = SORTS[f.sort]
        keep.sort(key=lambda r: (getattr(r, column.key), r.seq), reverse=descending)
        return [r.id for r in keep]

    flag = next(f for r in rows if r.id in latest for f in r.flags)
    extras = ({}, {"verifier": sample.verifier}, {"verdict": sample.verdict}, {"key": sample.caller_key_id},
              {"group": sample.group_id, "key": sample.caller_key_id}, {"task": sample.task_id}, {"flag": flag},
              {"since": NOW - timedelta(hours=10)}, {"verifier": "no_such_verifier"})
    assert pages_agree(store, wanted, "label", ("agree", "disagree", "exploit", "any"), extras) > 60
    assert relabelled.id in every_page(store, RecordFilter(label="agree"), 50)
    assert relabelled.id not in every_page(store, RecordFilter(label="exploit"), 50)

    # Hostile: a cursor of another sort; then the honest one.
    first = record_page(store, RecordFilter(label="any", sort="reward_desc"), None, limit=5)
    assert first.next_cursor is not None
    with pytest.raises(BadCursor, match="after"):
        record_page(store, RecordFilter(label="any", sort="newest"), first.next_cursor, limit=5)
    second = record_page(store, RecordFilter(label="any", sort="reward_desc"), first.next_cursor, limit=5)
    assert [r["id"] for r in first.rows + second.rows] == wanted(RecordFilter(label="any", sort="reward_desc"))[:10]

    # The review queue: labelled records out of every stratum's count, the new labels too.
    picked, available = review_queue(store, None, None, 30, seed=2)
    for stratum in STRATA:
        assert available[stratum] == sum(1 for r in rows if r.id not in latest and stratum_of(r, None) == stratum)
    assert all(r.id not in latest for _, r in picked)


@pytest.mark.postgres
def test_archiving_a_day_forgets_its_labelled_records(database: str, tmp_path):  # noqa: F811
    """`assay audit archive` removes the archived days' rows of labelled_records (their labels stay):
    the label pages then show only the labelled records still stored."""
    store = AuditStore(database)
    old_day = (NOW - timedelta(days=3)).date()
    with store.engine.begin() as conn:
        audit_partitions.create_partitions(conn, [old_day, old_day + timedelta(days=1)])
    rng = random.Random(6)
    for rows in _rows(rng, 10, datetime(old_day.year, old_day.month, old_day.day, 1, tzinfo=UTC), 20):
        store.append(rows, [])
    for rows in _rows(rng, 10, NOW - timedelta(minutes=30), 0.2):
        store.append(rows, [])
    rows = stored(store)
    old = [r for r in rows if _utc(r.created_at).date() <= old_day + timedelta(days=1)]
    new = [r for r in rows if r not in old]
    for r in old[:5] + new[:5]:
        _label(store, r.id, "exploit")
    assert len(every_page(store, RecordFilter(label="exploit"), 50)) == 10
    out = subprocess.run([sys.executable, "-m", "service.cli", "audit", "archive", "--before",
                          str(NOW.date() - timedelta(days=1)), "--out", str(tmp_path / "archive")], cwd=REPO,
                         capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "ASSAY_DATABASE_URL": database})
    assert out.returncode == 0, out.stdout + out.stderr
    with store.db() as s:
        kept = set(s.scalars(sa.select(LabelledRecordRow.record_id)))
        labels = s.scalar(sa.select(sa.func.count()).select_from(LabelRow))
    assert kept == {r.id for r in new[:5]} and labels == 10
    assert every_page(store, RecordFilter(label="exploit", sort="oldest"), 3) == [r.id for r in new[:5]]
    # The review queue never offers a labelled record (the rollups, and so its strata sizes, keep
    # counting archived records by design: docs/operations.md).
    picked, _ = review_queue(store, None, None, 30, seed=3)
    assert picked and all(r.id in {n.id for n in new[5:]} for _, r in picked)
