"""The audit store (SQLAlchemy 2): append-only records, API keys, tasks, idempotency.

The schema is owned by the Alembic revisions in service/migrations: a change to these
models needs a revision there (tests/test_migrations.py compares the two).

SQLite (WAL, synchronous=FULL) by default, Postgres by URL. Nothing here updates or
deletes a record: the store offers no method that could.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Connection,
    DateTime,
    Float,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    bindparam,
    cast,
    create_engine,
    delete,
    event,
    exists,
    false,
    func,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.sql.elements import ColumnElement

from service import migrations
from service.errors import IdempotencyConflict, TaskConflict

if TYPE_CHECKING:
    from service.signing import Signer


class Base(DeclarativeBase):
    pass


class Chained:
    """Hash-chain columns of an append-only table (service/audit_chain.py writes and checks them).

    A new column on a chained table must be nullable: a row's hash leaves NULLs out, so the
    hashes of rows written before the column existed stay valid."""

    chain_id: Mapped[str | None] = mapped_column(String(64))
    chain_index: Mapped[int | None] = mapped_column(Integer)
    chain_prev: Mapped[str | None] = mapped_column(String(64))
    chain_hash: Mapped[str | None] = mapped_column(String(64))


def _now() -> datetime:
    return datetime.now(UTC)


class RecordRow(Chained, Base):
    __tablename__ = "records"
    __table_args__ = (
        Index("uq_records_chain", "chain_id", "chain_index", unique=True),
        Index("ix_records_created", "created_at"),
        Index("ix_records_verdict", "verdict"),
        Index("ix_records_verifier", "verifier"),
        Index("ix_records_group", "group_id"),
        Index("ix_records_task", "task_id"),
        # Keyset pages of the viewer: a filter or sort column, then seq as the tie-breaker.
        Index("ix_records_verifier_seq", "verifier", "seq"),
        Index("ix_records_verdict_seq", "verdict", "seq"),
        Index("ix_records_caller_seq", "caller_key_id", "seq"),
        Index("ix_records_reward_seq", "reward", "seq"),
        Index("ix_records_duration_seq", "duration_ms", "seq"),
        UniqueConstraint("caller_key_id", "request_id", name="uq_records_caller_request"),
        # One record per response of a request, whatever an executor (a Ray task) retried.
        # A unique index, not a constraint: SQLite adds one without rebuilding the table.
        Index("uq_records_submission_index", "submission_id", "submission_index", unique=True),
        # Per-run series (/v1/runs): every run query filters on the run, then groups by step.
        Index("ix_records_run_step", "run_id", "run_step", "seq"),
        # Records of a task by content hash (issue 27: /v1/records?task_hash= at scale).
        Index("ix_records_task_hash_seq", "task_hash", "seq"),
    )

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    request_id: Mapped[str | None] = mapped_column(String(200))
    caller_key_id: Mapped[str | None] = mapped_column(String(64))
    task_id: Mapped[str | None] = mapped_column(String(200))
    task_hash: Mapped[str] = mapped_column(String(64))
    task_public: Mapped[dict] = mapped_column(JSON)
    verifier: Mapped[str] = mapped_column(String(64))
    verifier_version: Mapped[str] = mapped_column(String(32))
    response_hash: Mapped[str] = mapped_column(String(64))
    response: Mapped[str | None] = mapped_column(Text)
    components: Mapped[dict] = mapped_column(JSON)
    reward: Mapped[float] = mapped_column(Float)
    verdict: Mapped[str] = mapped_column(String(32))
    evidence: Mapped[dict] = mapped_column(JSON)
    flags: Mapped[list] = mapped_column(JSON)
    sandbox_backend: Mapped[str] = mapped_column(String(32))
    usage: Mapped[dict | None] = mapped_column(JSON)
    duration_ms: Mapped[float] = mapped_column(Float)
    group_id: Mapped[str | None] = mapped_column(String(64))
    group_index: Mapped[int | None] = mapped_column(Integer)
    # The request that produced the record (one id per /v1/verify or /v1/groups call) and
    # the response's position in it.
    submission_id: Mapped[str | None] = mapped_column(String(32))
    submission_index: Mapped[int | None] = mapped_column(Integer)
    # What the caller was told about the group, as it was told (the advantage options are per request).
    advantage: Mapped[float | None] = mapped_column(Float)
    group_mean: Mapped[float | None] = mapped_column(Float)
    group_std: Mapped[float | None] = mapped_column(Float)
    group_zero_variance: Mapped[bool | None] = mapped_column(Boolean)
    # Inspection (issue 12): flag evidence by name, generation facts, mask, evaluation run.
    flag_evidence: Mapped[dict | None] = mapped_column(JSON)
    tokens: Mapped[int | None] = mapped_column(Integer)
    finish_reason: Mapped[str | None] = mapped_column(String(32))
    masked: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    eval_id: Mapped[str | None] = mapped_column(String(32), index=True)
    # What a policy may be shown (issue 20); `evidence` stays the full audit view.
    feedback: Mapped[dict | None] = mapped_column(JSON)
    # Training runs (issue 26): the run and step the request named (`run: {id, step}`).
    run_id: Mapped[str | None] = mapped_column(String(200))
    run_step: Mapped[int | None] = mapped_column(Integer)
    # SHA-256 of the task blob's canonical JSON when the record was written (audit verify).
    task_digest: Mapped[str | None] = mapped_column(String(64))


class LabelRow(Chained, Base):
    """A reviewer's label on a record. Append-only, like records: a new label supersedes."""

    __tablename__ = "labels"
    __table_args__ = (Index("ix_labels_record", "record_id"),
                      Index("uq_labels_chain", "chain_id", "chain_index", unique=True))
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    record_id: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    author: Mapped[str] = mapped_column(String(200))
    author_key_id: Mapped[str] = mapped_column(String(64))
    label: Mapped[str] = mapped_column(String(16))  # agree | disagree | exploit
    corrected_verdict: Mapped[str | None] = mapped_column(String(32))
    pattern: Mapped[str | None] = mapped_column(String(100))
    note: Mapped[str | None] = mapped_column(Text)


class EvalRow(Chained, Base):
    """A held-out evaluation run; its records carry its id. Written once."""

    __tablename__ = "evals"
    __table_args__ = (Index("uq_evals_chain", "chain_id", "chain_index", unique=True),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    name: Mapped[str] = mapped_column(String(200))
    checkpoint: Mapped[str] = mapped_column(String(200))
    caller_key_id: Mapped[str | None] = mapped_column(String(64))
    # {family: [{"task_key", "record_ids": [...]}]}: which records answer which task.
    layout: Mapped[dict] = mapped_column(JSON)


class RunThresholdsRow(Base):
    """A run's alarm thresholds, as a team set them (`PUT /v1/runs/{id}/thresholds`). Not an
    audit record: a later setting replaces an earlier one."""

    __tablename__ = "run_thresholds"
    run_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    thresholds: Mapped[dict] = mapped_column(JSON)
    caller_key_id: Mapped[str | None] = mapped_column(String(64))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class RunAlarmRow(Base):
    """An alarm raised on a run: once per (run, rule, subject), the first time its rule held."""

    __tablename__ = "run_alarms"
    __table_args__ = (UniqueConstraint("run_id", "rule", "subject", name="uq_run_alarms"),)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(200))
    rule: Mapped[str] = mapped_column(String(64))
    subject: Mapped[str] = mapped_column(String(200))  # e.g. the flag's name; "" when the rule has none
    step: Mapped[int] = mapped_column(Integer)  # the step at which it was first seen
    raised_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    detail: Mapped[dict] = mapped_column(JSON)


class ChainHeadRow(Base):
    """A signed head of one hash chain (service/audit_chain.py). The heads form a chain of
    their own (`prev_hash`, `position`), so removing a whole chain's heads shows too."""

    __tablename__ = "audit_heads"
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    chain_table: Mapped[str] = mapped_column(String(32))
    chain_id: Mapped[str] = mapped_column(String(64))
    chain_index: Mapped[int] = mapped_column(Integer)
    head_hash: Mapped[str] = mapped_column(String(64))
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))
    key_id: Mapped[str] = mapped_column(String(16))
    signature: Mapped[str] = mapped_column(String(100))


class TaskBlobRow(Base):
    """Full task content by hash, for replay. Never returned by any endpoint."""

    __tablename__ = "task_blobs"
    task_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    verifier: Mapped[str] = mapped_column(String(64))
    task: Mapped[dict] = mapped_column(JSON)


class RegisteredTaskRow(Base):
    __tablename__ = "tasks"
    task_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    verifier: Mapped[str] = mapped_column(String(64))
    task_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class ApiKeyRow(Base):
    __tablename__ = "api_keys"
    key_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    secret_hash: Mapped[str] = mapped_column(String(64))
    scopes: Mapped[str] = mapped_column(String(200))
    name: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


class KeyRevocationRow(Base):
    """A key's revocation: append-only (service/keys.py inserts, nothing updates `api_keys`)."""

    __tablename__ = "key_revocations"
    __table_args__ = (Index("ix_key_revocations_key", "key_id"),)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    key_id: Mapped[str] = mapped_column(String(64))
    revoked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    revoked_by: Mapped[str] = mapped_column(String(200))
    reason: Mapped[str | None] = mapped_column(String(500))


class IdempotencyRow(Base):
    __tablename__ = "idempotency"
    __table_args__ = (UniqueConstraint("caller_key_id", "key", name="uq_idempotency"),)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    caller_key_id: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(String(200))
    request_hash: Mapped[str] = mapped_column(String(64))
    response: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class EnvSessionRow(Base):
    """A `/v1/envs` environment session, shared by every API replica. Not an audit record:
    rows change as calls are made and go once they expire."""

    __tablename__ = "env_sessions"
    __table_args__ = (Index("ix_env_sessions_caller", "caller_key_id"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    caller_key_id: Mapped[str] = mapped_column(String(64))
    opened: Mapped[dict] = mapped_column(JSON)  # the open request: verifier and task or task_id
    calls: Mapped[list] = mapped_column(JSON)  # the calls made so far, as sent
    trace_chars: Mapped[int] = mapped_column(Integer, default=0)
    # Bumped by every change: a replica writes only over the version it read.
    version: Mapped[int] = mapped_column(Integer, default=0)
    touched_at: Mapped[float] = mapped_column(Float)  # the session clock's time of the last use
    finishing_since: Mapped[float | None] = mapped_column(Float)
    result: Mapped[dict | None] = mapped_column(JSON)


class UiSessionRow(Base):
    """A signed-in viewer session: the cookie holds a random token, the table its hash."""

    __tablename__ = "ui_sessions"
    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    key_id: Mapped[str] = mapped_column(String(64))
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class CertificateRow(Base):
    """A task's certification (service/certification.py). Append-only: the newest per task hash counts."""

    __tablename__ = "certificates"
    __table_args__ = (Index("ix_certificates_task_hash_seq", "task_hash", "seq"),)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    task_hash: Mapped[str] = mapped_column(String(64))
    task_id: Mapped[str | None] = mapped_column(String(200))
    verifier: Mapped[str] = mapped_column(String(64))
    verifier_version: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))  # certified | quarantined
    reasons: Mapped[list] = mapped_column(JSON)
    # [{"run", "verdict", "reward", "duration_ms"}] and [{"name", "verdict", "reward", "excused"}]
    reference_runs: Mapped[list] = mapped_column(JSON)
    probes: Mapped[list] = mapped_column(JSON)
    caller_key_id: Mapped[str | None] = mapped_column(String(64))
    # Whether it decides the task's standing: always for an inline task; for a registered one only
    # when an admin key (or the CLI) certified it, so a `reward` key cannot quarantine a shared task.
    counts: Mapped[bool] = mapped_column(Boolean)


class VerifierDiffRow(Base):
    """A release-gate report (service/verifier_diff.py): logged verdicts against the code as it is now."""

    __tablename__ = "verifier_diffs"
    __table_args__ = (Index("ix_verifier_diffs_verifier_seq", "verifier", "seq"),)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    verifier: Mapped[str] = mapped_column(String(64))
    verifier_version: Mapped[str] = mapped_column(String(32))
    report: Mapped[dict] = mapped_column(JSON)
    caller_key_id: Mapped[str | None] = mapped_column(String(64))


class RollupHourRow(Base):
    """Counts per hour of the records (service/audit_rollups.py); written by a trigger on records."""

    __tablename__ = "rollup_hours"
    hour: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # epoch hours (UTC)
    verifier: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger)


class RollupTaskRow(Base):
    """Curriculum tallies per task (service/audit_rollups.py); written by a trigger on records."""

    __tablename__ = "rollup_tasks"
    __table_args__ = (Index("ix_rollup_tasks_first_seq", "first_seq"),
                      Index("ix_rollup_tasks_verifier_first_seq", "verifier", "first_seq"))
    task_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(200), primary_key=True)  # '' for an inline task
    verifier: Mapped[str] = mapped_column(String(64))
    first_seq: Mapped[int] = mapped_column(BigInteger)
    first_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(BigInteger)
    judged: Mapped[int] = mapped_column(BigInteger)
    correct_sum: Mapped[float] = mapped_column(Float)
    tokens_n: Mapped[int] = mapped_column(BigInteger)
    tokens_sum: Mapped[int] = mapped_column(BigInteger)
    groups: Mapped[int] = mapped_column(BigInteger)
    zv_groups: Mapped[int] = mapped_column(BigInteger)


class RecordKeyRow(Base):
    """Postgres: the records' unique keys (a partitioned table's unique index must hold the
    partition key, so uniqueness of id, request, response index and chain position lives
    here); filled by the insert trigger of revision 0012. Unused on SQLite."""

    __tablename__ = "record_keys"
    __table_args__ = (UniqueConstraint("caller_key_id", "request_id", name="uq_record_keys_request"),
                      Index("uq_record_keys_submission", "submission_id", "submission_index", unique=True),
                      Index("uq_record_keys_chain", "chain_id", "chain_index", unique=True))
    record_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    caller_key_id: Mapped[str | None] = mapped_column(String(64))
    request_id: Mapped[str | None] = mapped_column(String(200))
    submission_id: Mapped[str | None] = mapped_column(String(32))
    submission_index: Mapped[int | None] = mapped_column(Integer)
    chain_id: Mapped[str | None] = mapped_column(String(64))
    chain_index: Mapped[int | None] = mapped_column(Integer)


class ArchiveRow(Base):
    """An archive of records written by `assay audit archive` (service/audit_archive.py): where,
    what it holds, and each chain's last archived row, so the chains continue across it."""

    __tablename__ = "audit_archives"
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    before: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    path: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64))
    records: Mapped[int] = mapped_column(BigInteger)
    # {chain_id: [last archived chain_index, its chain_hash]}, the removed partitions, counts.
    manifest: Mapped[dict] = mapped_column(JSON)


def new_record_id() -> str:
    return uuid.uuid4().hex


class AuditStore:
    def __init__(self, url: str, signer: Signer | None = None, **chain_options: Any) -> None:
        """`signer` signs the chains' heads (the service passes the deployment's key);
        `chain_options` go to ChainWriter (chain id, lanes, signing interval)."""
        from service.audit_chain import ChainWriter
        if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        connect_args: dict[str, Any] = {"timeout": 30} if url.startswith("sqlite") else {}
        if url.startswith("postgresql"):
            # JIT compiling the audit's aggregate queries costs seconds and saves nothing here.
            connect_args["options"] = "-c jit=off"
        self.engine = create_engine(url, pool_pre_ping=True, connect_args=connect_args)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        # A new database is created at head; one behind head is refused (`assay db upgrade`).
        migrations.prepare(self.engine)
        self._units_of_work = sessionmaker(self.engine, expire_on_commit=False)
        self.signer = signer
        self.chains = ChainWriter(self._units_of_work, signer, **chain_options)
        from service.record_writer import RecordWriter
        self._digests: dict[tuple[str, str], str] = {}  # (verifier, task hash) -> task digest
        self.records_writer = RecordWriter(self.engine, self.chains, self._with_digests)

    def db(self) -> Session:
        """A database unit of work (SQLAlchemy's ORM Session): use as `with store.db() as s`.
        Named apart from the other sessions in Assay (sandbox call sessions, resident servers,
        environment sessions)."""
        return self._units_of_work()

    def ping(self) -> None:
        with self.db() as s:
            s.execute(select(1))

    # ------------------------------------------------------------------ records

    def append(self, rows: list[RecordRow], blobs: list[TaskBlobRow],
               idempotency: IdempotencyRow | None = None) -> None:
        """Write records (and the idempotent response) durably, linked into a hash chain, each
        with the digest of its task blob; returns once they are committed. The records of
        concurrent requests share one transaction (group commit, service/record_writer.py)."""
        self.records_writer.append(rows, blobs, idempotency)

    async def append_async(self, rows: list[RecordRow], blobs: list[TaskBlobRow],
                           idempotency: IdempotencyRow | None = None) -> None:
        """`append`, awaited on the event loop without a thread of its own."""
        await self.records_writer.append_async(rows, blobs, idempotency)

    def _with_digests(self, pending: Any) -> None:
        """Each record's `task_digest`, computed once per task (on the writer thread)."""
        from service.audit_chain import task_digest

        for blob in pending.blobs:
            key = (blob.verifier, blob.task_hash)
            if key not in self._digests:
                if len(self._digests) >= 4096:
                    self._digests.clear()
                self._digests[key] = task_digest(blob)
        digests = {b.task_hash: self._digests[(b.verifier, b.task_hash)] for b in pending.blobs}
        for row in pending.rows:
            row.task_digest = digests.get(row.task_hash)

    def close(self) -> None:
        """Write the records still queued, sign the chains' heads written since the last signed
        ones; close the connections."""
        self.records_writer.close()
        self.chains.sign_all()
        self.engine.dispose()

    def record(self, record_id: str) -> RecordRow | None:
        with self.db() as s:
            return s.scalar(select(RecordRow).where(RecordRow.id == record_id))

    def record_by_request(self, caller_key_id: str, request_id: str) -> RecordRow | None:
        with self.db() as s:
            return s.scalar(select(RecordRow).where(RecordRow.caller_key_id == caller_key_id,
                                                    RecordRow.request_id == request_id))

    def query(self, *, verifier: str | None = None, verdict: str | None = None, group_id: str | None = None,
              task_id: str | None = None, task_hash: str | None = None, flag: str | None = None,
              eval_id: str | None = None, caller_key_id: str | None = None,
              since: datetime | None = None, until: datetime | None = None,
              after_seq: int | None = None, limit: int = 100) -> list[RecordRow]:
        stmt = select(RecordRow).order_by(RecordRow.seq)
        for column, value in ((RecordRow.verifier, verifier), (RecordRow.verdict, verdict),
                              (RecordRow.group_id, group_id), (RecordRow.task_id, task_id),
                              (RecordRow.task_hash, task_hash), (RecordRow.eval_id, eval_id),
                              (RecordRow.caller_key_id, caller_key_id)):
            if value is not None:
                stmt = stmt.where(column == value)
        if since is not None:
            stmt = stmt.where(RecordRow.created_at >= since)
        if until is not None:
            stmt = stmt.where(RecordRow.created_at < until)
        if after_seq is not None:
            stmt = stmt.where(RecordRow.seq > after_seq)
        if flag is not None:
            stmt = stmt.where(self.has_flag(flag))
        with self.db() as s:
            return list(s.scalars(stmt.limit(limit)))

    def has_flag(self, flag: str) -> ColumnElement[bool]:
        """SQL condition: the record's JSON list of flags contains `flag`."""
        if self.engine.dialect.name == "postgresql":
            return cast(RecordRow.flags, JSONB).contains([flag])
        each = func.json_each(RecordRow.flags).table_valued("value")
        return exists(select(1).select_from(each).where(each.c.value == flag))

    def records_by_ids(self, ids: list[str]) -> dict[str, RecordRow]:
        found: dict[str, RecordRow] = {}
        with self.db() as s:
            for start in range(0, len(ids), 500):
                chunk = ids[start:start + 500]
                found.update((r.id, r) for r in s.scalars(select(RecordRow).where(RecordRow.id.in_(chunk))))
        return found

    def iter_all(self, **filters: Any) -> Iterator[RecordRow]:
        after = None
        while True:
            page = self.query(after_seq=after, limit=500, **filters)
            if not page:
                return
            yield from page
            after = page[-1].seq

    def task_blob(self, task_hash: str) -> TaskBlobRow | None:
        with self.db() as s:
            return s.get(TaskBlobRow, task_hash)

    # -------------------------------------------------------------------- tasks

    def register_task(self, task_id: str, verifier: str, task_hash: str, task: dict[str, Any]) -> bool:
        """Register a task id. Same content again is a no-op (False); other content conflicts."""
        try:
            with self.db() as s, s.begin():
                if s.get(RegisteredTaskRow, task_id) is None:
                    add_blobs(s, [TaskBlobRow(task_hash=task_hash, verifier=verifier, task=task)])
                    s.add(RegisteredTaskRow(task_id=task_id, verifier=verifier, task_hash=task_hash))
                    return True
        except IntegrityError:
            pass  # a concurrent registration of the same id won: compare with it
        with self.db() as s:
            existing = s.get(RegisteredTaskRow, task_id)
        assert existing is not None
        if existing.verifier != verifier or (existing.task_hash != task_hash and not self._same_task(existing, task)):
            raise TaskConflict(f"task_id {task_id!r} is already registered with different content")
        return False

    def _same_task(self, existing: RegisteredTaskRow, task: dict[str, Any]) -> bool:
        """A task registered under another fingerprint (before keyed fingerprints) with the same content."""
        blob = self.task_blob(existing.task_hash)
        return blob is not None and blob.task == task

    def registered_task(self, task_id: str) -> tuple[RegisteredTaskRow, TaskBlobRow] | None:
        with self.db() as s:
            row = s.get(RegisteredTaskRow, task_id)
            if row is None:
                return None
            blob = s.get(TaskBlobRow, row.task_hash)
            assert blob is not None
            return row, blob

    # ------------------------------------------------------------- certificates

    def add_certificate(self, row: CertificateRow) -> None:
        with self.db() as s, s.begin():
            s.add(row)

    def latest_certificates(self, task_hashes: list[str]) -> dict[str, CertificateRow]:
        """The newest certificate that counts (see `CertificateRow.counts`) of each task hash that has one."""
        found: dict[str, CertificateRow] = {}
        with self.db() as s:
            for start in range(0, len(task_hashes), 500):
                chunk = task_hashes[start:start + 500]
                newest = (select(CertificateRow.task_hash, func.max(CertificateRow.seq).label("seq"))
                          .where(CertificateRow.task_hash.in_(chunk), CertificateRow.counts)
                          .group_by(CertificateRow.task_hash).subquery())
                stmt = select(CertificateRow).join(newest, CertificateRow.seq == newest.c.seq)
                found.update((row.task_hash, row) for row in s.scalars(stmt))
        return found

    def certificates(self, task_hash: str, limit: int = 50) -> list[CertificateRow]:
        """A task's certificates, newest first."""
        with self.db() as s:
            return list(s.scalars(select(CertificateRow).where(CertificateRow.task_hash == task_hash)
                                  .order_by(CertificateRow.seq.desc()).limit(limit)))

    def task_view(self, task_hash: str) -> tuple[str | None, str, dict[str, Any]] | None:
        """(registered id or None, verifier, public view) of a task, from its newest record."""
        with self.db() as s:
            row = s.execute(select(RecordRow.task_id, RecordRow.verifier, RecordRow.task_public)
                            .where(RecordRow.task_hash == task_hash).order_by(RecordRow.seq.desc()).limit(1)).first()
            if row is not None:
                return row.task_id, row.verifier, row.task_public
            registered = s.scalar(select(RegisteredTaskRow).where(RegisteredTaskRow.task_hash == task_hash).limit(1))
        return (registered.task_id, registered.verifier, {}) if registered is not None else None

    def is_certified(self, task_hash: str) -> bool:
        row = self.latest_certificates([task_hash]).get(task_hash)
        return row is not None and row.status == "certified"

    def add_verifier_diff(self, row: VerifierDiffRow) -> None:
        with self.db() as s, s.begin():
            s.add(row)

    def latest_verifier_diff(self, verifier: str) -> VerifierDiffRow | None:
        with self.db() as s:
            return s.scalar(select(VerifierDiffRow).where(VerifierDiffRow.verifier == verifier)
                            .order_by(VerifierDiffRow.seq.desc()).limit(1))

    def sample_for_replay(self, verifier: str, per_verdict: int, since: datetime | None = None) -> list[RecordRow]:
        """Up to `per_verdict` records of each verdict (the newest), responses retained, errors left out."""
        out: list[RecordRow] = []
        with self.db() as s:
            verdicts = s.scalars(select(RecordRow.verdict).where(RecordRow.verifier == verifier).distinct())
            for verdict in sorted(v for v in verdicts if v != "error"):
                stmt = select(RecordRow).where(RecordRow.verifier == verifier, RecordRow.verdict == verdict,
                                               RecordRow.response.is_not(None))
                if since is not None:
                    stmt = stmt.where(RecordRow.created_at >= since)
                out += s.scalars(stmt.order_by(RecordRow.seq.desc()).limit(per_verdict))
        return out

    # ---------------------------------------------------------------- ui sessions

    def add_ui_session(self, row: UiSessionRow) -> None:
        with self.db() as s, s.begin():
            s.add(row)

    def ui_session(self, token_hash: str) -> UiSessionRow | None:
        with self.db() as s:
            row = s.get(UiSessionRow, token_hash)
        if row is None or _aware(row.expires_at) <= _now():
            return None
        return row

    def drop_ui_session(self, token_hash: str) -> None:
        with self.db() as s, s.begin():
            s.execute(delete(UiSessionRow).where(UiSessionRow.token_hash == token_hash))

    # ------------------------------------------------------------------- labels

    def add_label(self, label: LabelRow) -> None:
        self.chains.write("labels", [label], lambda s: s.add(label))

    def labels(self, record_ids: list[str] | None = None, verifier: str | None = None) -> list[LabelRow]:
        """Labels in write order (all of a record's history), for some records or one verifier."""
        stmt = select(LabelRow).order_by(LabelRow.seq)
        if verifier is not None:
            stmt = stmt.join(RecordRow, RecordRow.id == LabelRow.record_id).where(RecordRow.verifier == verifier)
        with self.db() as s:
            if record_ids is None:
                return list(s.scalars(stmt))
            out: list[LabelRow] = []
            for start in range(0, len(record_ids), 500):
                chunk = record_ids[start:start + 500]
                out += s.scalars(stmt.where(LabelRow.record_id.in_(chunk)))
            return sorted(out, key=lambda row: row.seq)

    def labelled_record_ids(self) -> set[str]:
        with self.db() as s:
            return set(s.scalars(select(LabelRow.record_id).distinct()))

    # -------------------------------------------------------------------- evals

    def add_eval(self, row: EvalRow) -> None:
        self.chains.write("evals", [row], lambda s: s.add(row))

    def eval_run(self, eval_id: str) -> EvalRow | None:
        with self.db() as s:
            return s.get(EvalRow, eval_id)

    def eval_runs(self, limit: int = 200) -> list[EvalRow]:
        """The latest evaluation runs, newest first."""
        with self.db() as s:
            return list(s.scalars(select(EvalRow).order_by(EvalRow.created_at.desc()).limit(limit)))

    # --------------------------------------------------------------------- keys

    def add_key(self, key_id: str, secret_hash: str, scopes: list[str], name: str | None) -> None:
        with self.db() as s, s.begin():
            s.add(ApiKeyRow(key_id=key_id, secret_hash=secret_hash, scopes=",".join(scopes), name=name))

    def key(self, key_id: str) -> ApiKeyRow | None:
        """The key, with `revoked` set when it was ever revoked (column or revocation row).
        One Core query on every authenticated request (a revocation in another process counts at once)."""
        with self.engine.connect() as conn:
            found = conn.execute(_KEY_QUERY, {"key_id": key_id}).first()
        if found is None:
            return None
        values = found._asdict()
        values["revoked"] = bool(values.pop("revocation") or values["revoked"])
        return ApiKeyRow(**values)

    # -------------------------------------------------------------- idempotency

    def idempotent_response(self, caller_key_id: str, key: str, request_hash: str) -> dict[str, Any] | None:
        with self.db() as s:
            row = s.scalar(select(IdempotencyRow).where(IdempotencyRow.caller_key_id == caller_key_id,
                                                        IdempotencyRow.key == key))
        if row is None:
            return None
        if row.request_hash != request_hash:
            raise IdempotencyConflict(f"Idempotency-Key {key!r} was already used for a different request")
        return row.response


# Built once: constructing a statement costs more than running it (service/auth.py runs it per request).
_KEY_QUERY = (select(ApiKeyRow.__table__,
                     exists().where(KeyRevocationRow.key_id == ApiKeyRow.key_id).label("revocation"))
              .where(ApiKeyRow.key_id == bindparam("key_id")))


def add_blobs(db: Session | Connection, blobs: list[TaskBlobRow]) -> None:
    """Store task contents by hash (in a unit of work or on a Core connection); one already
    stored (maybe by a concurrent request this instant) is left as it is, so storing a task
    is idempotent."""
    values = [{"task_hash": b.task_hash, "verifier": b.verifier, "task": b.task}
              for b in {b.task_hash: b for b in blobs}.values()]
    if not values:
        return
    dialect = (db.dialect if isinstance(db, Connection) else db.get_bind().dialect).name
    if dialect in _INSERT_IGNORING_DUPLICATES:
        statement = _BLOB_INSERTS.get(dialect)
        if statement is None:  # built once: an executemany of it is compiled once, too
            statement = _BLOB_INSERTS[dialect] = (_INSERT_IGNORING_DUPLICATES[dialect](TaskBlobRow.__table__)
                                                  .on_conflict_do_nothing(index_elements=["task_hash"]))
        db.execute(statement, values)
        return
    table = TaskBlobRow.__table__
    for value in values:  # other databases: check first (not race-free)
        if db.execute(select(table.c.task_hash).where(table.c.task_hash == value["task_hash"])).first() is None:
            db.execute(table.insert().values(value))


_BLOB_INSERTS: dict[str, Any] = {}
_INSERT_IGNORING_DUPLICATES = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; they were written in UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def is_integrity_error(exc: BaseException) -> bool:
    return isinstance(exc, IntegrityError)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
