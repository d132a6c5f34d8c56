"""Hash chains over the append-only tables (records, labels, evals), and their signed heads.

Every row carries `chain_id`, `chain_index`, `chain_prev` (the hash of the row before it in
its chain) and `chain_hash` = SHA-256 of the canonical JSON of {"prev", "table", "row"},
where "row" is every column but the autoincrement key and the hash itself, NULLs left out
(so a nullable column added later leaves old hashes valid). A chain grows in insertion
order; each writer process holds `lanes` chains per table (ids `<chain id>.<lane>`), one
writer per lane at a time, so concurrent requests do not queue behind one chain.
Replicas sharing one database use different chain ids (the host name by default); if
two writers ever share one, the unique index on (chain_id, chain_index) makes the later
insert fail and the writer re-reads the head and links again.

Heads are signed with the deployment's Ed25519 key (service/signing.py) into `audit_heads`:
at a lane's first write in a process, then every `sign_every` rows or once
`sign_interval_s` passed since the last signed head (checked at each write), and at
shutdown. The signed heads form a chain of their own (`prev_hash`, `position`).
`service/audit_verify.py` checks all of it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Float, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.signing import Signer, utc_iso
from service.store import Base, ChainHeadRow, EvalRow, LabelRow, RecordRow, TaskBlobRow
from trainer_client.receipts import canonical_json

log = logging.getLogger(__name__)

GENESIS = "0" * 64
# Columns a row's hash leaves out: the database assigns `seq`; `chain_hash` is the hash itself.
UNHASHED = frozenset({"seq", "chain_hash"})
CHAINED_TABLES: dict[str, type[Base]] = {"records": RecordRow, "labels": LabelRow, "evals": EvalRow}
# A writer that lost its chain to another writer links again this many times.
LINK_ATTEMPTS = 5


def _plain(value: Any, column_type: Any) -> Any:
    """A column value as the same JSON whether it was just built or read back from either database."""
    if isinstance(value, datetime):
        return utc_iso(value)
    if isinstance(column_type, JSON):
        return json.loads(json.dumps(value, default=str))
    if isinstance(column_type, Float) and value is not None:
        number = float(value) + 0.0  # -0.0 and 0.0 alike (SQLite keeps no sign on a zero)
        return number if math.isfinite(number) else repr(number)
    return value


def row_hash(table: str, row: Base, prev: str) -> str:
    columns = {}
    for column in row.__table__.columns:
        if column.key in UNHASHED:
            continue
        value = getattr(row, column.key)
        if value is None:
            continue
        columns[column.key] = _plain(value, column.type)
    return hashlib.sha256(canonical_json({"prev": prev, "row": columns, "table": table})).hexdigest()


def task_digest(blob: TaskBlobRow) -> str:
    """What a record remembers of its task blob: SHA-256 of {"task", "verifier"} as canonical JSON."""
    return hashlib.sha256(canonical_json({"task": _plain(blob.task, JSON()), "verifier": blob.verifier})).hexdigest()


def head_payload(head: ChainHeadRow) -> dict[str, Any]:
    """What a head's signature covers (and its `hash` digests)."""
    return {"position": head.position, "time": utc_iso(head.created_at), "table": head.chain_table,
            "chain_id": head.chain_id, "chain_index": head.chain_index, "head": head.head_hash,
            "prev": head.prev_hash, "key_id": head.key_id}


def head_hash(head: ChainHeadRow) -> str:
    return hashlib.sha256(canonical_json(head_payload(head))).hexdigest()


def _defaults(row: Base) -> None:
    """Python-side column defaults, applied now: the hash must see what the database will hold."""
    for column in row.__table__.columns:
        if getattr(row, column.key) is None and column.default is not None and column.key not in UNHASHED:
            default = column.default
            if default.is_scalar:
                setattr(row, column.key, default.arg)
            elif default.is_callable:
                setattr(row, column.key, default.arg(None))


@dataclass
class Lane:
    table: str
    chain_id: str
    index: int | None = None  # the next row's index; None until read from the database
    prev: str = GENESIS
    unsigned: int = 0
    signed_at: float | None = None  # monotonic time of this process's last signed head of the lane

    def link(self, rows: list[Base]) -> None:
        assert self.index is not None
        index, prev = self.index, self.prev
        for row in rows:
            _defaults(row)
            row.chain_id, row.chain_index, row.chain_prev = self.chain_id, index, prev
            row.chain_hash = prev = row_hash(self.table, row, prev)
            index += 1

    def advance(self, rows: list[Base]) -> None:
        self.index = rows[-1].chain_index + 1
        self.prev = rows[-1].chain_hash
        self.unsigned += len(rows)


class ChainWriter:
    def __init__(self, units_of_work: Callable[[], Session], signer: Signer | None = None, *,
                 chain_id: str | None = None, lanes: int = 4, sign_every: int = 256,
                 sign_interval_s: float = 10.0) -> None:
        self.db = units_of_work
        self.signer = signer
        self.sign_every, self.sign_interval_s = sign_every, sign_interval_s
        base = (chain_id or socket.gethostname() or "assay")[:56]
        self._lanes: dict[str, queue.Queue[Lane]] = {}
        for table in CHAINED_TABLES:
            self._lanes[table] = queue.Queue()
            for lane in range(lanes if table == "records" else 1):
                self._lanes[table].put(Lane(table, f"{base}.{lane}"))
        self._all = [lane for q in self._lanes.values() for lane in list(q.queue)]
        self._heads_lock = threading.Lock()
        self._heads_next: tuple[int, str] | None = None  # position and prev hash of the next signed head

    @contextmanager
    def _lane(self, table: str) -> Iterator[Lane]:
        lane = self._lanes[table].get()
        try:
            yield lane
        finally:
            self._lanes[table].put(lane)

    def write(self, table: str, rows: list[Base], write: Callable[[Session], None]) -> None:
        """Link `rows` into a chain of `table` and run `write` (which adds them, and whatever else
        belongs to the same transaction) in one transaction."""
        if not rows:
            with self.db() as s, s.begin():
                write(s)
            return
        with self._lane(table) as lane:
            for attempt in range(LINK_ATTEMPTS):
                if lane.index is None:
                    lane.index, lane.prev = self._read_head(lane)
                lane.link(rows)
                try:
                    with self.db() as s, s.begin():
                        write(s)
                except IntegrityError:
                    # Another writer on this chain id? Then link again after its rows.
                    head = self._read_head(lane)
                    if head == (lane.index, lane.prev) or attempt + 1 == LINK_ATTEMPTS:
                        raise
                    lane.index, lane.prev = head
                    for row in rows:
                        if "seq" in row.__table__.columns:
                            row.seq = None  # type: ignore[attr-defined]
                    continue
                lane.advance(rows)
                break
            self._sign_if_due(lane)

    def _read_head(self, lane: Lane) -> tuple[int, str]:
        model = CHAINED_TABLES[lane.table]
        with self.db() as s:
            last = s.execute(select(model.chain_index, model.chain_hash)  # type: ignore[attr-defined]
                             .where(model.chain_id == lane.chain_id)  # type: ignore[attr-defined]
                             .order_by(model.chain_index.desc()).limit(1)).first()  # type: ignore[attr-defined]
        return (0, GENESIS) if last is None else (last[0] + 1, last[1])

    # ------------------------------------------------------------- signed heads

    def _sign_if_due(self, lane: Lane) -> None:
        if self.signer is None or lane.unsigned == 0:
            return
        now = time.monotonic()
        if lane.signed_at is not None and lane.unsigned < self.sign_every \
                and now - lane.signed_at < self.sign_interval_s:
            return
        try:
            self._sign(lane)
        except Exception:  # the records are written; the next write signs again
            log.exception("could not sign the head of chain %s/%s", lane.table, lane.chain_id)
        lane.signed_at = now

    def _sign(self, lane: Lane) -> None:
        assert self.signer is not None and lane.index is not None
        with self._heads_lock:
            for attempt in range(LINK_ATTEMPTS):
                if self._heads_next is None:
                    self._heads_next = self._read_heads_head()
                position, prev = self._heads_next
                head = ChainHeadRow(position=position, created_at=datetime.now(UTC), chain_table=lane.table,
                                    chain_id=lane.chain_id, chain_index=lane.index - 1, head_hash=lane.prev,
                                    prev_hash=prev, key_id=self.signer.key_id)
                head.hash = head_hash(head)
                head.signature = self.signer.sign(head_payload(head))
                try:
                    with self.db() as s, s.begin():
                        s.add(head)
                except IntegrityError:
                    self._heads_next = None  # another writer signed first: read its head
                    if attempt + 1 == LINK_ATTEMPTS:
                        raise
                    continue
                self._heads_next = (position + 1, head.hash)
                lane.unsigned = 0
                return

    def _read_heads_head(self) -> tuple[int, str]:
        with self.db() as s:
            last = s.execute(select(ChainHeadRow.position, ChainHeadRow.hash)
                             .order_by(ChainHeadRow.position.desc()).limit(1)).first()
        return (0, GENESIS) if last is None else (last[0] + 1, last[1])

    def sign_all(self) -> None:
        """Sign every lane's unsigned rows now (at shutdown)."""
        if self.signer is None:
            return
        for table, lanes in self._lanes.items():
            for _ in range(lanes.qsize()):
                with self._lane(table) as lane:
                    if lane.unsigned:
                        try:
                            self._sign(lane)
                        except Exception:
                            log.exception("could not sign the head of chain %s/%s", lane.table, lane.chain_id)
