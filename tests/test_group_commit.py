"""Group commit (service/record_writer.py): the records of concurrent requests share one
transaction, each request returns only once its own rows are committed, and each gets its own
outcome: a request whose rows the database refuses fails alone, and a store that cannot write
answers 503, never a reward without its record.

On SQLite and on Postgres, through `AuditStore.append` (what the engine awaits) and over HTTP.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from service.errors import AuditWriteFailed
from service.signing import Signer
from service.store import AuditStore
from service.tables import IdempotencyRow, RecordRow, TaskBlobRow
from service.testing.app import AppServer, app_settings
from tests.conftest import LiveServer
from tests.test_audit_chain import audit_verify, empty_url  # noqa: F401  (fixture)
from tests.test_audit_postgres import postgres_url  # noqa: F401  (fixture)

BLOB = TaskBlobRow(task_hash="b" * 64, verifier="math", task={"answer": "2"})


def _request(size: int = 2, **extra: object) -> list[RecordRow]:
    """The records of one request: `size` responses of one group (`extra` overrides columns)."""
    group, submission = uuid.uuid4().hex, uuid.uuid4().hex
    return [RecordRow(**{
        "id": uuid.uuid4().hex, "caller_key_id": "k", "task_hash": BLOB.task_hash, "task_public": {"answer": "2"},
        "verifier": "math", "verifier_version": "1", "response_hash": "r" * 64, "response": f"\\boxed{{{i}}}",
        "components": {"correctness": {"value": 1.0, "hard": True}}, "reward": 1.0, "verdict": "correct",
        "evidence": {"extracted": str(i)}, "flags": [], "sandbox_backend": "process", "duration_ms": 1.0,
        "group_id": group, "group_index": i, "submission_id": submission, "submission_index": i, **extra})
        for i in range(size)]


@pytest.fixture
def db_url(empty_url: str) -> str:  # noqa: F811 - SQLite, then an empty Postgres database
    return empty_url


def _stored(url: str, ids: list[str]) -> set[str]:
    """Ids found by a connection of its own (what another process would see)."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        found = set(conn.execute(sa.select(RecordRow.id).where(RecordRow.id.in_(ids))).scalars())
    engine.dispose()
    return found


def _open(url: str, tmp_path: Path) -> tuple[AuditStore, Path]:
    key = tmp_path / "k.pem"
    # One lane: a test that holds it holds the writer.
    return AuditStore(url, Signer.load_or_create(key), chain_id="gc", lanes=1), key


def test_concurrent_requests_share_commits_and_each_returns_once_its_rows_are_stored(db_url: str,
                                                                                     tmp_path: Path):
    store, key = _open(db_url, tmp_path)
    not_yet_visible: list[str] = []
    written: list[str] = []

    def client() -> None:
        for _ in range(12):
            rows = _request(3)
            store.append(rows, [BLOB])
            ids = [r.id for r in rows]
            if _stored(db_url, ids) != set(ids):  # read by another connection right after return
                not_yet_visible.extend(ids)
            written.extend(ids)

    threads = [threading.Thread(target=client) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer = store.records_writer
    assert not not_yet_visible, "append returned before its rows were committed"
    assert writer.requests_written == 144 and len(written) == 432
    # Requests waiting while a commit was on disk went together into the next one.
    assert writer.commits < writer.requests_written, (writer.commits, writer.requests_written)
    store.close()
    assert _stored(db_url, written) == set(written)
    result = audit_verify(db_url, key)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_request_whose_rows_conflict_fails_alone_and_the_others_of_its_batch_are_written(db_url: str,
                                                                                           tmp_path: Path):
    """Hold the chain lane so that five requests queue into one batch: one reuses a request_id,
    one an idempotency key, one carries text the database cannot store. Those three fail, each
    with its own error; the two others are written; the chain has no gap."""
    store, key = _open(db_url, tmp_path)
    store.append(_request(1, request_id="once"), [BLOB],
                 IdempotencyRow(caller_key_id="k", key="idem", request_hash="h", response={"groups": []}))
    writer = store.records_writer
    with store.chains.lane("records"):  # the writer takes the first request, then waits for the lane
        first = writer.submit(_request(2), [BLOB])
        requests = {
            "ok_a": (_request(2), None),
            "request_id": (_request(1, request_id="once"), None),
            "idempotency": (_request(2), IdempotencyRow(caller_key_id="k", key="idem", request_hash="h2",
                                                        response={"groups": []})),
            "unstorable": (_request(1, response="lone \ud800 surrogate"), None),
            "ok_b": (_request(3), None),
        }
        batch = {name: (rows, writer.submit(rows, [BLOB], idem)) for name, (rows, idem) in requests.items()}
    first.result(timeout=60)
    assert batch["ok_a"][1].result(timeout=60) is None and batch["ok_b"][1].result(timeout=60) is None
    for name in ("request_id", "idempotency"):
        with pytest.raises(sa.exc.IntegrityError):  # the engine reads this as "a retry of it won"
            batch[name][1].result(timeout=60)
    with pytest.raises(AuditWriteFailed):
        batch["unstorable"][1].result(timeout=60)
    # An honest request after the failures is written on the same chain.
    honest = _request(2)
    store.append(honest, [BLOB])
    store.close()
    for name, (rows, _) in batch.items():
        ids = [r.id for r in rows]
        assert _stored(db_url, ids) == (set(ids) if name.startswith("ok") else set()), name
    assert _stored(db_url, [r.id for r in honest]) == {r.id for r in honest}
    result = audit_verify(db_url, key)
    assert result.returncode == 0, result.stdout + result.stderr
    engine = sa.create_engine(db_url)
    with engine.connect() as conn:
        indexes = list(conn.execute(sa.select(RecordRow.chain_index).where(RecordRow.chain_id == "gc.0")
                                    .order_by(RecordRow.chain_index)).scalars())
    engine.dispose()
    assert indexes == list(range(1 + 2 + 2 + 3 + 2))


def test_a_store_that_cannot_write_answers_503_never_a_reward_and_recovers(tmp_path: Path):
    """The records table goes missing under a running server: the request is answered 503 with
    Retry-After (no reward without its record); once the table is back, requests are answered and
    logged again and the chain verifies."""
    server = AppServer(app_settings(tmp_path)).start()  # in-process: the store under it is what is tested
    body = {"groups": [{"verifier": "math", "task": {"answer": "2"}, "responses": [r"\boxed{2}", r"\boxed{3}"]}]}
    db = server.db_url.removeprefix("sqlite:///")
    try:
        with server.client() as c:
            before = c.post("/v1/groups", json=body)
            assert before.status_code == 200, before.text
            with sqlite3.connect(db) as conn:
                conn.execute("ALTER TABLE records RENAME TO records_away")
            failed = c.post("/v1/groups", json=body)
            assert failed.status_code == 503, failed.text
            assert "audit records could not be written" in failed.json()["detail"]
            assert failed.headers["Retry-After"]
            with sqlite3.connect(db) as conn:
                conn.execute("ALTER TABLE records_away RENAME TO records")
            after = c.post("/v1/groups", json=body)
            assert after.status_code == 200, after.text
            ids = [r["record_id"] for r in before.json()["groups"][0]["results"] + after.json()["groups"][0]["results"]]
            listed = c.get("/v1/records", params={"limit": 50}).json()
    finally:
        server.stop()
    assert {r["id"] for r in listed["records"]} == set(ids)
    result = audit_verify(server.db_url, tmp_path / "audit.signing-key.pem")
    assert result.returncode == 0, result.stdout + result.stderr


def test_infrastructure_failure_reaches_every_waiter_of_the_batch(tmp_path: Path):
    """Through the store: a batch that cannot be written fails each of its requests with
    AuditWriteFailed (none returns as written), and the next batch after the repair is written."""
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    store, key = _open(url, tmp_path)
    store.append(_request(1), [BLOB])
    with sqlite3.connect(tmp_path / "audit.db") as conn:
        conn.execute("ALTER TABLE records RENAME TO records_away")
    with store.chains.lane("records"):
        futures = [store.records_writer.submit(_request(2), [BLOB]) for _ in range(4)]
    for future in futures:
        with pytest.raises(AuditWriteFailed):
            future.result(timeout=60)
    with sqlite3.connect(tmp_path / "audit.db") as conn:
        conn.execute("ALTER TABLE records_away RENAME TO records")
    store.append(_request(2), [BLOB])
    store.close()
    result = audit_verify(url, key)
    assert result.returncode == 0, result.stdout + result.stderr
    with pytest.raises(AuditWriteFailed):  # a closed store takes nothing more
        store.append(_request(1), [BLOB])


def test_http_answers_match_their_records(live_server: LiveServer):
    """The JSON fast path answers what the records hold: 8 concurrent single-answer requests."""
    def one(i: int) -> dict:
        with live_server.client() as c:
            r = c.post("/v1/verify", json={"verifier": "math", "task": {"answer": str(i % 3)},
                                           "response": f"\\boxed{{{i % 2}}}"})
            assert r.status_code == 200, r.text
            assert r.headers["content-type"] == "application/json"
            return r.json()

    threads: list[threading.Thread] = []
    answers: list[dict] = []
    for i in range(8):
        threads.append(threading.Thread(target=lambda i=i: answers.append(one(i))))
        threads[-1].start()
    for t in threads:
        t.join()
    assert len(answers) == 8
    with live_server.client() as c:
        for answer in answers:
            record = c.get(f"/v1/records/{answer['record_id']}").json()
            assert (record["reward"], record["verdict"]) == (answer["reward"], answer["verdict"])
            assert answer["receipt"]["payload"]["record_id"] == answer["record_id"]
    with httpx.Client(base_url=live_server.url) as anonymous:
        assert anonymous.post("/v1/verify", json={}).status_code == 401
