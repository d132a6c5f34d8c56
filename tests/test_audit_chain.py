"""The tamper-evident log: `assay audit verify` catches what a database owner can do to history.

A real server writes records (groups), a label and an evaluation run into SQLite and into
Postgres, then stops (signing its chains' heads). Each test copies that database and
tampers with the copy as the schema owner would (the append-only triggers dropped or
disabled first): edit a reward, edit it and re-hash the rest of the chain, delete a row,
swap a task blob, reorder rows, strip a row's chain fields, edit a label, delete an eval,
delete a signed head. `assay audit verify` must exit 1 naming the first row at fault, and
exit 0 on the untouched copy.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from service.audit_chain import row_hash
from service.store import AuditStore
from service.tables import RecordRow
from service.testing.app import AppServer, app_settings
from service.testing.cli import run_cli
from tests.conftest import REPO
from tests.test_audit_postgres import postgres_url  # noqa: F401  (fixture)
from tests.test_migrations import make_release_database

# A real server writes the history and `assay audit verify` runs twenty-odd times.
pytestmark = pytest.mark.slow

MATH = {"verifier": "math", "task": {"answer": "2"}}


@dataclass
class Written:
    """A database a server wrote, and the key that signed it."""

    dialect: str
    url: str
    key_path: Path
    record_ids: list[str]
    wrong_id: str  # a record whose reward is 0.0
    admin: str | None = None  # Postgres: the server's admin URL (to clone databases)
    clones: list[str] | None = None

    def clone(self, tmp: Path) -> str:
        if self.dialect == "sqlite":
            copy = tmp / f"copy-{uuid.uuid4().hex[:8]}.db"
            shutil.copy(self.url.removeprefix("sqlite:///"), copy)
            return f"sqlite:///{copy}"
        name = f"assay_tamper_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self.url.rsplit("/", 1)[1]}"')
        self.clones = [*(self.clones or []), name]
        return self.url.rsplit("/", 1)[0] + "/" + name


def audit_verify(url: str, key_path: Path, *args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    """`assay audit verify ARGS` on `url`: in this process (service/testing/cli.py), or with
    `process` as an operator runs it, `python -m service.cli` in a subprocess."""
    env = {"PATH": "/usr/bin:/bin", "ASSAY_DATABASE_URL": url, "ASSAY_SIGNING_KEY_PATH": str(key_path)}
    if not process:
        return run_cli(["audit", "verify", *args], env)
    return subprocess.run([sys.executable, "-m", "service.cli", "audit", "verify", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=env)


def write_history(server: AppServer) -> tuple[list[str], str]:
    ids: list[str] = []
    wrong = ""
    with server.client() as c:
        for i in range(4):
            r = c.post("/v1/groups", json={"groups": [{**MATH, "responses": [r"\boxed{2}", rf"\boxed{{{i + 3}}}"]},
                                                      {"verifier": "math", "task": {"answer": str(i)},
                                                       "responses": [rf"\boxed{{{i}}}"]}]})
            assert r.status_code == 200, r.text
            for group in r.json()["groups"]:
                for result in group["results"]:
                    ids.append(result["record_id"])
                    if result["reward"] == 0.0:
                        wrong = result["record_id"]
        r = c.post(f"/v1/records/{ids[0]}/labels", json={"label": "agree"})
        assert r.status_code == 201, r.text
        r = c.post("/v1/evals", json={"name": "e", "checkpoint": "c", "families": {"f": [
            {**MATH, "responses": [r"\boxed{2}", r"\boxed{5}"]}]}})
        assert r.status_code == 201, r.text
    return ids, wrong


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Written]:
    tmp = tmp_path_factory.mktemp(f"chain-{request.param}")
    key_path = tmp / "keys" / "signing.pem"
    admin = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp / 'audit.db'}"
    else:
        base = request.getfixturevalue("postgres_url")
        admin = base.replace("postgresql+psycopg://", "postgresql://")
        name = f"assay_chain_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = base.rsplit("/", 1)[0] + "/" + name
    # Two chains per writer and a head signed every 3 rows: the history spans several heads.
    with AppServer(app_settings(tmp, database_url=url, signing_key_path=key_path, audit_chain_lanes=2,
                                audit_sign_every=3)) as server:
        ids, wrong = write_history(server)
    written_ = Written(request.param, url, key_path, ids, wrong, admin)
    yield written_
    if admin is not None:
        with psycopg.connect(admin, autocommit=True) as conn:
            for name in [url.rsplit("/", 1)[1], *(written_.clones or [])]:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def as_owner(url: str, *statements: str, params: list[dict] | None = None) -> None:
    """Run statements as the schema owner, the append-only triggers out of the way first."""
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            for (name,) in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
                conn.exec_driver_sql(f"DROP TRIGGER {name}")
        else:
            for table in ("records", "labels", "evals", "audit_heads", "task_blobs"):
                conn.exec_driver_sql(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        for i, statement in enumerate(statements):
            conn.execute(sa.text(statement), (params or [{}] * len(statements))[i])
    engine.dispose()


def chain_of(url: str, record_id: str) -> list[RecordRow]:
    """The records of `record_id`'s chain, in chain order."""
    store = AuditStore(url)
    with store.db() as s:
        chain_id = s.scalar(sa.select(RecordRow.chain_id).where(RecordRow.id == record_id))
        rows = list(s.scalars(sa.select(RecordRow).where(RecordRow.chain_id == chain_id)
                              .order_by(RecordRow.chain_index)))
    store.engine.dispose()
    return rows


def assert_caught(result: subprocess.CompletedProcess[str], kind: str, names: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    first = [line for line in result.stdout.splitlines() if line.startswith(f"{kind}:")]
    assert first and names in first[0], result.stdout
    assert "TAMPERED" in result.stdout


@pytest.fixture
def copy(written: Written, tmp_path: Path) -> str:
    return written.clone(tmp_path)


def test_untouched_history_verifies(written: Written, copy: str, tmp_path: Path):
    result = audit_verify(copy, written.key_path, process=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "INTACT" in result.stdout and "0 rows after the last signed heads" in result.stdout
    report = json.loads(audit_verify(copy, written.key_path, "--json").stdout)
    assert report["intact"] and sum(c["rows"] for c in report["chains"]["records"].values()) == 14
    assert report["chains"]["labels"] and report["chains"]["evals"]
    # The newest signed head, kept outside the database, is an anchor for the next run.
    anchor = tmp_path / "anchor.json"
    anchor.write_text(json.dumps(report["newest_signed_head"]))
    assert audit_verify(copy, written.key_path, "--anchor", str(anchor)).returncode == 0


def test_edited_reward_is_named(written: Written, copy: str):
    as_owner(copy, "UPDATE records SET reward = 1.0 WHERE id = :id", params=[{"id": written.wrong_id}])
    assert_caught(audit_verify(copy, written.key_path, process=True), "changed", written.wrong_id)


def test_edited_reward_rehashed_down_the_chain_breaks_the_signed_head(written: Written, copy: str):
    """The owner knows the hash rule: edit a reward, then recompute every later hash of the chain."""
    rows = chain_of(copy, written.wrong_id)
    start = next(i for i, r in enumerate(rows) if r.id == written.wrong_id)
    rows[start].reward = 1.0
    prev = rows[start].chain_prev
    updates = []
    for row in rows[start:]:
        row.chain_prev = prev
        row.chain_hash = prev = row_hash("records", row, prev)
        updates.append({"id": row.id, "prev": row.chain_prev, "hash": row.chain_hash, "reward": row.reward})
    as_owner(copy, *["UPDATE records SET reward = :reward, chain_prev = :prev, chain_hash = :hash WHERE id = :id"]
             * len(updates), params=updates)
    result = audit_verify(copy, written.key_path)
    assert_caught(result, "rewritten", "the first of them is")
    named = result.stdout.split("the first of them is ")[1].split()[0]
    assert named in [r.id for r in rows[:start + 1]], result.stdout  # at or before the edited record


def test_deleted_record_is_named(written: Written, copy: str):
    rows = chain_of(copy, written.wrong_id)
    assert len(rows) >= 3
    victim, after = rows[1], rows[2]
    as_owner(copy, "DELETE FROM records WHERE id = :id", params=[{"id": victim.id}])
    assert_caught(audit_verify(copy, written.key_path), "removed", f"before record {after.id}")


def test_deleted_tail_is_caught_by_the_signed_head(written: Written, copy: str):
    rows = chain_of(copy, written.wrong_id)
    as_owner(copy, "DELETE FROM records WHERE id = :id", params=[{"id": rows[-1].id}])
    assert_caught(audit_verify(copy, written.key_path), "removed", f"rows {rows[-1].chain_index}..")


def test_swapped_task_blob_is_named(written: Written, copy: str):
    rows = chain_of(copy, written.wrong_id)
    task_hash = rows[0].task_hash
    as_owner(copy, "UPDATE task_blobs SET task = :task WHERE task_hash = :h",
             params=[{"task": json.dumps({"answer": "7"}), "h": task_hash}])
    assert_caught(audit_verify(copy, written.key_path), "task_blob_changed", task_hash)


def test_removed_task_blob_is_named(written: Written, copy: str):
    task_hash = chain_of(copy, written.wrong_id)[0].task_hash
    as_owner(copy, "DELETE FROM task_blobs WHERE task_hash = :h", params=[{"h": task_hash}])
    assert_caught(audit_verify(copy, written.key_path), "task_blob_removed", task_hash)


def test_reordered_records_are_named(written: Written, copy: str):
    rows = chain_of(copy, written.wrong_id)
    a, b = rows[0], rows[1]
    as_owner(copy, "UPDATE records SET seq = -1 WHERE seq = :a", "UPDATE records SET seq = :a WHERE seq = :b",
             "UPDATE records SET seq = :b WHERE seq = -1", params=[{"a": a.seq}, {"a": a.seq, "b": b.seq},
                                                                  {"b": b.seq}])
    assert_caught(audit_verify(copy, written.key_path), "out_of_order", b.id)


def test_stripped_chain_fields_are_named(written: Written, copy: str):
    last = chain_of(copy, written.wrong_id)[-1]
    as_owner(copy, "UPDATE records SET chain_id = NULL, chain_index = NULL, chain_prev = NULL, chain_hash = NULL "
             "WHERE id = :id", params=[{"id": last.id}])
    result = audit_verify(copy, written.key_path)
    assert_caught(result, "unchained", last.id)


def test_edited_label_and_deleted_eval_are_named(written: Written, copy: str):
    engine = sa.create_engine(copy)
    with engine.connect() as conn:
        label_id = conn.exec_driver_sql("SELECT id FROM labels").scalar_one()
        eval_id = conn.exec_driver_sql("SELECT id FROM evals").scalar_one()
    engine.dispose()
    as_owner(copy, "UPDATE labels SET label = 'exploit' WHERE id = :id", "DELETE FROM evals WHERE id = :e",
             params=[{"id": label_id}, {"e": eval_id}])
    result = audit_verify(copy, written.key_path)
    assert_caught(result, "changed", label_id)
    assert_caught(result, "removed", "evals chain")


def test_deleted_signed_head_and_unknown_key_are_caught(written: Written, copy: str, tmp_path: Path):
    as_owner(copy, "DELETE FROM audit_heads WHERE position = 1")
    assert_caught(audit_verify(copy, written.key_path), "head_removed", "signed heads 1..1")
    other = tmp_path / "other.pem"
    from service.signing import Signer

    Signer.load_or_create(other)  # a key that never signed this database
    result = audit_verify(written.clone(tmp_path), other)
    assert_caught(result, "head_bad_signature", "an unknown key")


def test_records_from_before_chaining_are_counted_not_vouched_for(tmp_path: Path):
    """A 0.1.0 database upgraded: its 25 records stay unchained; new ones chain after them."""
    url = f"sqlite:///{tmp_path / 'release.db'}"
    key = make_release_database(url)
    upgraded = run_cli(["db", "upgrade"], {"ASSAY_DATABASE_URL": url})
    assert upgraded.returncode == 0, upgraded.stdout + upgraded.stderr
    with AppServer(app_settings(tmp_path, database_url=url)) as server, server.client(key) as c:
        assert c.post("/v1/verify", json={**MATH, "response": r"\boxed{2}"}).status_code == 200
    key_path = tmp_path / "release.signing-key.pem"
    result = audit_verify(url, key_path)
    assert result.returncode == 0, result.stdout
    assert "25 rows from before chaining" in result.stdout
    # An old record edited is outside every chain: verify cannot vouch for it, and says so above.
    as_owner(url, "UPDATE records SET reward = 0.5 WHERE seq = 3")
    assert audit_verify(url, key_path).returncode == 0
    # A chained one is caught.
    as_owner(url, "UPDATE records SET reward = 0.5 WHERE seq = 26")
    assert audit_verify(url, key_path).returncode == 1


def test_no_key_is_exit_2(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    AuditStore(url).engine.dispose()
    result = audit_verify(url, tmp_path / "missing.pem", process=True)
    assert result.returncode == 2 and "cannot read the signing key" in result.stderr


def _record(**extra: object) -> RecordRow:
    values = {"id": uuid.uuid4().hex, "caller_key_id": "k", "task_hash": "t" * 64, "task_public": {"answer": "2"},
              "verifier": "math", "verifier_version": "1", "response_hash": "r" * 64, "response": "2",
              "components": {"correctness": {"value": 1.0, "hard": True}}, "reward": 1.0, "verdict": "correct",
              "evidence": {}, "flags": [], "sandbox_backend": "process", "duration_ms": 1.0}
    return RecordRow(**{**values, **extra})


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'two.db'}"
        return
    base = request.getfixturevalue("postgres_url")
    admin = base.replace("postgresql+psycopg://", "postgresql://")
    name = f"assay_two_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield base.rsplit("/", 1)[0] + "/" + name
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_two_writers_on_one_chain_id_stay_one_chain(empty_url: str, tmp_path: Path):
    """Two processes misconfigured with the same chain id: the later insert loses the index, re-reads the
    head and links after the other's rows; a request_id conflict is still the caller's error. Values the
    JSON columns store differently (integer keys, tuples) hash as they are read back."""
    from service.signing import Signer
    from service.tables import TaskBlobRow

    signer = Signer.load_or_create(tmp_path / "k.pem")
    a, b = (AuditStore(empty_url, signer, chain_id="shared", lanes=1) for _ in range(2))
    blob = [TaskBlobRow(task_hash="t" * 64, verifier="math", task={"answer": "2"})]
    a.append([_record(evidence={10: "x", 9: ("y", 1)})], blob)
    b.append([_record(), _record()], blob)
    a.append([_record(request_id="once")], blob)  # a's head is stale: it re-links after b's rows
    with pytest.raises(sa.exc.IntegrityError):
        b.append([_record(request_id="once")], blob)
    b.append([_record(flags=["late"])], blob)
    for store in (a, b):
        store.close()
    rows = chain_of(empty_url, _first_id(empty_url))
    assert [r.chain_index for r in rows] == [0, 1, 2, 3, 4] and rows[0].chain_id == "shared.0"
    result = audit_verify(empty_url, tmp_path / "k.pem")
    assert result.returncode == 0, result.stdout


def _first_id(url: str) -> str:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        found = conn.exec_driver_sql("SELECT id FROM records ORDER BY seq LIMIT 1").scalar_one()
    engine.dispose()
    return found
