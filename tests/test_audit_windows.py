"""Held out (written before revision 0015 and the changes it came with; issue 27 item 3): short
overview windows, task statistics over windows and label pages answer exactly as the records do.

- The overview of windows of 3-12 hours (15-minute buckets), with edges on and off the quarter
  hours, with a verifier, after groups whose rows arrive in two writes in different quarter hours,
  equals the computation from the window's records.
- Task statistics over windows whose first attempts lie at either edge, with more tasks than
  the limit, equal the tally of the window's records, in first-attempt order, for every limit.
- Label pages combined with a key, a time window and a relabelled record, paged in every sort,
  equal the records filtered by hand.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from service.store import AuditStore
from service.tables import LabelRow, RecordRow
from service.task_stats import task_stats
from service.ui.queries import SORTS, OverviewFilter, RecordFilter, overview, record_page
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)
from tests.test_audit_scale import _aware, assert_same_overview, assert_task_stats, reference_task_stats

# A quarter hour boundary, an hour after which the stored records end.
END = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
VERIFIERS = ("math", "code", "proof")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'windows.db'}"
    return request.getfixturevalue("database")


def _record(rng: random.Random, at: datetime, task: int, verifier: str, key: str, group: str | None,
            index: int | None, value: float, zero: bool | None) -> RecordRow:
    verdict = "error" if rng.random() < 0.04 else ("correct" if value else rng.choice(["incorrect", "timeout"]))
    return RecordRow(
        id=uuid.uuid4().hex, created_at=at, caller_key_id=key, task_id=f"{verifier}/t{task}" if task % 3 else None,
        task_hash=f"{verifier[:2]}{task:062x}", task_public=None, verifier=verifier, verifier_version="2",
        response_hash=f"{rng.getrandbits(256):064x}",
        response=None if rng.random() < 0.15 else "y" * rng.choice([5, 120, 450, 2500, 12_000]),
        components={"correctness": {"value": value, "hard": False}}, reward=value, verdict=verdict,
        evidence={}, flags=[f for f in ("forbidden_tool", "exits_process") if rng.random() < 0.2],
        sandbox_backend="process", usage=None, duration_ms=rng.choice([0.5, 3.0, 40.0, 900.0]) * rng.random(),
        group_id=group, group_index=index, submission_id=uuid.uuid4().hex[:32], submission_index=index or 0,
        group_zero_variance=zero, tokens=rng.choice([None, 7, 99]))


def _fill(store: AuditStore, seed: int, across_hours: bool = True) -> None:
    """~13 hours of requests every few minutes: groups of 3 written at once, groups whose second
    half arrives 9-20 minutes later (often in the next quarter hour; with `across_hours`
    sometimes in the next hour, else kept inside the hour), single answers; 40 tasks, so a
    window holds more tasks than a small limit."""
    rng = random.Random(seed)
    at = END - timedelta(hours=13, minutes=7)
    while at < END:
        verifier, task, key = rng.choice(VERIFIERS), rng.randrange(40), rng.choice(["ka", "kb", None])
        kind = rng.random()
        if kind < 0.4:
            values = [rng.choice([0.0, 1.0]) for _ in range(3)]
            group = uuid.uuid4().hex[:12]
            store.append([_record(rng, at + timedelta(milliseconds=i), task, verifier, key, group, i, v,
                                  len(set(values)) == 1) for i, v in enumerate(values)], [])
        elif kind < 0.6:
            values = [rng.choice([0.0, 1.0]) for _ in range(4)]
            group = uuid.uuid4().hex[:12]
            later = at + timedelta(minutes=rng.randrange(9, 21))
            if not across_hours:
                later = min(later, at.replace(minute=59, second=59))
            zero = len(set(values)) == 1
            store.append([_record(rng, at, task, verifier, key, group, i, v, zero)
                          for i, v in enumerate(values[:2])], [])
            if later < END:
                store.append([_record(rng, later, task, verifier, key, group, i + 2, v, zero)
                              for i, v in enumerate(values[2:])], [])
        else:
            store.append([_record(rng, at, task, verifier, key, None, None, rng.choice([0.0, 1.0]), None)], [])
        at += timedelta(minutes=rng.choice([1, 2, 3, 4]), seconds=rng.randrange(60))


def _stored(store: AuditStore) -> list[RecordRow]:
    with store.db() as s:
        return list(s.scalars(sa.select(RecordRow).order_by(RecordRow.seq)))


def test_short_overview_windows_are_the_records(url: str):
    store = AuditStore(url)
    _fill(store, seed=31)
    windows = [
        (END - timedelta(hours=6), None, None),  # ends at the last record
        (END - timedelta(hours=6, minutes=7), END - timedelta(minutes=22), None),
        (END - timedelta(hours=12), END, None),  # quarter-aligned both sides, 48 buckets
        (END - timedelta(hours=9, minutes=44, seconds=13), END - timedelta(hours=3, minutes=1), "code"),
        (END - timedelta(hours=4, minutes=30), END - timedelta(minutes=15), "proof"),
        (END - timedelta(hours=11, minutes=59), END - timedelta(hours=2, minutes=59, seconds=59), None),
    ]
    for since, until, verifier in windows:
        f = OverviewFilter(since=since.isoformat(), until=until.isoformat() if until else None, verifier=verifier)
        exact = overview(store, f, exact_limit=10**9)
        assert exact["bucket_seconds"] == 900, (since, until)
        assert sum(v["n"] for v in exact["verifiers"]) > 20
        assert_same_overview(exact, overview(store, f, exact_limit=0))
    # More writes after the first reads: the next read counts them.
    _fill(store, seed=32)
    f = OverviewFilter(since=(END - timedelta(hours=7, minutes=3)).isoformat())
    assert_same_overview(overview(store, f, exact_limit=10**9), overview(store, f, exact_limit=0))


def _check_windowed_task_statistics(store: AuditStore) -> None:
    written = _stored(store)
    for since, until in ((END - timedelta(hours=10, minutes=31), END - timedelta(hours=1, minutes=5)),
                         (END - timedelta(hours=24), None), (END - timedelta(minutes=50), None),
                         (None, END - timedelta(hours=11, minutes=44)),
                         (END - timedelta(hours=3), END - timedelta(hours=1)),
                         (END - timedelta(hours=8, minutes=59, seconds=30), END - timedelta(hours=2, seconds=1))):
        inside = [r for r in written if (since is None or _aware(r.created_at) >= since)
                  and (until is None or _aware(r.created_at) < until)]
        order = list(dict.fromkeys((r.task_id, r.task_hash) for r in inside))
        found = task_stats(store, since=since, until=until)
        assert_task_stats(found, reference_task_stats(inside))
        assert [(s.task_id, s.task_hash) for s in found] == order, (since, until)
        for limit in (1, 4, 11):
            assert task_stats(store, since=since, until=until, limit=limit) == found[:limit], (since, until, limit)
        code = [r for r in inside if r.verifier == "code"]
        assert_task_stats(task_stats(store, since=since, until=until, verifier="code"), reference_task_stats(code))


def test_windowed_task_statistics_are_the_records_in_first_attempt_order(url: str):
    store = AuditStore(url)
    _fill(store, seed=41, across_hours=False)
    _check_windowed_task_statistics(store)


def test_windowed_task_statistics_with_groups_across_hours(url: str):
    store = AuditStore(url)
    _fill(store, seed=41)
    _check_windowed_task_statistics(store)


def test_label_pages_with_key_window_and_relabels_are_the_records(url: str):
    _check_label_pages(url)


def test_label_pages_past_the_label_driven_limit_are_the_records(url: str, monkeypatch: pytest.MonkeyPatch):
    """More labels than LABEL_DRIVEN_MAX: the sort's index walk (Postgres), the same pages."""
    from service.ui import queries

    monkeypatch.setattr(queries, "LABEL_DRIVEN_MAX", 10)
    _check_label_pages(url)


def _check_label_pages(url: str) -> None:
    store = AuditStore(url)
    _fill(store, seed=53)
    rows = _stored(store)
    rng = random.Random(5)
    for row in rng.sample(rows, 60):
        for label in rng.sample(["agree", "disagree", "exploit"], rng.choice([1, 1, 2])):
            store.add_label(LabelRow(id=uuid.uuid4().hex, record_id=row.id, author="t", author_key_id="key0",
                                     label=label))
    with store.db() as s:
        latest = dict(s.execute(sa.select(LabelRow.record_id, LabelRow.label).order_by(LabelRow.seq)).all())
    since, until = END - timedelta(hours=9, minutes=10), END - timedelta(hours=2, minutes=20)

    def wanted(f: RecordFilter) -> list[str]:
        keep = [r for r in rows if f.key in (None, r.caller_key_id) and f.verifier in (None, r.verifier)
                and (f.flag is None or f.flag in r.flags)
                and (f.since is None or _aware(r.created_at) >= f.since)
                and (f.until is None or _aware(r.created_at) < f.until)
                and (f.label == latest.get(r.id, "none") or (f.label == "any" and r.id in latest))]
        column, descending = SORTS[f.sort]
        keep.sort(key=lambda r: (getattr(r, column.key), r.seq), reverse=descending)
        return [r.id for r in keep]

    found_any = 0
    for label in ("exploit", "agree", "disagree", "any", "none"):
        for extra in ({}, {"key": "kb"}, {"since": since, "until": until}, {"verifier": "proof", "since": since},
                      {"flag": "exits_process"}, {"key": "nobody"}):
            for sort in SORTS:
                f = RecordFilter(label=label, sort=sort, **extra)
                found, after = [], None
                while True:
                    page = record_page(store, f, after, limit=6)
                    found += [row["id"] for row in page.rows]
                    if page.next_cursor is None:
                        break
                    after = page.next_cursor
                assert found == wanted(f), (label, extra, sort)
                found_any += bool(found)
    assert found_any > 100
