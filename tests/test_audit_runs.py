"""Held out (written before revision 0016 and the read paths it came with; issue 27 item 3): the
runs list, a run's page and API answer, the review summary and the flag review queue answer
exactly as the records say, on SQLite and Postgres, through HTTP.

- `GET /v1/runs` and `/ui/runs`: every run with its record count (training and held-out records)
  and step range, runs whose records are all errors included, records without a run left out.
- `GET /v1/runs/{id}` and `/ui/runs/{id}`: its record count, step range, per step the training
  records (held-out ones left out; a step with only held-out records not shown) and what they
  say (correct and error rates, flag rates), its held-out evaluations' response counts; a run no
  record carries is 404. More records written after a read (to an old step, a new step, a new
  run) show in the next read.
- `GET /v1/review/summary` (and per verifier): per verifier, its labels, and from each labelled
  record's latest label the false-positive, false-negative and exploit shares.
- `GET /v1/review/queue?flag=...` (with and without a verifier): the available count is the
  unlabelled non-error records with the flag; every record drawn has it and is unlabelled.
"""

from __future__ import annotations

import random
import re
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from service.store import AuditStore
from service.tables import LabelRow, RecordRow
from service.testing.app import AppServer, app_settings
from service.testing.ui import sign_in
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)

FLAGS = ("exits_process", "forbidden_tool", "reads_tests")
VERIFIERS = ("math", "code", "proof")
START = datetime.now(UTC).replace(microsecond=0) - timedelta(days=3)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    return request.getfixturevalue("database")


def _record(rng: random.Random, at: datetime, run: str | None, step: int | None, group: str | None, index: int,
            verifier: str, eval_id: str | None = None, verdict: str | None = None) -> RecordRow:
    verdict = verdict or rng.choice(["correct", "correct", "incorrect", "timeout", "error", "invalid_format"])
    reward = 1.0 if verdict == "correct" else 0.0
    return RecordRow(
        id=uuid.uuid4().hex, created_at=at, caller_key_id=rng.choice(["ka", "kb"]),
        task_id=f"{verifier}/t{rng.randrange(6)}",
        task_hash=f"{verifier[:2]}{rng.randrange(6):062x}", task_public={}, verifier=verifier, verifier_version="1",
        response_hash=f"{rng.getrandbits(128):032x}", response="z" * rng.choice([3, 40, 400]),
        components={"correctness": {"value": reward, "hard": False}}, reward=reward, verdict=verdict,
        evidence={"answer_normalised": str(rng.randrange(3))}, flags=[f for f in FLAGS if rng.random() < 0.25],
        sandbox_backend="process", usage=None, duration_ms=rng.random() * 50, group_id=group, group_index=index,
        submission_id=uuid.uuid4().hex, submission_index=index, tokens=rng.choice([None, 12, 80]),
        finish_reason=rng.choice(["stop", "length"]), run_id=run, run_step=step, eval_id=eval_id,
        group_zero_variance=None if group is None else rng.random() < 0.3)


def _write(store: AuditStore, rng: random.Random, run: str | None, steps: range, at: datetime,
           verifier: str = "math", eval_every: int = 0, verdict: str | None = None) -> datetime:
    """Groups of 2-5 per step (a few single answers), some held-out records at every
    `eval_every`-th step (and one step with held-out records only)."""
    for step in steps:
        for _ in range(rng.randrange(1, 4)):
            group = uuid.uuid4().hex[:16] if rng.random() < 0.8 else None
            size = rng.randrange(2, 6) if group else 1
            store.append([_record(rng, at + timedelta(seconds=i), run, step, group, i, verifier, verdict=verdict)
                          for i in range(size)], [])
            at += timedelta(minutes=rng.randrange(5, 40))
        if eval_every and step % eval_every == 0:
            eval_id = uuid.uuid4().hex[:32]
            store.append([_record(rng, at, run, step + (1 if step == steps[-1] else 0), None, 0, verifier,
                                  eval_id=eval_id) for _ in range(3)], [])
    return at


def _stored(store: AuditStore) -> list[RecordRow]:
    with store.db() as s:
        return list(s.scalars(sa.select(RecordRow).order_by(RecordRow.seq)))


def _expected_runs(rows: list[RecordRow]) -> dict[str, tuple[int, int, int]]:
    runs: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        if r.run_id is not None:
            runs[r.run_id].append(r.run_step)
    return {run: (len(st), min(st), max(st)) for run, st in runs.items()}


def _check_run(c: Any, ui: Any, rows: list[RecordRow], run: str) -> None:
    mine = [r for r in rows if r.run_id == run]
    got = c.get(f"/v1/runs/{run}")
    assert got.status_code == 200, got.text
    body = got.json()
    assert (body["records"], body["first_step"], body["last_step"]) == _expected_runs(rows)[run]
    training: dict[int, list[RecordRow]] = defaultdict(list)
    for r in mine:
        if r.eval_id is None:
            training[r.run_step].append(r)
    assert [s["step"] for s in body["steps"]] == sorted(training)
    for s in body["steps"]:
        recs = training[s["step"]]
        n, errors = len(recs), sum(r.verdict == "error" for r in recs)
        correct = sum(r.verdict == "correct" for r in recs)
        assert s["n"] == n, (run, s["step"])
        assert s["error_rate"] == pytest.approx(errors / n)
        assert s["correct_rate"] == (pytest.approx(correct / (n - errors)) if n > errors else None)
        flags: dict[str, int] = defaultdict(int)
        for r in recs:
            for f in r.flags:
                flags[f] += 1
        assert s["flag_rates"] == pytest.approx({f: k / n for f, k in flags.items()})
        assert s["groups"] == len({r.group_id for r in recs if r.group_id is not None})
    evals: dict[str, int] = defaultdict(int)
    for r in mine:
        if r.eval_id is not None:
            evals[r.eval_id] += 1
    judged_evals = {r.eval_id for r in mine if r.eval_id is not None and r.verdict != "error"}
    assert {p["eval_id"]: p["n_responses"] for p in body["held_out"]} == {e: evals[e] for e in judged_evals}
    page = ui.get(f"/ui/runs/{run}")
    assert page.status_code == 200 and run in page.text


def _check_runs_list(c: Any, ui: Any, rows: list[RecordRow]) -> None:
    expected = _expected_runs(rows)
    alarms = {run: len(c.get(f"/v1/runs/{run}").json()["alarms"]) for run in expected}  # raised by the read
    listed = c.get("/v1/runs").json()["runs"]
    assert [r["id"] for r in listed] == sorted(expected)
    for r in listed:
        assert (r["records"], r["first_step"], r["last_step"]) == expected[r["id"]], r
        assert r["alarms"] == alarms[r["id"]]
    page = ui.get("/ui/runs").text
    for run, (n, _, _) in expected.items():
        assert run in page
        assert re.search(rf"{re.escape(run)}.*?\b{n}\b", page, re.S), run
    limited = c.get("/v1/runs?limit=2").json()["runs"]
    assert [r["id"] for r in limited] == sorted(expected)[:2]


def _label(store: AuditStore, record: RecordRow, label: str, corrected: str | None = None) -> None:
    store.add_label(LabelRow(id=uuid.uuid4().hex, record_id=record.id, author="rev", author_key_id="k",
                             label=label, corrected_verdict=corrected, pattern=None, note=None))


def _expected_summary(rows: list[RecordRow], labels: list[LabelRow], verifier: str | None) -> dict[str, Any]:
    by_id = {r.id: r for r in rows}
    latest: dict[str, LabelRow] = {}
    counts: dict[str, int] = defaultdict(int)
    for lab in labels:
        record = by_id.get(lab.record_id)
        if record is None or (verifier is not None and record.verifier != verifier):
            continue
        latest[lab.record_id] = lab
        counts[record.verifier] += 1
    tallies: dict[str, dict[str, list[int]]] = {}
    for record_id, lab in latest.items():
        record = by_id[record_id]
        t = tallies.setdefault(record.verifier, {"correct": [0, 0], "incorrect": [0, 0], "flagged": [0, 0]})
        wrong = lab.label == "exploit" or (lab.label == "disagree" and lab.corrected_verdict != record.verdict)
        if record.verdict in ("correct", "incorrect"):
            t[record.verdict][0] += wrong
            t[record.verdict][1] += 1
        if record.flags:
            t["flagged"][0] += lab.label == "exploit"
            t["flagged"][1] += 1
    return {name: (counts[name], tuple(t["correct"]), tuple(t["incorrect"]), tuple(t["flagged"]))
            for name, t in sorted(tallies.items())}


def _got_summary(body: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, v in body["verifiers"].items():
        parts = [(v[k]["hits"], v[k]["labelled"]) for k in
                 ("correct_false_positive", "incorrect_false_negative", "flagged_exploit_share")]
        for k in ("correct_false_positive", "incorrect_false_negative", "flagged_exploit_share"):
            rate = v[k]
            assert rate["rate"] == (pytest.approx(rate["hits"] / rate["labelled"]) if rate["labelled"] else None)
        out[name] = (v["labels"], *parts)
    return out


def _check_review(c: Any, store: AuditStore) -> None:
    rows = _stored(store)
    with store.db() as s:
        labels = list(s.scalars(sa.select(LabelRow).order_by(LabelRow.seq)))
    for verifier in (None, *VERIFIERS, "unknown"):
        query = "" if verifier is None else f"?verifier={verifier}"
        got = c.get(f"/v1/review/summary{query}")
        assert got.status_code == 200, got.text
        assert _got_summary(got.json()) == _expected_summary(rows, labels, verifier), verifier
    labelled = {lab.record_id for lab in labels}
    for flag in FLAGS:
        for verifier in (None, "code"):
            query = f"flag={flag}&n=40&seed=3" + (f"&verifier={verifier}" if verifier else "")
            body = c.get(f"/v1/review/queue?{query}").json()
            matching = [r for r in rows if flag in r.flags and r.verdict != "error" and r.id not in labelled
                        and (verifier is None or r.verifier == verifier)]
            assert body["available"]["flagged"] == len(matching), (flag, verifier)
            ids = {r.id for r in matching}
            assert len(body["items"]) == min(40, len(matching))
            assert all(item["record"]["id"] in ids for item in body["items"])
            assert len({item["record"]["id"] for item in body["items"]}) == len(body["items"])


@pytest.mark.slow
def test_runs_pages_and_review_answer_as_the_records(url: str, tmp_path: Path) -> None:
    rng = random.Random(27)
    writer = AuditStore(url)
    with AppServer(app_settings(tmp_path, database_url=url, alarm_check_interval_s=3600)) as server:
        ui = sign_in(server, server.admin_key)
        with server.client() as c:
            assert c.get("/v1/runs").json()["runs"] == []  # no run yet
            assert c.get("/v1/review/summary").json()["verifiers"] == {}
            at = _write(writer, rng, "run-a", range(0, 9), START, eval_every=4)
            at = _write(writer, rng, "run-b.code", range(3, 7), at, verifier="code", eval_every=2)
            at = _write(writer, rng, "run-errors", range(0, 3), at, verifier="proof", verdict="error")
            at = _write(writer, rng, None, range(0, 1), at, verifier="code")  # no run
            rows = _stored(writer)
            _check_runs_list(c, ui, rows)
            for run in ("run-a", "run-b.code", "run-errors"):
                _check_run(c, ui, rows, run)
            assert c.get("/v1/runs/no-such-run").status_code == 404
            assert ui.get("/ui/runs/no-such-run").status_code == 404
            # More records: an old step, a new step, held-out records of an old step, a new run.
            at = _write(writer, rng, "run-a", range(2, 3), at)
            at = _write(writer, rng, "run-a", range(11, 13), at, eval_every=1)
            at = _write(writer, rng, "run-new", range(5, 6), at, verifier="code")
            rows = _stored(writer)
            _check_runs_list(c, ui, rows)
            for run in ("run-a", "run-b.code", "run-errors", "run-new"):
                _check_run(c, ui, rows, run)
            # Labels: agree / disagree (same and other verdict) / exploit, relabelled records, an
            # error record labelled.
            picked = rng.sample(rows, 40)
            for record in picked:
                _label(writer, record, rng.choice(["agree", "disagree", "exploit"]),
                       rng.choice([None, "correct", "incorrect"]))
            for record in picked[:12]:
                _label(writer, record, rng.choice(["agree", "disagree", "exploit"]),
                       rng.choice([None, "correct", "incorrect"]))
            errors = [r for r in rows if r.verdict == "error"]
            _label(writer, errors[0], "exploit")
            _check_review(c, writer)
            # More records and labels after the first reads.
            at = _write(writer, rng, "run-b.code", range(7, 9), at, verifier="code")
            for record in rng.sample(_stored(writer), 10):
                _label(writer, record, "disagree", "correct")
            _check_review(c, writer)
            _check_runs_list(c, ui, _stored(writer))
    writer.engine.dispose()


def _run_steps_by_hand(conn: sa.Connection) -> list[tuple]:
    return [tuple(r) for r in conn.execute(sa.text(
        "SELECT run_id, run_step, count(*), count(eval_id), max(seq) FROM records WHERE run_id IS NOT NULL "
        "GROUP BY run_id, run_step ORDER BY run_id, run_step"))]


def _run_steps_rolled_up(conn: sa.Connection) -> list[tuple]:
    return [tuple(r) for r in conn.execute(sa.text(
        "SELECT run_id, step, records, evals, last_seq FROM rollup_run_steps ORDER BY run_id, step"))]


@pytest.mark.postgres
@pytest.mark.slow
def test_run_step_rollups_are_the_records_after_upgrade_writes_and_archive(database: str,  # noqa: F811
                                                                             tmp_path: Path) -> None:
    """Revision 0016 on a database with records (back-fill), then writes through the trigger
    (COPY-sized batches and single rows, to old and new steps), then an archive of the oldest
    days: rollup_run_steps equals the GROUP BY of the stored records at each point, and the runs
    list and a run's figures are the records'."""
    from alembic import command

    from service import audit_archive, audit_partitions, migrations
    from service.runs import list_runs, run_records

    rng = random.Random(16)
    engine = sa.create_engine(database)
    with engine.connect() as conn:
        command.upgrade(migrations.alembic_config(conn), "0015")
        conn.commit()
    old_day = (START - timedelta(days=2)).date()
    columns = [c for c in RecordRow.__table__.columns if c.name != "seq"]
    rows = [_record(rng, datetime(old_day.year, old_day.month, old_day.day, 3, tzinfo=UTC) + timedelta(minutes=i),
                    rng.choice(["old-run", "run-x", None]), rng.randrange(4), None, 0, "math",
                    eval_id=uuid.uuid4().hex[:32] if rng.random() < 0.2 else None) for i in range(60)]
    with engine.begin() as conn:
        audit_partitions.create_partitions(conn, [old_day, old_day + timedelta(days=1)])
        conn.execute(RecordRow.__table__.insert(), [{**{c.name: getattr(r, c.name) for c in columns}, "masked": False}
                                                  for r in rows])
    with engine.connect() as conn:
        command.upgrade(migrations.alembic_config(conn), "head")
        conn.commit()
        assert _run_steps_rolled_up(conn) == _run_steps_by_hand(conn) != []
    store = AuditStore(database)
    at = _write(store, rng, "run-x", range(2, 6), START, eval_every=2)
    _write(store, rng, "run-y", range(0, 2), at, verifier="code")
    store.append([_record(rng, START + timedelta(hours=1, seconds=i), "run-x", 3, "g1", i, "math")
                  for i in range(40)], [])
    with engine.connect() as conn:
        assert _run_steps_rolled_up(conn) == _run_steps_by_hand(conn)
    result = audit_archive.archive(store, START.date() - timedelta(days=1), tmp_path / "archive")
    assert result.removed and result.records == len(rows)
    with engine.connect() as conn:
        # The highest seq ever written to a step stays (a change mark); the counts are what is stored.
        rolled, hand = _run_steps_rolled_up(conn), _run_steps_by_hand(conn)
        assert [r[:4] for r in rolled] == [r[:4] for r in hand]
        assert all(r[4] >= h[4] for r, h in zip(rolled, hand, strict=True))
        by_hand = {(run, step): n for run, step, n, _, _ in _run_steps_by_hand(conn)}
    expected = _expected_runs(_stored(store))
    assert {r.id: (r.records, r.first_step, r.last_step) for r in list_runs(store)} == expected
    assert "old-run" not in expected and sum(by_hand.values()) == sum(n for n, _, _ in expected.values())
    for run in expected:
        assert run_records(store, run) == expected[run]
    assert run_records(store, "old-run") == (0, None, None)
    store.close()
    engine.dispose()
