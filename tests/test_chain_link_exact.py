"""The chain link leaves each record holding what the database hands back, and the hashes it
writes are those `assay audit verify` recomputes from the stored rows.

Held out (written and passing on main 4990678 before `Lane.link` stopped going through the
ORM's attribute events, issue 27 item 1, round 9): records of awkward values (JSON with tuples,
int keys, non-BMP text, -0.0, huge integers; defaults left to the writer; a group and a
single) are written through an `AuditStore` in several batches; then (1) every column of every
row object, as the writer left it, equals the same column read back through a fresh store's
ORM, (2) each stored `chain_hash` is `row_hash` of the stored row after the previous one's
hash, from the genesis on, and (3) the store's own verification finds nothing wrong. Labels go
through the ORM's unit of work after the link (`ChainWriter.write`): one is written and checked
the same way, so a link that set values the ORM does not insert would be caught.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select

from service.audit_chain import GENESIS, row_hash
from service.audit_verify import verify
from service.signing import Signer, load_private, utc_iso
from service.store import AuditStore
from service.tables import LabelRow, RecordRow, TaskBlobRow, new_record_id


def _rows(blob: TaskBlobRow, group: bool) -> list[RecordRow]:
    submission = new_record_id()
    odd = "∑ 𝔘 \u00e9\t\"q\" \\ </script> \u2028"
    base = dict(caller_key_id="k1", task_hash=blob.task_hash, task_public={"answer": odd, "pair": (1, 2)},
                verifier="math", verifier_version="7", response_hash="ab" * 32, sandbox_backend="process",
                submission_id=submission)
    if not group:
        return [RecordRow(id=new_record_id(), **base, response="\\boxed{1}", components={"c": {"value": -0.0}},
                          reward=0.25, verdict="correct", evidence={3: "int key", "t": (1, (2, 3))}, flags=[],
                          duration_ms=0.1234567, submission_index=0, request_id=f"r-{new_record_id()}")]
    return [RecordRow(id=new_record_id(), **base, response=f"{i} {odd}",
                      components={"correctness": {"value": 1.0, "hard": True}}, reward=float(i % 2),
                      verdict="correct" if i % 2 else "incorrect", evidence={"big": 10**30, "x": [odd, i]},
                      flags=["false_step"] if i else [], flag_evidence={"false_step": [{"line": i}]} if i else None,
                      duration_ms=1e300 if i == 2 else 0.5, group_id="g" * 32, group_index=i, advantage=0.5 - i,
                      group_mean=0.5, group_std=0.5, group_zero_variance=False, tokens=2**40, finish_reason="stop",
                      masked=bool(i == 1), usage={"cpu_s": 1e-9}, feedback={"hint": odd}, submission_index=i,
                      created_at=datetime(2026, 1, 2, 3, 4, 5, i, tzinfo=UTC))
            for i in range(3)]


def _columns(row: object) -> dict[str, object]:
    """Every column but `seq`; times as the chain writes them (SQLite hands back naive UTC)."""
    values = {c.key: getattr(row, c.key) for c in RecordRow.__table__.columns if c.key != "seq"}
    return {**values, "created_at": utc_iso(values["created_at"])}


def test_linked_rows_hold_what_is_stored_and_hash_as_verify_recomputes(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    key = tmp_path / "key.pem"
    signer = Signer.load_or_create(key)
    store = AuditStore(url, signer, chain_id="exact", lanes=1)
    blob = TaskBlobRow(task_hash="c" * 64, verifier="math", task={"answer": "∑", "list": (1, 2)})
    written: list[RecordRow] = []
    try:
        for group in (True, False, False, True):
            rows = _rows(blob, group)
            store.append(rows, [blob])
            written += rows
        label = LabelRow(id=new_record_id(), record_id=written[0].id, author="∑ (1, 2)", author_key_id="k1",
                         label="agree")
        store.chains.write("labels", [label], lambda s: s.add(label))
    finally:
        store.close()

    fresh = AuditStore(url, signer)
    try:
        with fresh.db() as s:
            stored = list(s.scalars(select(RecordRow).order_by(RecordRow.seq)))
            labels = list(s.scalars(select(LabelRow)))
        assert [r.id for r in stored] == [r.id for r in written]
        for mine, theirs in zip(written, stored, strict=True):
            assert _columns(mine) == _columns(theirs)
        prev = GENESIS
        for index, row in enumerate(stored):
            assert (row.chain_id, row.chain_index, row.chain_prev) == ("exact.0", index, prev)
            assert row.chain_hash == row_hash("records", row, prev)
            prev = row.chain_hash
        assert len(labels) == 1 and labels[0].chain_hash == row_hash("labels", labels[0], labels[0].chain_prev)
        assert labels[0].author == label.author and labels[0].chain_hash == label.chain_hash
        report = verify(fresh, {signer.key_id: load_private(key).public_key()})
        assert report.intact, report.summary()
    finally:
        fresh.close()
