"""Held out (written before revision 0019 and the code it came with; issue 27 item 3): task
statistics over a time window count a group once, however many UTC hours (and window edges)
its rows lie in, with its zero variance judged over the group's rows inside the window.

Styles not tuned for: groups whose rows span two and three hours, written in one write that
crosses an hour or in several writes hours apart; a group that is zero-variance within each
hour but not across them (and the other way round); a group with only errors in one hour;
the same group id under two keys and without a key; windows that cut a group at an edge,
windows without a whole hour, open windows; the verifier and task filters; a group continued
after the first reads."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from service.store import AuditStore
from service.tables import RecordRow
from service.task_stats import task_stats
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)
from tests.test_audit_scale import _aware, assert_task_stats, reference_task_stats

END = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
START = END - timedelta(hours=9)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'split.db'}"
    return request.getfixturevalue("database")


def _row(at: datetime, task: int, verifier: str, key: str | None, group: str | None, index: int,
         value: float | None, tokens: int | None = 5) -> RecordRow:
    verdict = "error" if value is None else ("correct" if value >= 1 else "incorrect")
    return RecordRow(
        id=uuid.uuid4().hex, created_at=at, caller_key_id=key, task_id=f"{verifier}/s{task}" if task % 2 else None,
        task_hash=f"{verifier[:2]}{task:062x}", task_public=None, verifier=verifier, verifier_version="1",
        response_hash=uuid.uuid4().hex * 2, response="r" * (10 + index),
        components={} if value is None else {"correctness": {"value": value, "hard": False}},
        reward=value or 0.0, verdict=verdict, evidence={}, flags=[], sandbox_backend="process", usage=None,
        duration_ms=1.0, group_id=group, group_index=index, submission_id=uuid.uuid4().hex,
        submission_index=index, group_zero_variance=None if group is None else False, tokens=tokens)


def _spread(rng: random.Random, store: AuditStore, first: datetime, task: int, verifier: str, key: str | None,
            group: str, values: list[float | None], hours: int, one_write: bool) -> None:
    """The group's rows over `hours` consecutive hours from `first`, in one write or one per hour."""
    batches: list[list[RecordRow]] = [[] for _ in range(hours)]
    for i, value in enumerate(values):
        h = i * hours // len(values)
        at = first + timedelta(hours=h, minutes=rng.randrange(0, 50), seconds=rng.randrange(60))
        batches[h].append(_row(at, task, verifier, key, group, i, value))
    if one_write:
        store.append([r for b in batches for r in b], [])
    else:
        for batch in batches:
            if batch:
                store.append(batch, [])


def _fill(store: AuditStore, seed: int) -> list[tuple[str, str | None]]:
    rng = random.Random(seed)
    groups: list[tuple[str, str | None]] = []
    hand = [  # (values, hours): zero within each hour, not across; and mixed within, with an error-only hour
        ([1.0, 1.0, 0.0, 0.0], 2), ([1.0, 0.0, 1.0, 1.0, 0.0, 1.0], 3), ([None, None, 1.0, 1.0], 2),
        ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0], 3), ([1.0, None, 0.0], 3),
    ]
    for n, (values, hours) in enumerate(hand):
        for key in ("ka", None):
            group = f"hand{n}"  # the same id under two keys (and none): separate groups
            first = START + timedelta(hours=n)
            _spread(rng, store, first - timedelta(minutes=30), n, "math", key, group, values, hours,
                    one_write=bool(n % 2))
            groups.append((group, key))
    at = START
    while at < END:
        verifier, task, key = rng.choice(["math", "code"]), rng.randrange(12), rng.choice(["ka", "kb", None])
        kind = rng.random()
        group = uuid.uuid4().hex[:10]
        if kind < 0.35:
            values = [rng.choice([0.0, 1.0, 1.0, None]) for _ in range(rng.randrange(2, 7))]
            _spread(rng, store, at, task, verifier, key, group, values, rng.choice([2, 3]), rng.random() < 0.5)
            groups.append((group, key))
        elif kind < 0.6:
            values = [rng.choice([0.0, 1.0]) for _ in range(3)]
            store.append([_row(at + timedelta(seconds=i), task, verifier, key, group, i, v)
                          for i, v in enumerate(values)], [])
        else:
            store.append([_row(at, task, verifier, key, None, 0, rng.choice([0.0, 1.0, None]),
                               rng.choice([None, 3]))], [])
        at += timedelta(minutes=rng.randrange(4, 19), seconds=rng.randrange(60))
    return groups


def _stored(store: AuditStore) -> list[RecordRow]:
    with store.db() as s:
        return list(s.scalars(sa.select(RecordRow).order_by(RecordRow.seq)))


def _windows(rng: random.Random) -> list[tuple[datetime | None, datetime | None]]:
    out: list[tuple[datetime | None, datetime | None]] = [
        (None, None), (START - timedelta(hours=1), None), (None, END - timedelta(hours=3, minutes=17)),
        (START + timedelta(hours=1), START + timedelta(hours=4)),  # whole hours only
        (START + timedelta(hours=2, minutes=10), START + timedelta(hours=2, minutes=55)),  # no whole hour
        (START + timedelta(minutes=47), START + timedelta(hours=1, minutes=12)),  # across one boundary
    ]
    for _ in range(8):
        lo = START - timedelta(minutes=40) + timedelta(seconds=rng.randrange(9 * 3600))
        out.append((lo, lo + timedelta(seconds=rng.randrange(1800, 6 * 3600))))
    return out


def _check(store: AuditStore, rng: random.Random) -> int:
    written = _stored(store)
    checked = 0
    for since, until in _windows(rng):
        inside = [r for r in written if (since is None or _aware(r.created_at) >= since)
                  and (until is None or _aware(r.created_at) < until)]
        for verifier, task_hash in ((None, None), ("math", None), (None, f"ma{1:062x}")):
            chosen = [r for r in inside if verifier in (None, r.verifier) and task_hash in (None, r.task_hash)]
            found = task_stats(store, since=since, until=until, verifier=verifier, task_hash=task_hash)
            assert_task_stats(found, reference_task_stats(chosen))
            assert [(s.task_id, s.task_hash) for s in found] == list(
                dict.fromkeys((r.task_id, r.task_hash) for r in chosen)), (since, until, verifier)
            checked += sum(s.groups for s in found)
    return checked


def test_groups_across_hours_count_once_in_a_window(url: str):
    store = AuditStore(url)
    groups = _fill(store, seed=71)
    rng = random.Random(3)
    assert _check(store, rng) > 100
    # A group continued hours later, after the first reads (its old hours already rolled up).
    for group, key in groups[:6]:
        store.append([_row(END - timedelta(minutes=20), int(group[-1]) if group[-1].isdigit() else 0, "math", key,
                           group, 40, 0.0)], [])
    _check(store, rng)
