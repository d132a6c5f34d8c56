"""The audit at scale (issue 27): rollups kept by the insert trigger equal a recomputation from
the records; the overview, task statistics and review queue read them and answer as the
record-scanning code did; export lines equal the API's records; records partitioned by day on
Postgres, migrated from an existing database; archive round trip loses nothing and the hash
chains stay verifiable across the archive boundary.

Records are written through the store's own write path (`AuditStore.append`: chains, the
trigger), in several writes, with one group split over two writes and one group id reused.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from assay_rules.variance import is_zero_variance
from service import audit_archive, audit_partitions
from service.audit_verify import verify
from service.pipeline.results import record_out
from service.review import STRATA, review_queue, review_summary, stratum_of
from service.signing import Signer
from service.store import AuditStore
from service.tables import LabelRow, RecordRow, TaskBlobRow
from service.task_stats import raw_correctness, task_stats
from service.ui.queries import SORTS, OverviewFilter, RecordFilter, overview, record_page
from tests.conftest import REPO
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)

VERIFIERS = ("math", "code", "sql")
FLAGS = ("multiple_answers", "exits_process", "forbidden_tool")
NOW = datetime.now(UTC).replace(minute=30, second=0, microsecond=0)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'scale.db'}"
    return request.getfixturevalue("database")


def _rows(rng: random.Random, n_groups: int, start: datetime, hours: float) -> list[list[RecordRow]]:
    """Requests (lists of rows): groups of 4 and single answers, over `hours` hours from `start`."""
    requests = []
    for g in range(n_groups):
        verifier = VERIFIERS[g % 3]
        size = 4 if g % 5 else 1
        at = start + timedelta(hours=hours * g / n_groups, seconds=rng.random())
        group = uuid.uuid4().hex if size > 1 else None
        task = g % 7
        rows = []
        values = [rng.choice([0.0, 1.0, 1.0]) if g % 3 else 1.0 for _ in range(size)]
        for i in range(size):
            verdict = "error" if rng.random() < 0.05 else ("correct" if values[i] else
                                                             rng.choice(["incorrect", "invalid_format", "timeout"]))
            flags = [f for f in FLAGS if rng.random() < 0.15]
            rows.append(RecordRow(
                id=uuid.uuid4().hex, created_at=at + timedelta(milliseconds=i), caller_key_id=f"key{g % 2}",
                task_id=f"{verifier}/{task}" if task % 2 else None, task_hash=f"{verifier[:2]}{task:062x}",
                task_public={"answer": str(task)}, verifier=verifier, verifier_version="1",
                response_hash=f"{rng.getrandbits(256):064x}",
                response=None if rng.random() < 0.1 else "x" * rng.choice([10, 150, 700, 3000]),
                components={"correctness": {"value": values[i], "hard": True}}, reward=values[i], verdict=verdict,
                evidence={"parsed": str(i)}, flags=flags, sandbox_backend="process", usage=None,
                duration_ms=rng.lognormvariate(2, 1), group_id=group, group_index=i if group else None,
                submission_id=uuid.uuid4().hex[:32], submission_index=i,
                group_zero_variance=(len(set(values)) == 1) if group else None,
                tokens=rng.choice([None, 50, 400]), run_id="run-a" if g % 2 else None, run_step=g if g % 2 else None))
        requests.append(rows)
    return requests


def fill(store: AuditStore, seed: int = 7, n_groups: int = 120) -> list[RecordRow]:
    rng = random.Random(seed)
    start = NOW - timedelta(hours=30)
    requests = _rows(rng, n_groups, start, 29)
    # One group split over two writes (its rows come in two requests), one group id reused.
    split = requests[7]
    requests[7:8] = [split[:2], split[2:]]
    requests[20][0].group_id = requests[21][0].group_id = "reused"
    blob = TaskBlobRow(task_hash="t" * 64, verifier="math", task={"answer": "1"})
    for rows in requests:
        store.append(rows, [blob])
    written = [r for rows in requests for r in rows]
    labelled = rng.sample(written, 12)
    for i, row in enumerate(labelled):
        store.add_label(LabelRow(id=uuid.uuid4().hex, record_id=row.id, author="t", author_key_id="key0",
                                 label=("agree", "disagree", "exploit")[i % 3]))
    return written


def reference_task_stats(rows: list[RecordRow]) -> dict[tuple, dict]:
    """The pre-0012 tally (service/task_stats.py scanned every record like this)."""
    out: dict[tuple, dict] = {}
    for row in sorted(rows, key=lambda r: r.seq):
        t = out.setdefault((row.task_id, row.task_hash), {"attempts": 0, "c": [], "groups": {}, "tokens": []})
        t["attempts"] += 1
        value = raw_correctness(row)
        if value is not None:
            t["c"].append(value)
        if row.group_id is not None:
            t["groups"].setdefault((row.caller_key_id, row.group_id), []).append(value)
        if row.tokens is not None:
            t["tokens"].append(row.tokens)
    return out


def stored(store: AuditStore) -> list[RecordRow]:
    with store.db() as s:
        return list(s.scalars(sa.select(RecordRow).order_by(RecordRow.seq)))


def assert_same_overview(exact: dict, rolled: dict) -> None:
    assert rolled["bucket_seconds"] == exact["bucket_seconds"]
    assert [v["name"] for v in rolled["verifiers"]] == [v["name"] for v in exact["verifiers"]]
    for a, b in zip(exact["verifiers"], rolled["verifiers"], strict=True):
        for key in ("n", "rates", "flag_rates", "groups", "zero_variance_share"):
            assert b[key] == pytest.approx(a[key]), (a["name"], key)
        assert [(x["min_chars"], x["n"]) for x in b["lengths"]] == [(x["min_chars"], x["n"]) for x in a["lengths"]]
        assert [x["accuracy"] for x in b["lengths"]] == pytest.approx([x["accuracy"] for x in a["lengths"]])
        assert [x["start"] for x in b["buckets"]] == [x["start"] for x in a["buckets"]]
        for x, y in zip(a["buckets"], b["buckets"], strict=True):
            for key in ("n", "rates", "flag_rates", "zero_variance_share"):
                assert y[key] == pytest.approx(x[key]), (a["name"], x["start"], key)
        # Percentiles from log-spaced bins: each order statistic within half a bin (5.1%).
        for p_exact, p_binned in zip(a["latency_ms"], b["latency_ms"], strict=True):
            assert p_binned == pytest.approx(p_exact, rel=0.052)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def assert_task_stats(found: list, expected: dict[tuple, dict]) -> None:
    """Task statistics as the old tally over the same records computed them."""
    assert len(found) == len(expected)
    for stat in found:
        t = expected[(stat.task_id, stat.task_hash)]
        zero = [is_zero_variance(v) for v in t["groups"].values()]
        assert stat.attempts == t["attempts"]
        assert stat.pass_rate == pytest.approx(sum(t["c"]) / len(t["c"]) if t["c"] else None)
        assert stat.groups == len(zero), stat
        assert stat.zero_variance_share == pytest.approx(sum(zero) / len(zero) if zero else None)
        assert stat.mean_tokens == pytest.approx(sum(t["tokens"]) / len(t["tokens"]) if t["tokens"] else None)


def every_page(store: AuditStore, f: RecordFilter, limit: int) -> list[str]:
    """The ids of every page of `f`, following the viewer's keyset cursor."""
    found, after = [], None
    while True:
        page = record_page(store, f, after, limit=limit)
        found += [row["id"] for row in page.rows]
        if page.next_cursor is None:
            return found
        after = page.next_cursor


def pages_agree(store: AuditStore, wanted: Callable[[RecordFilter], list[str]], field: str, values: tuple,
                extras: tuple[dict, ...]) -> int:
    """Every page of each filter (`field` at each value, with each extra, in each sort) holds what
    `wanted` gives for it; how many of them were not empty."""
    found_any = 0
    for value in values:
        for extra in extras:
            for sort in SORTS:
                f = RecordFilter(**{field: value}, sort=sort, **extra)
                found = every_page(store, f, limit=6)
                assert found == wanted(f), (value, extra, sort)
                found_any += bool(found)
    return found_any


def test_rollups_answer_as_the_records_do(url: str):
    store = AuditStore(url)
    rows = fill(store)
    written = stored(store)
    assert len(written) == len(rows)
    # Overview: the rollup path (exact_limit=0) against the recomputation from records.
    windows = [OverviewFilter(), OverviewFilter(since="2000-01-01"),
               OverviewFilter(since=(NOW - timedelta(hours=20, minutes=17)).isoformat(),
                              until=(NOW - timedelta(hours=2, minutes=41)).isoformat()),
               OverviewFilter(verifier="code", since=(NOW - timedelta(hours=29)).isoformat()),
               # 15-minute buckets: the window's records in one statement, counted as the rollups count.
               OverviewFilter(since=(NOW - timedelta(hours=5, minutes=13)).isoformat(),
                              until=(NOW - timedelta(minutes=13)).isoformat())]
    for f in windows:
        exact = overview(store, f, exact_limit=10**9)
        assert sum(v["n"] for v in exact["verifiers"]) > 0
        assert_same_overview(exact, overview(store, f, exact_limit=0))
    # Task statistics: rollups (no window) and SQL over the records (a window) against the old tally.
    expected = reference_task_stats(written)
    for found in (task_stats(store), task_stats(store, since=datetime(2000, 1, 1, tzinfo=UTC))):
        assert_task_stats(found, expected)
    # Time windows (revision 0013): whole hours from the per-hour task rollups, the partial hours
    # at the edges from the records; in order of the first attempt inside the window.
    for since, until in ((NOW - timedelta(hours=20, minutes=17), NOW - timedelta(hours=2, minutes=41)),
                         (NOW - timedelta(hours=7), None), (None, NOW - timedelta(hours=12, minutes=5)),
                         (NOW - timedelta(hours=5, minutes=50), NOW - timedelta(hours=5, minutes=10)),
                         (NOW - timedelta(hours=9), NOW - timedelta(hours=3))):
        inside = [r for r in written if (since is None or _aware(r.created_at) >= since)
                  and (until is None or _aware(r.created_at) < until)]
        found = task_stats(store, since=since, until=until)
        assert_task_stats(found, reference_task_stats(inside))
        firsts = dict.fromkeys((r.task_id, r.task_hash) for r in inside)
        assert [(s.task_id, s.task_hash) for s in found] == list(firsts)
        assert found[:2] == task_stats(store, since=since, until=until, limit=2)
    firsts = [s.task_hash for s in task_stats(store, limit=3)]
    assert firsts == [s.task_hash for s in task_stats(store, since=datetime(2000, 1, 1, tzinfo=UTC), limit=3)]
    # Review queue: strata sizes as the record scan counted them; picks unlabelled, in their stratum.
    labelled = store.labelled_record_ids()
    for verifier, flag in ((None, None), ("code", None), (None, "exits_process")):
        seen = dict.fromkeys(STRATA, 0)
        for row in written:
            if row.id not in labelled and (verifier is None or row.verifier == verifier):
                stratum = stratum_of(row, flag)
                if stratum is not None:
                    seen[stratum] += 1
        picked, available = review_queue(store, verifier, flag, 9, seed=3)
        assert available == seen
        assert len({row.id for _, row in picked}) == len(picked) == min(9, sum(seen.values()))
        for stratum, row in picked:
            assert row.id not in labelled and stratum_of(row, flag) == stratum
            assert verifier is None or row.verifier == verifier
        assert [r.id for _, r in picked] == [r.id for _, r in review_queue(store, verifier, flag, 9, seed=3)[0]]
    # A new write moves every rollup along with it.
    before = task_stats(store)
    more = _rows(random.Random(99), 5, NOW - timedelta(minutes=10), 0.1)
    for extra in more:
        store.append(extra, [])
    after = {(s.task_id, s.task_hash): s for s in task_stats(store)}
    added = sum(len(r) for r in more)
    assert sum(s.attempts for s in after.values()) == sum(s.attempts for s in before) + added
    exact = overview(store, OverviewFilter(since="2000-01-01"), exact_limit=10**9)
    assert_same_overview(exact, overview(store, OverviewFilter(since="2000-01-01"), exact_limit=0))


def test_probe_sampling_covers_large_strata(url: str, monkeypatch: pytest.MonkeyPatch):
    """Strata above SMALL_STRATUM are sampled by probes: distinct, unlabelled, in their stratum."""
    from service import review

    store = AuditStore(url)
    fill(store, seed=11)
    monkeypatch.setattr(review, "SMALL_STRATUM", 0)
    picked, available = review_queue(store, None, None, 12, seed=5)
    assert len(picked) == 12 and len({r.id for _, r in picked}) == 12
    labelled = store.labelled_record_ids()
    assert all(r.id not in labelled and stratum_of(r, None) == s for s, r in picked)


@pytest.mark.parametrize("chunk_rows, first_span", [(2000, 4096), (7, 3), (7, 10**9)])
def test_export_lines_are_the_api_records(url: str, chunk_rows: int, first_span: int,
                                          monkeypatch: pytest.MonkeyPatch):
    """In write order and equal to the API's records (keys in the same order), also when the
    database's sessions hand over many small chunks of seq ranges, chunks too small for their
    range (the rest of the range is read next) and chunks far wider than the records."""
    from service import audit_export
    from service.audit_export import export_lines

    monkeypatch.setattr(audit_export, "CHUNK_ROWS", chunk_rows)
    monkeypatch.setattr(audit_export, "FIRST_SPAN", first_span)
    store = AuditStore(url)
    fill(store, seed=3, n_groups=30)
    lines = "".join(export_lines(store, {})).splitlines()
    rows = stored(store)
    answers = [json.loads(record_out(r).model_dump_json()) for r in rows]
    assert [json.loads(line) for line in lines] == answers
    assert [list(json.loads(line)) for line in lines] == [list(a) for a in answers]
    code = [json.loads(line) for line in "".join(export_lines(store, {"verifier": "code"})).splitlines()]
    assert code == [a for a in answers if a["verifier"] == "code"]
    since = _aware(rows[len(rows) // 2].created_at)
    recent = [json.loads(line) for line in "".join(export_lines(store, {"since": since})).splitlines()]
    assert recent == [a for a, r in zip(answers, rows, strict=True) if _aware(r.created_at) >= since]
    assert list(export_lines(store, {"verifier": "nobody"})) == []


def test_export_writes_hostile_values_as_the_api_does(url: str, monkeypatch: pytest.MonkeyPatch):
    """Strings with quotes, backslashes, control characters, non-ASCII and JSON-looking text,
    non-finite rewards (Postgres; pydantic writes null), whole-number and tiny or huge floats:
    each line is the API's record; then an honest record after them is exported as it is."""
    from service import audit_export
    from service.audit_export import export_lines

    monkeypatch.setattr(audit_export, "CHUNK_ROWS", 2)
    store = AuditStore(url)
    # Non-finite rewards on Postgres only: SQLite stores NaN as NULL, and its rollup catch-up
    # fails on an infinite reward ("string or blob too big", service/batch_rollups.py); a
    # non-finite duration is refused by the rollups on both (ln of it).
    finite = not url.startswith("postgresql")
    nan, inf = (2.5, 7.0) if finite else (float("nan"), float("inf"))
    nasty = ['a"b\\c', "line\nbreak\ttab\x01\x1f", "é✓ 日本", '{"json": "text"}', "\u2028", ""]
    rows = []
    for i, text in enumerate(nasty):
        rows.append(RecordRow(
            id=uuid.uuid4().hex, created_at=NOW + timedelta(seconds=i, microseconds=0 if i % 2 else 120),
            request_id=text or None, caller_key_id=text, task_id=text, task_hash=f"{i:064x}",
            task_public={"q": text}, verifier="math", verifier_version=text or "1", response_hash=f"{i:064x}",
            response=text, components={"c": {"value": 1.0, "hard": False}},
            reward=[nan, inf, -inf, 1e14, 1e20, 0.1][i], verdict="correct",
            evidence={"e": text}, flags=[], sandbox_backend="process", usage={"u": 1},
            duration_ms=[2.0, 999999999999999.0, 1e-05, 1e15, 12345678.5, -0.0][i], group_id=text or None,
            group_index=i, tokens=i, finish_reason=text or None, masked=bool(i % 2), eval_id=text or None,
            run_id=f"run-{i}.a:b@c+d" if text else None, run_step=i if text else None))
    honest = RecordRow(
        id=uuid.uuid4().hex, created_at=NOW + timedelta(seconds=10), caller_key_id="key", task_id=None,
        task_hash="f" * 64, task_public={"answer": "1"}, verifier="math", verifier_version="1",
        response_hash="e" * 64, response="\\boxed{1}", components={"correctness": {"value": 1.0, "hard": True}},
        reward=1.0, verdict="correct", evidence={}, flags=[], sandbox_backend="process", usage=None,
        duration_ms=4.25, group_id=None, group_index=None)
    store.append(rows + [honest], [])
    answers = [record_out(r).model_dump_json() for r in stored(store)]
    # split on "\n" only: a line holds U+2028 as it is (str.splitlines would cut it there)
    lines = "".join(export_lines(store, {})).removesuffix("\n").split("\n")
    assert [json.loads(line) for line in lines] == [json.loads(a) for a in answers]
    assert [list(json.loads(line)) for line in lines] == [list(json.loads(a)) for a in answers]
    assert finite or [json.loads(line)["reward"] for line in lines[:3]] == [None, None, None]
    assert json.loads(lines[-1])["reward"] == 1.0 and json.loads(lines[-1])["verdict"] == "correct"


@pytest.mark.postgres
def test_an_export_the_client_leaves_stops_its_sessions(database: str, monkeypatch: pytest.MonkeyPatch):  # noqa: F811
    """A client that hangs up after the first chunk: the sessions building lines stop and give
    their connections back (none left checked out, no export thread left running)."""
    import threading

    from service import audit_export

    monkeypatch.setattr(audit_export, "CHUNK_ROWS", 5)
    store = AuditStore(database)
    fill(store, seed=4, n_groups=30)
    held = store.engine.pool.checkedout()  # the record writer keeps one connection of its own
    with store.engine.connect() as conn:
        planning = conn.exec_driver_sql("SHOW plan_cache_mode").scalar()
    chunks = audit_export.export_lines(store, {})
    first = next(chunks)
    assert first.count("\n") == 5
    assert store.engine.pool.checkedout() == held + audit_export.SESSIONS  # the export's sessions
    chunks.close()
    assert store.engine.pool.checkedout() == held
    assert not [t for t in threading.enumerate() if t.name.startswith("assay-export-")]
    # The sessions' generic-plan setting stayed in their export: the pooled connections plan as before.
    idle = [store.engine.connect() for _ in range(store.engine.pool.checkedin())]  # every pooled one
    modes = {c.exec_driver_sql("SHOW plan_cache_mode").scalar() for c in idle}
    for conn in idle:
        conn.close()
    assert len(idle) >= 2 and modes == {planning} and planning != "force_generic_plan"
    assert "".join(audit_export.export_lines(store, {})).count("\n") == len(stored(store))


@pytest.mark.postgres
def test_postgres_records_are_partitioned_by_day_and_keys_stay_unique(database: str):  # noqa: F811
    store = AuditStore(database)
    fill(store, n_groups=30)
    with store.engine.connect() as conn:
        assert audit_partitions.is_partitioned(conn)
        parts = dict((n, d) for d, n in audit_partitions.day_partitions(conn))
        assert audit_partitions.partition_name(NOW.date()) in parts
        n_keys = conn.execute(sa.text("SELECT count(*) FROM record_keys")).scalar()
        assert n_keys == conn.execute(sa.text("SELECT count(*) FROM records")).scalar()
    # The same response index of the same request twice: refused, as the unique index did before.
    row = stored(store)[0]
    twin = RecordRow(**{c.key: getattr(row, c.key) for c in RecordRow.__table__.columns
                        if c.key not in ("seq", "id", "chain_id", "chain_index", "chain_prev", "chain_hash")})
    twin.id = uuid.uuid4().hex
    with pytest.raises(sa.exc.IntegrityError), store.db() as s, s.begin():
        s.add(twin)
    # Append-only still: no UPDATE, DELETE or TRUNCATE through the parent.
    for statement in ("UPDATE records SET reward = 0.5", "DELETE FROM records", "TRUNCATE records"):
        with pytest.raises(sa.exc.DatabaseError, match="append-only"), store.engine.begin() as conn:
            conn.exec_driver_sql(statement)


@pytest.mark.postgres
@pytest.mark.slow
def test_existing_postgres_deployment_is_migrated_with_its_rollups(database: str):  # noqa: F811
    """A database at revision 0011 with records is partitioned by `assay db upgrade`; nothing is
    lost and the rollups equal the recomputation."""
    from alembic import command

    from service import migrations

    engine = sa.create_engine(database)
    with engine.connect() as conn:
        command.upgrade(migrations.alembic_config(conn), "0011")
        conn.commit()
    old = sa.MetaData()
    old.reflect(engine, only=["records"])
    rng = random.Random(5)
    requests = _rows(rng, 40, NOW - timedelta(days=3), 70)
    values = []
    for rows in requests:
        for r in rows:
            values.append({**{c.name: getattr(r, c.name) for c in old.tables["records"].columns if c.name != "seq"},
                           "masked": False})
    with engine.begin() as conn:
        conn.execute(old.tables["records"].insert(), values)
        before = [tuple(r) for r in conn.execute(sa.text("SELECT * FROM records ORDER BY seq"))]
    engine.dispose()
    out = subprocess.run([sys.executable, "-m", "service.cli", "db", "upgrade"], cwd=REPO, capture_output=True,
                         text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "ASSAY_DATABASE_URL": database})
    assert out.returncode == 0, out.stderr
    store = AuditStore(database)
    with store.engine.connect() as conn:
        assert audit_partitions.is_partitioned(conn)
        after = [tuple(r) for r in conn.execute(sa.text("SELECT * FROM records ORDER BY seq"))]
    assert after == before
    exact = overview(store, OverviewFilter(since="2000-01-01"), exact_limit=10**9)
    assert_same_overview(exact, overview(store, OverviewFilter(since="2000-01-01"), exact_limit=0))
    assert sum(s.attempts for s in task_stats(store)) == len(values)
    # New writes continue the sequence after the migrated rows.
    store.append(_rows(rng, 1, NOW, 0.1)[0], [])
    assert stored(store)[-1].seq > max(r[0] for r in before)


@pytest.mark.postgres
@pytest.mark.slow
def test_archive_round_trip_loses_nothing_and_chains_continue(database: str, tmp_path: Path):  # noqa: F811
    signer = Signer(Ed25519PrivateKey.generate())
    store = AuditStore(database, signer, chain_id="arch", lanes=1, sign_every=5)
    old_day = (NOW - timedelta(days=3)).date()
    with store.engine.begin() as conn:
        audit_partitions.create_partitions(conn, [old_day, old_day + timedelta(days=1)])
    rng = random.Random(2)
    old = _rows(rng, 20, datetime(old_day.year, old_day.month, old_day.day, 1, tzinfo=UTC), 30)
    for rows in old:
        store.append(rows, [])
    new = _rows(rng, 6, NOW - timedelta(minutes=30), 0.2)
    for rows in new[:3]:
        store.append(rows, [])
    before = {r.id: json.loads(record_out(r).model_dump_json()) for r in stored(store)}
    old_ids = {r.id for rows in old for r in rows}
    # One label on an archived record, two on a kept one: the review summary counts only the kept one's.
    for record, label in ((old[0][0], "exploit"), (new[0][0], "agree"), (new[0][0], "exploit")):
        store.add_label(LabelRow(id=uuid.uuid4().hex, record_id=record.id, author="rev", author_key_id="k",
                                 label=label, corrected_verdict=None, pattern=None, note=None))
    assert old[0][0].verifier == new[0][0].verifier and review_summary(store).verifiers[old[0][0].verifier].labels == 3
    out = subprocess.run([sys.executable, "-m", "service.cli", "audit", "archive", "--before",
                          str(NOW.date() - timedelta(days=1)), "--out", str(tmp_path / "archive")], cwd=REPO,
                         capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "ASSAY_DATABASE_URL": database})
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    assert result["removed"] and result["records"] == len(old_ids), result
    path = Path(result["path"])
    # Nothing lost: the archive holds the removed records exactly as the API showed them.
    archived = {line["id"]: line for line in audit_archive.read_archive(path)}
    assert set(archived) == old_ids
    for rid, line in archived.items():
        assert {k: v for k, v in line.items() if k != "stored"} == before[rid]
    remaining = stored(store)
    assert {r.id for r in remaining} == set(before) - old_ids
    summary = review_summary(store).verifiers
    assert list(summary) == [new[0][0].verifier] and summary[new[0][0].verifier].labels == 2, summary
    hits = summary[new[0][0].verifier].correct_false_positive if new[0][0].verdict == "correct" else \
        summary[new[0][0].verifier].incorrect_false_negative
    assert (hits.hits, hits.labelled) == ((1, 1) if new[0][0].verdict in ("correct", "incorrect") else (0, 0))
    check = subprocess.run([sys.executable, "-m", "service.cli", "audit", "verify-archive", str(path)], cwd=REPO,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0 and json.loads(check.stdout)["intact"], check.stdout
    # The chain continues across the boundary, for rows already there and rows written after.
    for rows in new[3:]:
        store.append(rows, [])
    store.close()
    report = verify(AuditStore(database), {signer.key_id: Ed25519PublicKey.from_public_bytes(signer.public_raw)})
    assert report.intact, report.summary()["problems"]
    assert report.summary()["chains"]["records"]["arch.0"]["archived"] == len(old_ids)
    # The rollups still count the archived records.
    with store.engine.connect() as conn:
        counted = conn.execute(sa.text("SELECT sum(n) FROM rollup_hours WHERE kind = 'verdict'")).scalar()
    assert counted == len(before) + sum(len(rows) for rows in new[3:])
    # A tampered archive is refused by verify-archive.
    import gzip
    with gzip.open(path, "rt") as f:
        lines = f.read().splitlines()
    first = json.loads(lines[0])
    first["stored"]["reward"] = 0.123
    bad = tmp_path / "bad.jsonl.gz"
    with gzip.open(bad, "wt") as f:
        f.write("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    check = subprocess.run([sys.executable, "-m", "service.cli", "audit", "verify-archive", str(bad)], cwd=REPO,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 1 and not json.loads(check.stdout)["intact"]


def test_flag_and_label_pages_are_the_records_filtered_by_hand(url: str):
    """Held out (written before the flagged-records index and the label lookup of revision 0014;
    the `eval` cases added with its evaluation-records index):
    every flag (and one nobody carries) alone and with a verifier, verdict or label, in every
    sort, paged by the viewer's keyset cursor and by the API's `after`, is exactly the stored
    records filtered and sorted here; a label superseded by a later one counts as the later."""
    from service.ui.queries import SORTS

    store = AuditStore(url)
    written = fill(store, seed=19, n_groups=90)
    evaluated = _rows(random.Random(23), 24, NOW - timedelta(hours=20), 10)
    for i, rows in enumerate(evaluated):
        for row in rows:
            row.eval_id = ("ev-a", "ev-b")[i % 2]
        store.append(rows, [])
    relabelled = next(r for r in written if r.flags)
    for label in ("exploit", "agree"):  # its latest label: agree
        store.add_label(LabelRow(id=uuid.uuid4().hex, record_id=relabelled.id, author="t", author_key_id="key0",
                                 label=label))
    rows = stored(store)
    with store.db() as s:
        labels = s.execute(sa.select(LabelRow.record_id, LabelRow.label).order_by(LabelRow.seq)).all()
    latest = dict(labels)
    assert latest[relabelled.id] == "agree"

    def wanted(f: RecordFilter) -> list[str]:
        keep = [r for r in rows if (f.flag is None or f.flag in r.flags) and f.eval in (None, r.eval_id)
                and f.verifier in (None, r.verifier) and f.verdict in (None, r.verdict)
                and (f.label is None or f.label == latest.get(r.id, "none")
                     or (f.label == "any" and r.id in latest))]
        column, descending = SORTS[f.sort]
        keep.sort(key=lambda r: (getattr(r, column.key), r.seq), reverse=descending)
        return [r.id for r in keep]

    checked = 0
    for flag in (*FLAGS, "no_such_flag"):
        for extra in ({}, {"verifier": "code"}, {"verdict": "correct"}, {"label": "exploit"}, {"label": "agree"},
                      {"label": "any"}, {"label": "none"}, {"verifier": "no_such_verifier"}):
            for sort in SORTS:
                f = RecordFilter(flag=flag, sort=sort, **extra)
                found = every_page(store, f, limit=7)
                assert found == wanted(f), (flag, extra, sort)
                checked += bool(found)
        for verifier in (None, "math"):
            found, after_seq = [], None
            while page_rows := store.query(flag=flag, verifier=verifier, after_seq=after_seq, limit=5):
                found += [r.id for r in page_rows]
                after_seq = page_rows[-1].seq
            assert found == wanted(RecordFilter(flag=flag, verifier=verifier, sort="oldest")), (flag, verifier)
    for extra in ({"eval": "ev-a"}, {"eval": "ev-b", "flag": FLAGS[0]}, {"eval": "ev-a", "verifier": "sql"},
                  {"eval": "no-such-eval"}):
        for sort in SORTS:
            f = RecordFilter(sort=sort, **extra)
            found = every_page(store, f, limit=9)
            assert found == wanted(f), (extra, sort)
            checked += bool(found)
    assert checked > 80  # most combinations found records
