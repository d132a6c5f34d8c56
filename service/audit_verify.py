"""`assay audit verify`: check every hash chain, every signed head, and the task blobs records point to.

What it finds, per chain (records, labels, evals), naming the first row at fault:
- `changed`: a row no longer hashes to its stored hash (a field was edited);
- `removed`: indexes missing from a chain, a chain shorter than a signed head says, or a
  signed head whose chain is gone;
- `relinked`: a row that does not link to the row before it (a row was changed and
  re-hashed, or one was slipped in);
- `rewritten`: a chain whose hashes are self-consistent but differ from a signed head
  (the rows after the last matching signed head were rewritten and re-hashed);
- `out_of_order`: a row whose `seq` (the order the viewer and API list) disagrees with
  its position in the chain;
- `unchained`: a row without chain fields written after chaining began;
- `head_*`: signed heads removed, changed, relinked, or with a bad or unknown signature;
- `task_blob_changed` / `task_blob_removed`: a task blob that no longer has the content
  its records were written with.
Rows written before revision 0007 carry no chain fields: they are counted as `legacy`
and not vouched for. Rows after a chain's last signed head are counted as `unsigned`:
a database owner could drop them from the end of the chain unnoticed, which is why the
report prints the newest signed head to keep outside the database (`--anchor`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import and_, func, or_, select

from assay_rules.canonical import canonical_json
from service.audit_chain import CHAINED_TABLES, GENESIS, head_hash, head_payload, row_hash, task_digest
from service.store import AuditStore
from service.tables import ChainHeadRow, RecordRow, TaskBlobRow

PAGE = 1000


@dataclass
class Problem:
    kind: str
    table: str
    message: str
    chain_id: str | None = None
    index: int | None = None
    row_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class ChainState:
    rows: int = 0
    next_index: int = 0
    prev: str = GENESIS
    last_seq: int | None = None
    signed_to: int | None = None  # the highest index a valid signed head vouches for
    archived: int = 0  # rows before the first one here, in archives (`assay audit archive`)
    after_good: str | None = None  # the first row after the last matching signed head
    broken: bool = False


@dataclass
class Report:
    problems: list[Problem] = field(default_factory=list)
    chains: dict[str, dict[str, ChainState]] = field(default_factory=dict)
    legacy: dict[str, int] = field(default_factory=dict)
    heads: int = 0
    newest_head: dict[str, Any] | None = None

    @property
    def intact(self) -> bool:
        return not self.problems

    def summary(self) -> dict[str, Any]:
        chains = {table: {cid: {"rows": st.rows, "archived": st.archived, "signed_to_index": st.signed_to,
                                "unsigned": st.rows if st.signed_to is None else
                                max(0, min(st.rows, st.archived + st.rows - st.signed_to - 1))}
                          for cid, st in states.items()} for table, states in self.chains.items()}
        return {"intact": self.intact, "problems": [p.as_dict() for p in self.problems], "chains": chains,
                "legacy_unchained": self.legacy, "signed_heads": self.heads, "newest_signed_head": self.newest_head}


def verify(store: AuditStore, keys: dict[str, Ed25519PublicKey], anchor: dict[str, Any] | None = None) -> Report:
    report = Report()
    heads = _check_heads(store, keys, report, anchor)
    for table in CHAINED_TABLES:
        _check_table(store, table, heads.get(table, {}), report)
    _check_blobs(store, report)
    return report


# ------------------------------------------------------------------ signed heads

def _check_heads(store: AuditStore, keys: dict[str, Ed25519PublicKey], report: Report,
                 anchor: dict[str, Any] | None) -> dict[str, dict[str, dict[int, tuple[str, int]]]]:
    """Valid heads by table, chain id and index: (head hash, position)."""
    valid: dict[str, dict[str, dict[int, tuple[str, int]]]] = {}
    expected, prev = 0, GENESIS
    seen_anchor = anchor is None
    with store.db() as s:
        for head in s.scalars(select(ChainHeadRow).order_by(ChainHeadRow.position)).yield_per(PAGE):
            report.heads += 1
            where = f"signed head {head.position} ({head.chain_table} chain {head.chain_id} index {head.chain_index})"
            problem = None
            if head.position != expected:
                problem = ("head_removed", f"signed heads {expected}..{head.position - 1} are missing (before "
                                           f"{where})")
            elif head_hash(head) != head.hash:
                problem = ("head_changed", f"{where} was changed: it no longer hashes to its stored hash")
            elif head.prev_hash != prev:
                problem = ("head_relinked", f"{where} does not link to the signed head before it")
            elif not _signature_ok(head, keys):
                known = "an unknown key" if head.key_id not in keys else "a signature that does not verify"
                problem = ("head_bad_signature", f"{where} carries {known} (key {head.key_id})")
            if problem is not None:
                report.problems.append(Problem(problem[0], "audit_heads", problem[1], head.chain_id, head.chain_index,
                                               str(head.position)))
            else:
                valid.setdefault(head.chain_table, {}).setdefault(head.chain_id, {})[head.chain_index] = (
                    head.head_hash, head.position)
            if anchor is not None and head.position == anchor.get("position"):
                seen_anchor = True
                if head.hash != anchor.get("hash"):
                    report.problems.append(Problem("head_changed", "audit_heads", f"{where} is not the anchored "
                                                   "head kept outside the database", row_id=str(head.position)))
            expected, prev = head.position + 1, head.hash
            report.newest_head = {"position": head.position, "hash": head.hash}
    if not seen_anchor:
        report.problems.append(Problem("head_removed", "audit_heads", f"the anchored signed head {anchor} is gone: "
                                       "the signed heads were cut back", row_id=str(anchor.get("position"))))
    return valid


def _signature_ok(head: ChainHeadRow, keys: dict[str, Ed25519PublicKey]) -> bool:
    key = keys.get(head.key_id)
    if key is None:
        return False
    try:
        key.verify(base64.b64decode(head.signature, validate=True), canonical_json(head_payload(head)))
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


# ------------------------------------------------------------------- chains

def _rows(store: AuditStore, model: Any) -> Iterator[Any]:
    """Chained rows by (chain id, index), a page at a time."""
    after: tuple[str, int] | None = None
    while True:
        stmt = select(model).where(model.chain_id.is_not(None)).order_by(model.chain_id, model.chain_index)
        if after is not None:
            stmt = stmt.where(or_(model.chain_id > after[0],
                                  and_(model.chain_id == after[0], model.chain_index > after[1])))
        with store.db() as s:
            page = list(s.scalars(stmt.limit(PAGE)))
        if not page:
            return
        yield from page
        after = (page[-1].chain_id, page[-1].chain_index)


def _check_table(store: AuditStore, table: str, heads: dict[str, dict[int, tuple[str, int]]], report: Report) -> None:
    model = CHAINED_TABLES[table]
    states = report.chains.setdefault(table, {})
    if table == "records":  # chains that continue after archived rows start at the last archived one
        from service.audit_chain import archived_tips
        with store.db() as s:
            for chain_id, (index, last_hash) in archived_tips(s).items():
                states[chain_id] = ChainState(next_index=index + 1, prev=last_hash, archived=index + 1)
    has_seq = "seq" in model.__table__.columns
    first_chained_seq: int | None = None
    for row in _rows(store, model):
        state = states.setdefault(row.chain_id, ChainState())
        state.rows += 1
        if has_seq:
            first_chained_seq = row.seq if first_chained_seq is None else min(first_chained_seq, row.seq)
        if state.after_good is None:
            state.after_good = row.id
        problem = _row_problem(table, row, state, has_seq)
        if problem is not None:
            kind, message = problem
            report.problems.append(Problem(kind, table, message, row.chain_id, row.chain_index, str(row.id)))
            state.broken = True
        signed = heads.get(row.chain_id, {}).get(row.chain_index)
        if signed is not None:
            if row.chain_hash == signed[0] and not state.broken:
                state.signed_to, state.after_good = row.chain_index, None
            elif row.chain_hash != signed[0]:
                report.problems.append(Problem(
                    "rewritten", table, f"{table} chain {row.chain_id} up to index {row.chain_index} differs from "
                    f"its signed head {signed[1]}: rows after the last matching signed head were rewritten; the first "
                    f"of them is {state.after_good}", row.chain_id, row.chain_index, str(state.after_good)))
                state.broken = True
        state.next_index, state.prev = row.chain_index + 1, row.chain_hash
        if has_seq:
            state.last_seq = row.seq
    for chain_id, signed in heads.items():
        state = states.get(chain_id)
        last = max(signed)
        if state is None:
            report.problems.append(Problem("removed", table, f"{table} chain {chain_id} is gone: a signed head "
                                           f"vouches for {last + 1} rows", chain_id, last))
        elif last >= state.next_index:
            report.problems.append(Problem("removed", table, f"{table} chain {chain_id} ends at index "
                                           f"{state.next_index - 1}, but signed head {signed[last][1]} vouches for "
                                           f"index {last}: rows {state.next_index}..{last} were removed",
                                           chain_id, state.next_index))
    _check_legacy(store, table, model, first_chained_seq, has_seq, report)


def _row_problem(table: str, row: Any, state: ChainState, has_seq: bool) -> tuple[str, str] | None:
    name = f"{table[:-1]} {row.id} ({table} chain {row.chain_id} index {row.chain_index})"
    if row_hash(table, row, row.chain_prev or "") != row.chain_hash:
        return "changed", f"{name} was changed: it no longer hashes to its stored hash"
    if row.chain_index > state.next_index:
        return "removed", (f"{table} chain {row.chain_id}: rows {state.next_index}..{row.chain_index - 1} are missing "
                           f"(before {name})")
    if row.chain_prev != state.prev:
        return "relinked", (f"{name} does not link to the row before it: a row was changed and re-hashed, or "
                            "inserted here")
    if has_seq and state.last_seq is not None and row.seq <= state.last_seq:
        return "out_of_order", (f"{name} is listed (seq {row.seq}) before the row it follows in the chain "
                                f"(seq {state.last_seq}): rows were reordered")
    return None


def _check_legacy(store: AuditStore, table: str, model: Any, first_chained_seq: int | None, has_seq: bool,
                  report: Report) -> None:
    with store.db() as s:
        report.legacy[table] = s.scalar(select(func.count()).select_from(model).where(model.chain_id.is_(None))) or 0
        if has_seq and first_chained_seq is not None and report.legacy[table]:
            late = s.scalar(select(model).where(model.chain_id.is_(None), model.seq > first_chained_seq)
                            .order_by(model.seq).limit(1))
            if late is not None:
                report.problems.append(Problem(
                    "unchained", table, f"{table[:-1]} {late.id} (seq {late.seq}) has no chain fields but was "
                    "written after chaining began: its chain fields were removed", row_id=str(late.id)))


# -------------------------------------------------------------------- blobs

def _check_blobs(store: AuditStore, report: Report) -> None:
    """Each task blob must still have the content its first chained record was written with."""
    expected: dict[str, tuple[str, str]] = {}
    with store.db() as s:
        for task_hash, digest, record_id in s.execute(
                select(RecordRow.task_hash, RecordRow.task_digest, RecordRow.id)
                .where(RecordRow.task_digest.is_not(None)).order_by(RecordRow.seq)).yield_per(PAGE):
            expected.setdefault(task_hash, (digest, record_id))
    hashes = list(expected)
    for start in range(0, len(hashes), 500):
        with store.db() as s:
            blobs = {b.task_hash: b for b in s.scalars(select(TaskBlobRow).where(
                TaskBlobRow.task_hash.in_(hashes[start:start + 500])))}
        for task_hash in hashes[start:start + 500]:
            digest, record_id = expected[task_hash]
            blob = blobs.get(task_hash)
            if blob is None:
                report.problems.append(Problem("task_blob_removed", "task_blobs", f"task blob {task_hash} is gone "
                                               f"(record {record_id} points to it)", row_id=task_hash))
            elif task_digest(blob) != digest:
                report.problems.append(Problem("task_blob_changed", "task_blobs", f"task blob {task_hash} was "
                                               f"changed: it is not the task record {record_id} was verified "
                                               "against", row_id=task_hash))
