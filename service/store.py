"""The audit store (SQLAlchemy 2): append-only records, API keys, tasks, idempotency.

The schema is owned by the Alembic revisions in service/migrations: a change to these
models needs a revision there (tests/test_migrations.py compares the two).

SQLite (WAL, synchronous=FULL) by default, Postgres by URL. Nothing here updates or
deletes a record: the store offers no method that could.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    and_,
    cast,
    create_engine,
    delete,
    event,
    exists,
    func,
    literal_column,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql.elements import ColumnElement

from service import migrations
from service.audit_rollups import HOUR
from service.errors import IdempotencyConflict, TaskConflict
from service.key_reads import KEY_QUERY, LoopKeyReader
from service.tables import (
    ApiKeyRow,
    CertificateRow,
    EvalRow,
    IdempotencyRow,
    LabelRow,
    RecordRow,
    RegisteredTaskRow,
    RollupHourRow,
    TaskBlobRow,
    UiSessionRow,
    VerifierDiffRow,
    add_blobs,
)

if TYPE_CHECKING:
    from service.signing import Signer


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
            # A plan for the values at hand: a generic plan of a statement psycopg prepared
            # could not prune the day partitions nor see that a filter value is rare.
            connect_args["options"] = "-c jit=off -c plan_cache_mode=force_custom_plan"
        # A SQLite file has no server to drop a pooled connection: no ping before each use (a
        # query of its own on every authenticated request and every commit).
        self.engine = create_engine(url, pool_pre_ping=not url.startswith("sqlite"), connect_args=connect_args)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        # A new database is created at head; one behind head is refused (`assay db upgrade`).
        migrations.prepare(self.engine)
        self._units_of_work = sessionmaker(self.engine, expire_on_commit=False)
        self.loop_keys = LoopKeyReader.for_url(self.engine.url)  # the event loop's key reads (service/auth.py)
        self.signer = signer
        self.chains = ChainWriter(self._units_of_work, signer, **chain_options)
        from service.record_writer import RecordWriter
        self._digests: dict[tuple[str, str], str] = {}  # (verifier, task hash) -> task digest
        self.records_writer = RecordWriter(self.engine, self.chains, self._with_digests)
        if url.startswith("sqlite"):
            # The SQLite rollups may lag the records (service/batch_rollups.py): a statement of
            # this store's that reads them runs once they are caught up.
            event.listen(self.engine, "before_cursor_execute", self.records_writer.catch_up_before_read)

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
        if self.loop_keys is not None:
            self.loop_keys.close()
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
            if self.flag_absent(flag, verifier=verifier, since=since, until=until):
                return []
            stmt = stmt.where(self.has_flag(flag))
            if self.engine.dialect.name == "postgresql":
                # The page's keys from the flagged records' index alone (revision 0014), then
                # only the page's rows read (by primary key, one partition each).
                page = stmt.with_only_columns(RecordRow.seq, RecordRow.created_at).limit(limit).subquery()
                stmt = select(RecordRow).join(page, and_(RecordRow.seq == page.c.seq,
                                                         RecordRow.created_at == page.c.created_at))
                stmt = stmt.order_by(RecordRow.seq)
        with self.db() as s:
            return list(s.scalars(stmt.limit(limit)))

    def has_flag(self, flag: str) -> ColumnElement[bool]:
        """SQL condition: the record's JSON list of flags contains `flag`. It repeats the
        predicate of the flagged records' partial index (revision 0014), so that the database
        may walk only the flagged records."""
        flagged = func.json_array_length(RecordRow.flags) > literal_column("0")  # as written, not a parameter
        if self.engine.dialect.name == "postgresql":
            return and_(flagged, cast(RecordRow.flags, JSONB).contains([flag]))
        each = func.json_each(RecordRow.flags).table_valued("value")
        return and_(flagged, exists(select(1).select_from(each).where(each.c.value == flag)))

    def flag_absent(self, flag: str, *, verifier: str | None = None, since: datetime | None = None,
                    until: datetime | None = None) -> bool:
        """True when the hourly rollups hold no record with `flag` (of `verifier`) in the hours
        the window touches: a read filtered by it is empty, known without the records. The
        rollups count every record ever written, archived ones too, and a read that names them
        catches them up first (SQLite), so they never hold fewer than the records; an hour they
        count that lies partly outside the window only sends the read to the records. Without
        this, a flag its verifier never has walked every flagged record of every day partition
        (10M: 175-325 ms)."""
        stmt = select(RollupHourRow.hour).where(RollupHourRow.kind == "flag", RollupHourRow.key == flag,
                                                RollupHourRow.n > 0)
        with self.db() as s:
            return s.execute(in_hours(stmt, verifier, since, until).limit(1)).first() is None

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
        if row is None or _aware(row.expires_at) <= datetime.now(UTC):
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
            found = conn.execute(KEY_QUERY, {"key_id": key_id}).first()
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


def in_hours(stmt: Any, verifier: str | None, since: datetime | None, until: datetime | None) -> Any:
    """`stmt` over `rollup_hours`: the rows of `verifier` in the hours [since, until] touches."""
    if verifier:
        stmt = stmt.where(RollupHourRow.verifier == verifier)
    if since:
        stmt = stmt.where(RollupHourRow.hour >= math.floor(since.timestamp() / HOUR))
    if until:
        stmt = stmt.where(RollupHourRow.hour <= math.floor(until.timestamp() / HOUR))
    return stmt


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
