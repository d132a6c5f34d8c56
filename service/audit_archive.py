"""Retention (issue 27): `assay audit archive --before DATE` moves whole days of records out of
the database into compressed JSON Lines, and removes them only once the file is proven whole.

What it does, as the schema owner (the service's role may never delete):
1. Picks the day partitions that end on or before DATE (Postgres; records in
   `records_default` are never archived, and reported).
2. Writes `records-<first day>-<last day>-<id>.jsonl.gz` in the output directory, oldest
   record first: each line is the record as `GET /v1/records/export` writes it (RecordOut),
   plus `"stored"`: every other stored column (chain fields, task digest, submission,
   group statistics, run) verbatim, so the file alone rebuilds each row and its hash.
   Beside it, `<file>.manifest.json`: counts, the file's SHA-256, first and last seq, and
   per chain its first and last archived (index, hash).
3. Verifies before removing anything: re-reads the file; its SHA-256, its record count and a
   digest over (seq, chain hash or id) of every record must equal what the database holds
   for those partitions; each chained row must hash to its stored hash and link to the one
   before it in its chain (the first to the previous archive's last row of that chain).
4. In one transaction: records the archive in `audit_archives` (append-only; with each
   chain's last archived index and hash), drops those days' keys from `record_keys`, and
   detaches and drops the partitions. The rollups keep counting the archived records, except
   `rollup_run_steps` (the runs list and run pages count the stored records): their records
   are subtracted there.

The chain across the boundary: the first record left in a chain links (`chain_prev`) to the
last archived one, whose index and hash `audit_archives` keeps; `assay audit verify` starts
each chain there, and writers continue a chain whose rows are all archived from there too.
`assay audit verify-archive FILE` checks a file on its own (digest, count, hashes, links).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from service import audit_partitions, audit_rollups, labelled_records
from service.audit_chain import GENESIS, archived_tips, row_hash
from service.record_line import export_line
from service.store import AuditStore
from service.tables import ArchiveRow, RecordRow

# Columns the export line already carries verbatim (under these names).
IN_EXPORT = {"task_public": "task", "response": "response", "evidence": "evidence", "feedback": "feedback"}
STORED = [c for c in RecordRow.__table__.columns if c.key not in IN_EXPORT]
PAGE = 5000


class ArchiveError(RuntimeError):
    """The archive could not be written or does not match the database: nothing was removed."""


@dataclass
class ArchiveResult:
    path: Path | None
    records: int
    partitions: list[str]
    removed: bool
    left_in_default: int = 0
    manifest: dict[str, Any] = field(default_factory=dict)


def _stored(row: Any) -> dict[str, Any]:
    out = {}
    for column in STORED:
        value = getattr(row, column.key)
        out[column.key] = value.isoformat() if isinstance(value, datetime) else value
    return out


def row_from_line(line: dict[str, Any]) -> RecordRow:
    """The stored row an archive line holds."""
    values = dict(line["stored"])
    for column, name in IN_EXPORT.items():
        values[column] = line.get(name)
    for column in STORED:
        if isinstance(column.type, sa.DateTime) and isinstance(values.get(column.key), str):
            values[column.key] = datetime.fromisoformat(values[column.key])
    return RecordRow(**values)


def read_archive(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for text in f:
            if text.strip():
                yield json.loads(text)


def _digest_rows(pairs: Iterator[tuple[int, str]]) -> str:
    h = hashlib.sha256()
    for seq, mark in pairs:
        h.update(f"{seq}:{mark}\n".encode())
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_file(path: Path, tips: dict[str, tuple[int, str]] | None = None) -> dict[str, Any]:
    """Re-read an archive: its count, the digest over (seq, chain hash or id), each chained row's
    hash and its link to the row before it. Raises ArchiveError at the first fault."""
    tips = dict(tips or {})
    count, pairs, chains = 0, [], {}
    for line in read_archive(path):
        row = row_from_line(line)
        count += 1
        pairs.append((row.seq, row.chain_hash or row.id))
        if row.chain_id is None:
            continue
        if row_hash("records", row, row.chain_prev or "") != row.chain_hash:
            raise ArchiveError(f"record {row.id} in {path} does not hash to its stored chain hash")
        index, prev = tips.get(row.chain_id, (-1, GENESIS))
        if (row.chain_id in tips or row.chain_index == 0) and (row.chain_index != index + 1
                                                                or row.chain_prev != prev):
            raise ArchiveError(f"record {row.id} in {path} does not link to the row before it in chain "
                                   f"{row.chain_id} (index {row.chain_index})")
        tips[row.chain_id] = (row.chain_index, row.chain_hash)
        first = chains.setdefault(row.chain_id, [[row.chain_index, row.chain_hash], None])
        first[1] = [row.chain_index, row.chain_hash]
    return {"records": count, "digest": _digest_rows(iter(sorted(pairs))), "chains": chains}


def archive(store: AuditStore, before: date, out_dir: Path, remove: bool = True) -> ArchiveResult:
    """Archive the whole days before `before`; see the module docstring."""
    engine = store.engine
    with engine.connect() as conn:
        if not audit_partitions.is_partitioned(conn):
            raise ArchiveError("archiving removes whole day partitions: it needs the partitioned Postgres records "
                               "(revision 0012); on SQLite export with `assay audit export` and keep the file")
        days = [(d, n) for d, n in audit_partitions.day_partitions(conn) if d < before]
        low = datetime(before.year, before.month, before.day, tzinfo=UTC)
        left = int(conn.execute(sa.text(f"SELECT count(*) FROM {audit_partitions.DEFAULT_PARTITION} "
                                        "WHERE created_at < :low"), {"low": low}).scalar() or 0)
        tips = archived_tips(conn)
    names = [n for _, n in days]
    if not days:
        return ArchiveResult(None, 0, [], False, left)
    out_dir.mkdir(parents=True, exist_ok=True)
    archive_id = uuid.uuid4().hex
    path = out_dir / f"records-{days[0][0]:%Y%m%d}-{days[-1][0]:%Y%m%d}-{archive_id[:8]}.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as f:
        for name in names:
            after = None
            while True:
                where = f"WHERE seq > {int(after)}" if after is not None else ""
                columns = ", ".join(c.key for c in RecordRow.__table__.columns)
                with engine.connect() as conn:
                    rows = conn.execute(sa.text(f"SELECT {columns} FROM {name} {where} ORDER BY seq LIMIT {PAGE}")
                                        ).all()
                if not rows:
                    break
                for r in rows:
                    line = json.loads(export_line(r))
                    line["stored"] = _stored(r)
                    f.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
                after = rows[-1].seq
    # Verify against the database before anything is removed.
    with engine.connect() as conn:
        expected = 0
        pairs: list[tuple[int, str]] = []
        for name in names:
            expected += int(conn.execute(sa.text(f"SELECT count(*) FROM {name}")).scalar() or 0)
            pairs += [(int(s), m) for s, m in conn.execute(
                sa.text(f"SELECT seq, coalesce(chain_hash, id) FROM {name}"))]
    checked = check_file(path, tips)
    if checked["records"] != expected or checked["digest"] != _digest_rows(iter(sorted(pairs))):
        raise ArchiveError(f"{path} holds {checked['records']} records, the partitions {expected}, or their "
                           "digests differ: nothing removed")
    sha = file_sha256(path)
    seqs = [s for s, _ in pairs]
    manifest = {"id": archive_id, "before": before.isoformat(), "partitions": names, "records": expected,
                "sha256": sha, "digest": checked["digest"], "first_seq": min(seqs, default=None),
                "last_seq": max(seqs, default=None), "chains": checked["chains"], "left_in_default": left}
    Path(f"{path}.manifest.json").write_text(json.dumps(manifest, indent=1))
    if file_sha256(path) != sha:
        raise ArchiveError(f"{path} changed while it was verified: nothing removed")
    if not remove:
        return ArchiveResult(path, expected, names, False, left, manifest)
    with engine.begin() as conn:
        conn.execute(sa.insert(ArchiveRow).values(
            id=archive_id, created_at=datetime.now(UTC), before=low, path=str(path.resolve()), sha256=sha,
            records=expected, manifest=manifest))
        for name in names:
            conn.execute(sa.text(f"DELETE FROM record_keys WHERE record_id IN (SELECT id FROM {name})"))
            conn.execute(sa.text(labelled_records.archived_statement(name)))
            conn.execute(sa.text(audit_rollups.archived_run_steps_statement(name)))
            conn.execute(sa.text(f"ALTER TABLE records DETACH PARTITION {name}"))
            conn.execute(sa.text(f"DROP TABLE {name}"))
        conn.execute(sa.text(audit_rollups.ARCHIVED_RUN_STEPS_EMPTY))
    return ArchiveResult(path, expected, names, True, left, manifest)
