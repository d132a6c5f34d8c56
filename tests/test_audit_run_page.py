"""Held out (written before revision 0018 and the read path it came with; issue 27 item 3): a run's
page answers every per-step figure as the records say, in a server process that never read the run
before (a fresh `assay serve`, no per-process cache), and again after later writes (to an old
step, a new step, held-out records only at a step), on SQLite and Postgres, and on Postgres after an
archive of the oldest day. Checked through HTTP: `GET /v1/runs/{id}` (every field of every step) and
`/ui/runs/{id}` (the chart data the page embeds).

By hand, per step, from the training records (held-out ones left out): n, groups, reward mean and
sample std over judged responses (not `error`, not masked), correct share of non-error responses,
zero-variance share of groups, mean distinct answers per group (`error` left out, no answer is one
answer, groups with no such answer left out), flag rates, mean tokens, mean characters, tokens per
correct answer, truncation/error/timeout rates, and the four length quarters (sizes, lowest and
highest length; their error and timeout counts add up to the step's).
"""

from __future__ import annotations

import json
import math
import random
import re
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from service.store import AuditStore
from service.tables import RecordRow
from service.testing.live import LiveServer
from service.testing.ui import sign_in
from tests.test_audit_postgres import database, postgres_url  # noqa: F401  (fixtures)

FLAGS = ("exits_process", "reads_tests")
DAY0 = (datetime.now(UTC) - timedelta(days=4)).replace(hour=6, minute=0, second=0, microsecond=0)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'page.db'}"
    return request.getfixturevalue("database")


def _row(rng: random.Random, at: datetime, run: str, step: int, group: str | None, index: int,
         eval_id: str | None = None, verdict: str | None = None) -> RecordRow:
    verdict = verdict or rng.choice(["correct", "incorrect", "incorrect", "timeout", "error", "invalid_format"])
    reward = {"correct": 1.0, "incorrect": rng.choice([0.0, 0.25])}.get(verdict, 0.0)
    return RecordRow(
        id=uuid.uuid4().hex, created_at=at, caller_key_id="kz", task_id=f"t{rng.randrange(4)}",
        task_hash=f"{rng.randrange(4):064x}", task_public={}, verifier="math", verifier_version="1",
        response_hash=f"{rng.getrandbits(128):032x}", response="q" * rng.randrange(1, 90),
        components={"correctness": {"value": reward, "hard": False}}, reward=reward, verdict=verdict,
        evidence={"answer_normalised": rng.choice(["1", "2", "x"])} if rng.random() < 0.8 else {"extracted": "e"},
        flags=[f for f in FLAGS if rng.random() < 0.3], sandbox_backend="process", usage=None, duration_ms=3.0,
        group_id=group, group_index=index, submission_id=uuid.uuid4().hex, submission_index=index,
        tokens=rng.choice([None, None, rng.randrange(5, 60)]), finish_reason=rng.choice(["stop", "stop", "length"]),
        run_id=run, run_step=step, eval_id=eval_id,
        group_zero_variance=None if group is None else rng.random() < 0.4)


def _write(store: AuditStore, rng: random.Random, run: str, steps: list[int], at: datetime,
           verdict: str | None = None, held_out_only: bool = False) -> datetime:
    for step in steps:
        if held_out_only:
            eval_id = uuid.uuid4().hex[:32]
            store.append([_row(rng, at, run, step, None, 0, eval_id=eval_id) for _ in range(4)], [])
            at += timedelta(minutes=7)
            continue
        for _ in range(rng.randrange(1, 4)):
            group = uuid.uuid4().hex[:16] if rng.random() < 0.75 else None
            size = rng.randrange(2, 7) if group else 1
            store.append([_row(rng, at + timedelta(seconds=i), run, step, group, i, verdict=verdict)
                          for i in range(size)], [])
            at += timedelta(minutes=rng.randrange(20, 90))
    return at


def _stored(store: AuditStore) -> list[RecordRow]:
    with store.db() as s:
        return list(s.scalars(sa.select(RecordRow).order_by(RecordRow.seq)))


def _answer(r: RecordRow) -> str:
    if r.verdict == "invalid_format":
        return "(no answer)"
    return r.evidence.get("answer_normalised") or r.evidence.get("extracted") or r.response_hash


def _quarters(n: int) -> list[int]:
    return [n // 4 + (1 if q < n % 4 else 0) for q in range(4) if n // 4 + (1 if q < n % 4 else 0)]


def _by_hand(rows: list[RecordRow], run: str) -> dict[int, dict[str, Any]]:
    training: dict[int, list[RecordRow]] = defaultdict(list)
    for r in rows:
        if r.run_id == run and r.eval_id is None:
            training[r.run_step].append(r)
    out = {}
    for step, recs in training.items():
        n = len(recs)
        errors = sum(r.verdict == "error" for r in recs)
        correct = sum(r.verdict == "correct" for r in recs)
        judged = [r.reward for r in recs if r.verdict != "error" and not r.masked]
        mean = sum(judged) / len(judged) if judged else None
        std = (math.sqrt(sum((x - mean) ** 2 for x in judged) / (len(judged) - 1)) if len(judged) > 1 else None)
        groups: dict[str, list[RecordRow]] = defaultdict(list)
        for r in recs:
            if r.group_id is not None:
                groups[r.group_id].append(r)
        answers = [len({_answer(r) for r in g if r.verdict != "error"}) for g in groups.values()]
        answers = [a for a in answers if a > 0]
        flags: dict[str, int] = defaultdict(int)
        for r in recs:
            for f in r.flags:
                flags[f] += 1
        tokens = [r.tokens for r in recs if r.tokens is not None]
        lengths = sorted(r.tokens if r.tokens is not None else len(r.response) for r in recs)
        bounds, at = [], 0
        for size in _quarters(n):
            bounds.append((size, lengths[at], lengths[at + size - 1]))
            at += size
        out[step] = {
            "n": n, "groups": len(groups), "reward_mean": mean, "reward_std": std,
            "correct_rate": correct / (n - errors) if n > errors else None,
            "zero_variance_share": (sum(any(r.group_zero_variance for r in g) for g in groups.values()) / len(groups)
                                    if groups else None),
            "distinct_answers": sum(answers) / len(answers) if answers else None,
            "flag_rates": {f: k / n for f, k in flags.items()},
            "mean_tokens": sum(tokens) / len(tokens) if tokens else None,
            "mean_chars": sum(len(r.response) for r in recs) / n,
            "tokens_per_correct": sum(tokens) / correct if tokens and correct else None,
            "truncation_rate": sum(r.finish_reason == "length" for r in recs) / n,
            "error_rate": errors / n, "timeout_rate": sum(r.verdict == "timeout" for r in recs) / n,
            "quarters": bounds, "errors": errors, "timeouts": sum(r.verdict == "timeout" for r in recs),
        }
    return out


def _approx(value: float | None) -> Any:
    return None if value is None else pytest.approx(value, rel=1e-9, abs=1e-12)


def _check(server: LiveServer, ui: Any, rows: list[RecordRow], run: str) -> None:
    expected = _by_hand(rows, run)
    with server.client() as c:
        got = c.get(f"/v1/runs/{run}")
    assert got.status_code == 200, got.text
    body = got.json()
    mine = [r for r in rows if r.run_id == run]
    assert body["records"] == len(mine)
    assert [s["step"] for s in body["steps"]] == sorted(expected)
    for s in body["steps"]:
        want = expected[s["step"]]
        for field in ("n", "groups", "truncation_rate", "error_rate", "timeout_rate"):
            assert s[field] == pytest.approx(want[field]), (run, s["step"], field)
        for field in ("reward_mean", "reward_std", "correct_rate", "zero_variance_share", "distinct_answers",
                      "mean_tokens", "mean_chars", "tokens_per_correct"):
            assert s[field] == _approx(want[field]), (run, s["step"], field, s[field], want[field])
        assert s["flag_rates"] == pytest.approx(want["flag_rates"]), (run, s["step"])
        assert [(b["n"], b["min_length"], b["max_length"]) for b in s["by_length"]] == want["quarters"]
        assert [b["quarter"] for b in s["by_length"]] == list(range(1, len(want["quarters"]) + 1))
        assert round(sum(b["error_rate"] * b["n"] for b in s["by_length"])) == want["errors"]
        assert round(sum(b["timeout_rate"] * b["n"] for b in s["by_length"])) == want["timeouts"]
    held = defaultdict(int)
    for r in mine:
        if r.eval_id is not None and r.verdict != "error":
            held[r.eval_id] += 1
    assert {p["eval_id"] for p in body["held_out"]} == set(held)
    page = ui.get(f"/ui/runs/{run}")
    assert page.status_code == 200, page.text
    found = re.search(r'<script type="application/json" id="run-data">(.*?)</script>', page.text, re.S)
    assert found is not None
    chart = json.loads(found.group(1))
    assert chart["steps"] == sorted(expected)
    for i, step in enumerate(chart["steps"]):
        want = expected[step]
        assert chart["reward"][i] == _approx(want["reward_mean"])
        assert chart["correct"][i] == _approx(want["correct_rate"])
        assert chart["distinct"][i] == _approx(want["distinct_answers"])
        assert chart["zero_variance"][i] == _approx(want["zero_variance_share"])
        assert chart["chars"][i] == _approx(want["mean_chars"])
        assert chart["errors"][i] == pytest.approx(want["error_rate"])
        for f in FLAGS:
            assert chart["flags"].get(f, [0.0] * len(chart["steps"]))[i] == pytest.approx(
                want["flag_rates"].get(f, 0.0))


def _check_all(store: AuditStore, server: LiveServer, runs: tuple[str, ...]) -> None:
    rows = _stored(store)
    ui = sign_in(server, server.admin_key)
    for run in runs:
        if any(r.run_id == run for r in rows):
            _check(server, ui, rows, run)
        else:  # archived whole
            with server.client() as c:
                assert c.get(f"/v1/runs/{run}").status_code == 404
    ui.close()


@pytest.mark.slow
def test_run_page_is_the_records_in_a_fresh_server_and_after_writes(url: str, tmp_path: Path) -> None:
    rng = random.Random(1827)
    store = AuditStore(url)
    if url.startswith("postgresql"):
        from service import audit_partitions

        with store.engine.begin() as conn:  # the days' partitions, so that an archive can drop the first
            audit_partitions.create_partitions(conn, [(DAY0 + timedelta(days=d)).date() for d in range(6)])
    at = _write(store, rng, "pg-a", list(range(0, 7)), DAY0)
    at = _write(store, rng, "pg-a", [3], at, held_out_only=True)   # a training step's held-out records
    at = _write(store, rng, "pg-a", [9], at, held_out_only=True)   # a step with held-out records only
    at = _write(store, rng, "pg-err", [0, 1, 2], at, verdict="error")
    env = {"ASSAY_DATABASE_URL": url, "ASSAY_ALARM_CHECK_INTERVAL_S": "3600"}
    runs = ("pg-a", "pg-err")
    server = LiveServer(tmp_path, env=env)
    try:
        _check_all(store, server, runs)          # the first read in this process
        # Later writes: an old step, a new step, held-out records only at a new step, a new run.
        at = _write(store, rng, "pg-a", [2], at + timedelta(hours=1))
        at = _write(store, rng, "pg-a", [11, 12], at)
        at = _write(store, rng, "pg-a", [13], at, held_out_only=True)
        at = _write(store, rng, "pg-b", [0, 1], at)
        _check_all(store, server, (*runs, "pg-b"))   # the same process, after writes
        server.restart()                              # a fresh process: nothing cached in it
        _check_all(store, server, (*runs, "pg-b"))
        at = _write(store, rng, "pg-a", [12], at)
        server.restart()
        _check_all(store, server, (*runs, "pg-b"))   # a fresh process after a write to a read step
        if url.startswith("postgresql"):
            from service import audit_archive

            result = audit_archive.archive(store, (DAY0 + timedelta(days=1)).date(), tmp_path / "archive")
            assert result.removed and result.records > 0
            _check_all(store, server, (*runs, "pg-b"))   # the process that had read before the archive
            server.restart()
            _check_all(store, server, (*runs, "pg-b"))
    finally:
        server.stop()
        store.close()


@pytest.mark.slow
def test_a_fresh_server_shows_a_runs_held_out_figures_as_stored_until_its_held_out_records_change(
        url: str, tmp_path: Path) -> None:
    """Since round 10 (audit10) `run_held_out_figures` holds a run's held-out figures (points and
    per-task counts), not the rows they are computed from: a fresh process shows what is stored
    for the run's current held-out records (maj@k over every subset of each task's votes was
    ~0.3-0.9 s of Python a run at 10M records), and computes them again once a held-out record is
    added. Shown by altering the stored figures: a fresh server shows the altered value; after a new
    held-out record, the records' figures again."""
    rng = random.Random(5309)
    store = AuditStore(url)
    if url.startswith("postgresql"):
        from service import audit_partitions

        with store.engine.begin() as conn:
            audit_partitions.create_partitions(conn, [(DAY0 + timedelta(days=d)).date() for d in range(3)])
    at = _write(store, rng, "hs-a", [0, 1, 2], DAY0)
    at = _write(store, rng, "hs-a", [1, 2], at, held_out_only=True)
    server = LiveServer(tmp_path, env={"ASSAY_DATABASE_URL": url, "ASSAY_ALARM_CHECK_INTERVAL_S": "3600"})

    def points() -> list[dict]:
        with server.client() as c:
            got = c.get("/v1/runs/hs-a")
        assert got.status_code == 200, got.text
        return got.json()["held_out"]

    def stored_figures() -> dict:
        with store.db() as s:
            return json.loads(s.execute(sa.text("SELECT figures FROM run_held_out_figures WHERE run_id = 'hs-a'"))
                              .scalar_one())

    try:
        computed = points()
        assert len(computed) == 2
        saved = stored_figures()
        assert [{k: v for k, v in p.items() if k not in ("name", "checkpoint")} for p in saved["points"]] == \
            [{k: v for k, v in p.items() if k not in ("name", "checkpoint")} for p in computed]
        assert sorted(saved["counts"]) == sorted(p["eval_id"] for p in computed)
        saved["points"][0]["maj_at_k"]["1"] = 0.123456
        with store.db() as s:
            s.execute(sa.text("UPDATE run_held_out_figures SET figures = :f WHERE run_id = 'hs-a'"),
                      {"f": json.dumps(saved)})
            s.commit()
        server.restart()
        shown = points()
        assert shown[0]["maj_at_k"]["1"] == 0.123456
        assert shown[1:] == computed[1:]
        _write(store, rng, "hs-a", [3], at + timedelta(hours=1), held_out_only=True)
        server.restart()
        again = points()
        assert again[:2] == computed and len(again) == 3
    finally:
        server.stop()
        store.close()


@pytest.mark.slow
def test_a_starting_server_stores_the_figures_of_runs_written_while_no_monitor_ran(url: str, tmp_path: Path) -> None:
    """Records loaded without a running service (a bulk load, a restore), and figures stored by an
    older figures version, leave runs whose first read would compute every step (~8 s for a run
    of 1,100 steps at 10M records). A starting server's alarm monitor computes and stores them
    before anyone reads; the pages then show the records' figures."""
    from service import runs as run_figures

    rng = random.Random(4111)
    store = AuditStore(url)
    if url.startswith("postgresql"):
        from service import audit_partitions

        with store.engine.begin() as conn:
            audit_partitions.create_partitions(conn, [(DAY0 + timedelta(days=d)).date() for d in range(3)])
    at = _write(store, rng, "bulk-a", [0, 1, 2, 3], DAY0)
    at = _write(store, rng, "bulk-b", [0, 1], at)
    at = _write(store, rng, "bulk-b", [1], at, held_out_only=True)
    assert run_figures.runs_to_compute(store) == ["bulk-a", "bulk-b"]
    run_figures.steps(store, "bulk-b", cache=run_figures.StepCache())  # stored ...
    assert run_figures.runs_to_compute(store) == ["bulk-a"]
    with store.db() as s:  # ... but by an older version of the figures
        s.execute(sa.text("UPDATE run_step_figures SET version = version - 1 WHERE run_id = 'bulk-b' AND step = 1"))
        s.commit()
    assert run_figures.runs_to_compute(store) == ["bulk-a", "bulk-b"]
    server = LiveServer(tmp_path, env={"ASSAY_DATABASE_URL": url, "ASSAY_ALARM_CHECK_INTERVAL_S": "3600"})
    try:
        deadline = time.monotonic() + 60
        while run_figures.runs_to_compute(store) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert run_figures.runs_to_compute(store) == []  # stored, nobody having read a run
        _check_all(store, server, ("bulk-a", "bulk-b"))
        _write(store, rng, "bulk-a", [2], at + timedelta(hours=1))  # written past the service
        assert run_figures.runs_to_compute(store) == ["bulk-a"]
        _check_all(store, server, ("bulk-a", "bulk-b"))  # the read computes the changed step
        assert run_figures.runs_to_compute(store) == []
    finally:
        server.stop()
        store.close()
