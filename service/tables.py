"""The audit store's tables (SQLAlchemy 2 models) and the one insert that several writers share.

The schema is owned by the Alembic revisions in service/migrations: a change to these
models needs a revision there (tests/test_migrations.py compares the two). The store
(service/store.py), the chain writer (service/audit_chain.py) and the group-commit writer
(service/record_writer.py) all import these; none of them imports another for a table.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

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
    false,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from service.nul_text import NulSafeText


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


# The records that carry at least one flag (partial index; AuditStore.has_flag repeats it).
FLAGGED = "json_array_length(flags) > 0"
# The records of training runs (partial indexes: a deployment without runs pays nothing).
RUN_RECORDS = "run_id IS NOT NULL"
# What a run's reward index holds besides its keys (revision 0022): the filters that are not rare
# within a run (so a page's keys are read from the index alone, however far it walks), and the
# time that reads the page's rows by key.
RUN_REWARD_INCLUDED = ("verdict", "verifier", "caller_key_id", "created_at")
# What the evaluation records' index holds besides (eval_id, seq): every other column a records
# page filters or sorts by (revision 0020; 0014 held the first three).
EVAL_INCLUDED = ("created_at", "duration_ms", "reward", "verifier", "verdict", "caller_key_id", "flags", "task_id",
                 "task_hash", "group_id", "run_id", "run_step")
# What the flagged records' indexes hold besides their keys (revision 0021; 0014's held the first
# seven): every column a records page filters or sorts by, less each index's own key columns.
FLAGGED_INCLUDED = ("verifier", "verdict", "caller_key_id", "created_at", "duration_ms", "reward", "flags", "task_id",
                    "task_hash", "group_id", "eval_id", "run_id", "run_step")


def flagged_included(*keys: str) -> list[str]:
    """FLAGGED_INCLUDED less an index's key columns (a column is either a key or included)."""
    return [c for c in FLAGGED_INCLUDED if c not in keys]


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
        # The viewer's reward and latency sorts within a verifier (revision 0013): latency and
        # reward depend on the verifier, so walking the sort's own index skips millions of rows.
        Index("ix_records_verifier_duration_seq", "verifier", "duration_ms", "seq"),
        Index("ix_records_verifier_reward_seq", "verifier", "reward", "seq"),
        # Flagged records only (revision 0014): a flag filter repeats this predicate
        # (AuditStore.has_flag), so it walks the few flagged records, from the index alone.
        # Revision 0021: it holds every column a records page filters by, and two more walk the
        # flagged records by reward and by latency, so a flag filter with a key, run, task or group
        # filter, in any sort, reads its page's keys from an index alone and stops at the page.
        Index("ix_records_flagged_seq", "seq", postgresql_where=text(FLAGGED), sqlite_where=text(FLAGGED),
              postgresql_include=flagged_included("seq")),
        Index("ix_records_flagged_reward_seq", "reward", "seq", postgresql_where=text(FLAGGED),
              sqlite_where=text(FLAGGED), postgresql_include=flagged_included("reward", "seq")),
        Index("ix_records_flagged_duration_seq", "duration_ms", "seq", postgresql_where=text(FLAGGED),
              sqlite_where=text(FLAGGED), postgresql_include=flagged_included("duration_ms", "seq")),
        # Records of evaluation runs (revision 0014): an eval page's keys from this index alone,
        # with any other filter of the records page (its columns included by revision 0020).
        Index("ix_records_eval_seq", "eval_id", "seq", postgresql_where=text("eval_id IS NOT NULL"),
              sqlite_where=text("eval_id IS NOT NULL"), postgresql_include=list(EVAL_INCLUDED)),
        # A run's records by reward (revision 0022): an auditor's first look at a training run, its
        # best- and worst-rewarded records, and a verdict's records of a run by reward (the verdict
        # is correlated with the reward, so walking the reward's index over every record read
        # millions of rows to find the few it wanted: 5-11 s at 10M records). No such index by
        # latency: latency follows the verifier, and with one the planner walked a run's latency
        # entries past every other verifier's (docs/operations.md, revision 0022).
        Index("ix_records_run_reward_seq", "run_id", "reward", "seq", postgresql_where=text(RUN_RECORDS),
              sqlite_where=text(RUN_RECORDS), postgresql_include=list(RUN_REWARD_INCLUDED)),
        # A run's held-out records (revision 0016): the run page reads them without walking the
        # run's training records (~99% of its records).
        Index("ix_records_run_eval", "run_id", "eval_id", postgresql_where=text("eval_id IS NOT NULL"),
              sqlite_where=text("eval_id IS NOT NULL"), postgresql_include=["seq"]),
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
    response: Mapped[str | None] = mapped_column(NulSafeText)  # U+0000 kept on Postgres too (service/nul_text.py)
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
    note: Mapped[str | None] = mapped_column(NulSafeText)


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
    # The review queue's strata per hour (kind 'stratum' / 'flag_review', one key), read from the
    # index alone (revision 0019): a scan of every kind was ~50 ms at 10M records.
    __table_args__ = (Index("ix_rollup_hours_kind_key", "kind", "key", "verifier", "hour", "n"),)
    hour: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # epoch hours (UTC)
    verifier: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger)


class RollupQuarterRow(Base):
    """`rollup_hours`' counts per quarter hour (revision 0015); kept by the Postgres insert trigger,
    on SQLite by the record writer (revision 0017)."""

    __tablename__ = "rollup_quarters"
    quarter: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # epoch seconds // 900 (UTC)
    verifier: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger)


class RollupRunStepRow(Base):
    """Per training run and step (revision 0016, Postgres): its stored records, how many are
    held-out, the highest seq written there; written by the trigger on records (SQLite: empty)."""

    __tablename__ = "rollup_run_steps"
    run_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    step: Mapped[int] = mapped_column(Integer, primary_key=True)
    records: Mapped[int] = mapped_column(BigInteger)
    evals: Mapped[int] = mapped_column(BigInteger)
    last_seq: Mapped[int] = mapped_column(BigInteger)


class RunStepFiguresRow(Base):
    """A training step's figures as the run page shows them (revision 0018): `RunStep` as JSON
    (`figures`; null when the step holds held-out records only), stored by the read that computed
    them with the step's change mark then — its stored records and highest seq
    (`rollup_run_steps`, or the records' index on SQLite) — and the figures' `version`. Valid
    only while the mark and version are unchanged: a write or an archive changes the mark."""

    __tablename__ = "run_step_figures"
    run_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    step: Mapped[int] = mapped_column(Integer, primary_key=True)
    records: Mapped[int] = mapped_column(BigInteger)
    last_seq: Mapped[int] = mapped_column(BigInteger)
    version: Mapped[int] = mapped_column(Integer)
    figures: Mapped[str | None] = mapped_column(Text, nullable=True)


class RunHeldOutFiguresRow(Base):
    """A training run's held-out rows (revision 0019): per evaluation, task and answer of the run's
    held-out records, judged / correct / reward sum, and each evaluation's records, as JSON
    (`figures`), stored by the read that computed them with the change mark then — the run's
    held-out records and their highest seq (`ix_records_run_eval`) — and the rows' `version`.
    Valid only while the mark and version are unchanged."""

    __tablename__ = "run_held_out_figures"
    run_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    records: Mapped[int] = mapped_column(BigInteger)
    last_seq: Mapped[int] = mapped_column(BigInteger)
    version: Mapped[int] = mapped_column(Integer)
    figures: Mapped[str] = mapped_column(Text)


class BootstrapIntervalRow(Base):
    """A bootstrap interval of the `reward_up_heldout_down` rule by the digest of its inputs
    (revision 0019; service/bootstrap_store.py): seeded, so a pure function of them."""

    __tablename__ = "bootstrap_intervals"
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    lo: Mapped[float] = mapped_column(Float)
    hi: Mapped[float] = mapped_column(Float)


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


class RollupTaskHourRow(Base):
    """The tallies of RollupTaskRow per UTC hour (revision 0013): task statistics over a time
    window add up whole hours; written by the trigger on records."""

    __tablename__ = "rollup_task_hours"
    hour: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # epoch hours (UTC)
    task_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(200), primary_key=True)  # '' for an inline task
    verifier: Mapped[str] = mapped_column(String(64))
    first_seq: Mapped[int] = mapped_column(BigInteger)
    attempts: Mapped[int] = mapped_column(BigInteger)
    judged: Mapped[int] = mapped_column(BigInteger)
    correct_sum: Mapped[float] = mapped_column(Float)
    tokens_n: Mapped[int] = mapped_column(BigInteger)
    tokens_sum: Mapped[int] = mapped_column(BigInteger)
    groups: Mapped[int] = mapped_column(BigInteger)
    zv_groups: Mapped[int] = mapped_column(BigInteger)


class RollupSplitGroupRow(Base):
    """Per group whose rows lie in more than one UTC hour, its tallies per hour (revision 0019):
    task statistics over a time window count such a group once (service/task_stats.py);
    written by the records' insert path (service/audit_rollups.py)."""

    __tablename__ = "rollup_split_groups"
    __table_args__ = (Index("ix_rollup_split_groups_hour", "hour"),)
    group_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    caller_key_id: Mapped[str] = mapped_column(String(64), primary_key=True)  # '' without a key
    task_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(200), primary_key=True)  # '' for an inline task
    hour: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # epoch hours (UTC)
    verifier: Mapped[str] = mapped_column(String(64))
    judged: Mapped[int] = mapped_column(BigInteger)
    cor_min: Mapped[float | None] = mapped_column(Float)
    cor_max: Mapped[float | None] = mapped_column(Float)


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


class LabelledRecordRow(Base):
    """A labelled record's fields that the label filter and the review queue read (revision
    0020): one row per record with at least one label, written by the labels' insert trigger.
    Records never change, so a row stays true; archiving a record's day removes its row.
    Labels are few, so the label pages and the review queue's labelled counts read this small
    table instead of one record per label from the day partitions (~0.2 ms each from disk)."""

    __tablename__ = "labelled_records"
    record_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    verifier: Mapped[str] = mapped_column(String(64))
    verdict: Mapped[str] = mapped_column(String(32))
    reward: Mapped[float] = mapped_column(Float)
    duration_ms: Mapped[float] = mapped_column(Float)
    flags: Mapped[list] = mapped_column(JSON)
    caller_key_id: Mapped[str | None] = mapped_column(String(64))
    task_id: Mapped[str | None] = mapped_column(String(200))
    task_hash: Mapped[str] = mapped_column(String(64))
    group_id: Mapped[str | None] = mapped_column(String(64))
    eval_id: Mapped[str | None] = mapped_column(String(32))
    run_id: Mapped[str | None] = mapped_column(String(200))
    run_step: Mapped[int | None] = mapped_column(Integer)


LABELLED_COLUMNS = ("seq", "created_at", "verifier", "verdict", "reward", "duration_ms", "flags", "caller_key_id",
                    "task_id", "task_hash", "group_id", "eval_id", "run_id", "run_step")


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
