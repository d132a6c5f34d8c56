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
every `sign_every` rows of a lane, or at its first write once `sign_interval_s`
passed since its last signed head, and at shutdown (`AuditStore.close`). The signed
heads form a chain of their own (`prev_hash`, `position`).
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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Float, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from assay_rules.canonical import canonical_json
from service.signing import Signer, utc_iso
from service.tables import ArchiveRow, Base, ChainHeadRow, EvalRow, LabelRow, RecordRow, TaskBlobRow

log = logging.getLogger(__name__)

GENESIS = "0" * 64
# Columns a row's hash leaves out: the database assigns `seq`; `chain_hash` is the hash itself.
UNHASHED = frozenset({"seq", "chain_hash"})
CHAINED_TABLES: dict[str, type[Base]] = {"records": RecordRow, "labels": LabelRow, "evals": EvalRow}
# A writer that lost its chain to another writer links again this many times.
LINK_ATTEMPTS = 5


@dataclass(frozen=True)
class _Columns:
    """What hashing needs to know of a table's columns, worked out once."""

    plain: tuple[str, ...]
    floats: frozenset[str]
    times: frozenset[str]
    json: tuple[str, ...]
    defaults: tuple[tuple[str, Any, bool], ...]  # (name, value or callable, is callable)


_COLUMNS: dict[str, _Columns] = {}


def _columns(row: Base) -> _Columns:
    table = row.__table__
    found = _COLUMNS.get(table.name)
    if found is None:
        hashed = [c for c in table.columns if c.key not in UNHASHED]
        found = _COLUMNS[table.name] = _Columns(
            plain=tuple(c.key for c in hashed),
            floats=frozenset(c.key for c in hashed if isinstance(c.type, Float)),
            times=frozenset(c.key for c in hashed if isinstance(c.type, DateTime)),
            json=tuple(c.key for c in hashed if isinstance(c.type, JSON)),
            defaults=tuple((c.key, c.default.arg, bool(c.default.is_callable)) for c in hashed
                           if c.default is not None and (c.default.is_scalar or c.default.is_callable)))
    return found


def _float(value: Any) -> Any:
    number = float(value) + 0.0  # -0.0 and 0.0 alike (SQLite keeps no sign on a zero)
    return number if math.isfinite(number) else repr(number)


def _dumps(value: Any) -> bytes:
    """The receipts' canonical JSON; a lone surrogate stored before the edge refused them (an old
    eval's family name) is hashed as its surrogate-escaped bytes rather than failing the write."""
    try:
        return canonical_json(value, allow_nan=True)
    except UnicodeEncodeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=True).encode("utf-8", "surrogatepass")


def row_hash(table: str, row: Base, prev: str) -> str:
    """The row's hash; a row about to be written must have been through `_as_stored` first."""
    spec = _columns(row)
    values = row.__dict__
    columns = {}
    for key in spec.plain:
        value = values.get(key)
        if value is None:
            continue
        if key in spec.times:
            value = utc_iso(value)
        elif key in spec.floats:
            value = _float(value)
        columns[key] = value
    return hashlib.sha256(_dumps({"prev": prev, "row": columns, "table": table})).hexdigest()


def task_digest(blob: TaskBlobRow) -> str:
    """What a record remembers of its task blob: SHA-256 of {"task", "verifier"} as canonical JSON."""
    task = json.loads(json.dumps(blob.task, default=str))  # as the JSON column gives it back
    return hashlib.sha256(_dumps({"task": task, "verifier": blob.verifier})).hexdigest()


def head_payload(head: ChainHeadRow) -> dict[str, Any]:
    """What a head's signature covers (and its `hash` digests)."""
    return {"position": head.position, "time": utc_iso(head.created_at), "table": head.chain_table,
            "chain_id": head.chain_id, "chain_index": head.chain_index, "head": head.head_hash,
            "prev": head.prev_hash, "key_id": head.key_id}


def head_hash(head: ChainHeadRow) -> str:
    return hashlib.sha256(canonical_json(head_payload(head))).hexdigest()


def _as_stored(row: Base) -> None:
    """Make the row hold what the database will hand back: Python-side column defaults applied,
    JSON values as JSON gives them back (tuples as lists, keys as strings, in the database's order).

    Values go into the row's `__dict__`, without the ORM's attribute events: a row is linked
    before it joins any unit of work (the record writer inserts `__dict__` with Core; a chained
    row added to a Session afterwards is pending, and the ORM inserts a pending row's `__dict__`),
    so the events would only record a history nothing reads (tests/test_chain_link_exact.py)."""
    values = row.__dict__
    spec = _columns(row)
    for key, default, is_callable in spec.defaults:
        if values.get(key) is None:
            values[key] = default(None) if is_callable else default
    present = {key: values[key] for key in spec.json if values.get(key) is not None}
    values.update(json.loads(json.dumps(present, default=str)))  # one round trip for all


@dataclass
class Lane:
    table: str
    chain_id: str
    index: int | None = None  # the next row's index; None until read from the database
    prev: str = GENESIS
    unsigned: int = 0
    # Monotonic time of the lane's last signed head (or of its creation): a head is due
    # `sign_interval_s` after it, or after `sign_every` rows, whichever comes first.
    signed_at: float = field(default_factory=time.monotonic)

    def link(self, rows: list[Base]) -> None:
        assert self.index is not None
        index, prev = self.index, self.prev
        for row in rows:
            _as_stored(row)
            values = row.__dict__  # as `_as_stored`: no ORM events for a row not yet in a unit of work
            values["chain_id"], values["chain_index"], values["chain_prev"] = self.chain_id, index, prev
            values["chain_hash"] = prev = row_hash(self.table, row, prev)
            index += 1

    def advance(self, rows: list[Base]) -> None:
        self.index = rows[-1].chain_index + 1
        self.prev = rows[-1].chain_hash
        self.unsigned += len(rows)


def chain_base(chain_id: str | None) -> str:
    """A writer's chain id: the configured one, else the host name (replicas' lanes stay apart)."""
    return (chain_id or socket.gethostname() or "assay")[:56]


class ChainWriter:
    def __init__(self, units_of_work: Callable[[], Session], signer: Signer | None = None, *,
                 chain_id: str | None = None, lanes: int = 8, sign_every: int = 1024,
                 sign_interval_s: float = 10.0) -> None:
        self.db = units_of_work
        self.signer = signer
        self.sign_every, self.sign_interval_s = sign_every, sign_interval_s
        base = chain_base(chain_id)
        self._lanes: dict[str, queue.LifoQueue[Lane]] = {}
        self._count = {table: lanes if table == "records" else 1 for table in CHAINED_TABLES}
        for table, count in self._count.items():
            self._lanes[table] = queue.LifoQueue()  # the lane used last: few chains when traffic is light
            for lane in reversed(range(count)):
                self._lanes[table].put(Lane(table, f"{base}.{lane}"))
        self._heads_lock = threading.Lock()
        self._heads_next: tuple[int, str] | None = None  # position and prev hash of the next signed head

    @contextmanager
    def lane(self, table: str) -> Iterator[Lane]:
        """One lane of `table`, held by the caller alone until the block ends."""
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
        with self.lane(table) as lane:
            for attempt in range(LINK_ATTEMPTS):
                if lane.index is None:
                    lane.index, lane.prev = self.read_head(lane)
                lane.link(rows)
                try:
                    with self.db() as s, s.begin():
                        write(s)
                except IntegrityError:
                    # Another writer on this chain id? Then link again after its rows.
                    head = self.read_head(lane)
                    if head == (lane.index, lane.prev) or attempt + 1 == LINK_ATTEMPTS:
                        raise
                    lane.index, lane.prev = head
                    for row in rows:
                        if "seq" in row.__table__.columns:
                            row.seq = None  # type: ignore[attr-defined]
                    continue
                lane.advance(rows)
                break
            self.sign_if_due(lane)

    def read_head(self, lane: Lane) -> tuple[int, str]:
        model = CHAINED_TABLES[lane.table]
        with self.db() as s:
            last = s.execute(select(model.chain_index, model.chain_hash)  # type: ignore[attr-defined]
                             .where(model.chain_id == lane.chain_id)  # type: ignore[attr-defined]
                             .order_by(model.chain_index.desc()).limit(1)).first()  # type: ignore[attr-defined]
            if last is None and lane.table == "records":  # every row of the chain archived?
                tip = archived_tips(s).get(lane.chain_id)
                if tip is not None:
                    return tip[0] + 1, tip[1]
        return (0, GENESIS) if last is None else (last[0] + 1, last[1])

    # ------------------------------------------------------------- signed heads

    def sign_if_due(self, lane: Lane) -> None:
        if self.signer is None or lane.unsigned == 0:
            return
        now = time.monotonic()
        if lane.unsigned < self.sign_every and now - lane.signed_at < self.sign_interval_s:
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
        """Sign every lane's unsigned rows now (at shutdown), waiting for writes in progress."""
        if self.signer is None:
            return
        for table, lanes in self._lanes.items():
            taken = [lanes.get() for _ in range(self._count[table])]
            try:
                for lane in taken:
                    if lane.unsigned:
                        try:
                            self._sign(lane)
                        except Exception:
                            log.exception("could not sign the head of chain %s/%s", lane.table, lane.chain_id)
            finally:
                for lane in taken:
                    lanes.put(lane)


def archived_tips(conn: Any) -> dict[str, tuple[int, str]]:
    """Per records chain id, the last archived (index, hash), over every archive so far."""
    tips: dict[str, tuple[int, str]] = {}
    for manifest in conn.execute(select(ArchiveRow.manifest).order_by(ArchiveRow.seq)).scalars():
        for chain_id, (_, last) in (manifest or {}).get("chains", {}).items():
            if chain_id not in tips or last[0] > tips[chain_id][0]:
                tips[chain_id] = (last[0], last[1])
    return tips
